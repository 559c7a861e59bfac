package sandbox

import (
	"errors"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Hardening defaults, applied when the Spec leaves the field at its zero value.
var (
	// DefaultCapDrop drops every capability; DefaultCapAdd then gives back
	// only what the root helper needs to run commands and file operations as
	// the agent's user (SETUID, SETGID) and to stop them (KILL). Agent code
	// runs as a non-root user, so it has none of them in effect. Dropped,
	// among others: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, NET_RAW,
	// NET_BIND_SERVICE, MKNOD, SYS_CHROOT, AUDIT_WRITE, SETFCAP, SETPCAP.
	DefaultCapDrop = []string{"ALL"}
	DefaultCapAdd  = []string{"SETUID", "SETGID", "KILL"}
	// RootCapAdd replaces DefaultCapAdd when agent code runs as root
	// (Spec.User "0:0"): what a root user in a dev container needs to own and
	// manage its files and processes.
	RootCapAdd = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"}
	// DefaultSecurityOpt stops setuid binaries and file capabilities from
	// raising privileges.
	DefaultSecurityOpt = []string{"no-new-privileges:true"}
)

const (
	// DefaultPidsLimit caps the processes of one sandbox (fork bombs).
	DefaultPidsLimit int64 = 1024
	// DefaultMemoryLimit is the memory of a sandbox when Spec.MemoryLimit is 0.
	DefaultMemoryLimit int64 = 3 << 30
	// DefaultCPUs is the CPU share of a sandbox when Spec.CPUs is 0: one
	// CPU's worth of time, so that one agent cannot load every core of the host.
	DefaultCPUs = 1.0
	// HomePath is $HOME in every sandbox: a tmpfs owned by the agent's user
	// (the image may have no home for that uid, and the root filesystem may
	// be read-only). Its content is lost when the container is recreated.
	HomePath = "/home/beige"
	// TmpPath is a tmpfs (mode 1777) in every sandbox.
	TmpPath = "/tmp"
	// DefaultNetwork is the network mode when Spec.Network is empty.
	DefaultNetwork = NetworkProxy
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// ValidName reports whether s may name an agent, a package or a skill:
// letters, digits, '_', '.', '-', starting with a letter or digit; at most 63.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Validate checks the parts of a spec a runtime relies on.
func (s *Spec) Validate() error {
	if !nameRE.MatchString(s.Agent) {
		return fmt.Errorf("invalid agent name %q (want letters, digits, '_', '.', '-'; at most 63)", s.Agent)
	}
	if s.Image == "" {
		return errors.New("no image")
	}
	for _, m := range []map[string]string{s.Packages, s.Skills} {
		for name, src := range m {
			if !nameRE.MatchString(name) {
				return fmt.Errorf("invalid package or skill name %q", name)
			}
			if !filepath.IsAbs(src) {
				return fmt.Errorf("mount source %q of %q is not an absolute path", src, name)
			}
		}
	}
	for _, p := range []string{s.Workspace, s.Launchers, s.PackagesDir, s.SocketDir, s.HelperBinary} {
		if p != "" && !filepath.IsAbs(p) {
			return fmt.Errorf("host path %q is not absolute", p)
		}
	}
	for _, m := range s.ExtraMounts {
		if !filepath.IsAbs(m.Source) || !path.IsAbs(m.Target) {
			return fmt.Errorf("extra mount %q -> %q: paths must be absolute", m.Source, m.Target)
		}
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("invalid environment variable %q", k)
		}
	}
	if math.IsNaN(s.CPUs) || math.IsInf(s.CPUs, 0) || s.CPUs > 1e6 {
		return errors.New("invalid CPU limit")
	}
	if s.PidsLimit < -1 {
		return errors.New("invalid pids limit")
	}
	if _, _, err := ParseUser(s.User); err != nil {
		return err
	}
	return nil
}

// EffectiveUser returns the spec's "uid:gid", with the default filled in.
func (s *Spec) EffectiveUser() string {
	if s.User == "" {
		return DefaultUser()
	}
	return s.User
}

// IsRoot reports whether agent code of the spec runs as root.
func (s *Spec) IsRoot() bool {
	uid, _, err := ParseUser(s.User)
	return err == nil && uid == 0
}

// PackageFiles are the files of a plugin folder (Spec.Packages) that the
// sandbox sees, copied into PackagesDir/<plugin>: its manifest and docs.
var PackageFiles = []string{"plugin.json", "README.md", "SKILL.md"}
