package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
)

// Hardening defaults, applied when the Spec leaves the field at its zero value.
var (
	// DefaultCapDrop drops every capability; DefaultCapAdd then gives back
	// the few a root user in a dev container needs to own and manage its
	// files and processes. Dropped, among others: NET_RAW, NET_BIND_SERVICE,
	// MKNOD, SYS_CHROOT, AUDIT_WRITE, SETFCAP, SETPCAP, FSETID.
	DefaultCapDrop = []string{"ALL"}
	DefaultCapAdd  = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"}
	// DefaultSecurityOpt stops setuid binaries and file capabilities from
	// raising privileges.
	DefaultSecurityOpt = []string{"no-new-privileges:true"}
)

const (
	// DefaultPidsLimit caps the processes of one sandbox (fork bombs).
	DefaultPidsLimit int64 = 1024
	// DefaultNetwork is the network mode when Spec.Network is empty.
	DefaultNetwork = NetworkProxy
)

// Labels on every container the Docker runtime creates.
const (
	LabelManaged    = "dev.beige.managed"     // "true"
	LabelAgent      = "dev.beige.agent"       // the agent name
	LabelConfigHash = "dev.beige.config-hash" // ConfigHash of the spec
	LabelInstance   = "dev.beige.instance"    // DockerOptions.Instance, when set
)

// ContainerPrefix starts the name (and hostname) of every sandbox container.
const ContainerPrefix = "beige-"

// containerLayout is part of the config hash; bump it when the way a Spec
// becomes a container changes, so that old containers are recreated.
const containerLayout = 1

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// ContainerName returns the container name of an agent's sandbox.
func ContainerName(agent string) string { return ContainerPrefix + agent }

// validate checks the parts of a spec the runtime relies on.
func (s *Spec) validate() error {
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
	if s.MemoryLimit < 0 || s.CPUs < 0 || math.IsNaN(s.CPUs) || math.IsInf(s.CPUs, 0) {
		return errors.New("negative or invalid resource limit")
	}
	return nil
}

// ConfigHash returns the hex sha256 that identifies the container a spec
// gives. helperSum is the sha256 of the helper binary's content (so an
// upgraded binary recreates the containers), imageID the engine's ID of
// spec.Image (so a rebuilt image does too) and instance DockerOptions.Instance.
// Zero values and their documented defaults hash the same.
func ConfigHash(spec Spec, helperSum, imageID, instance string) string {
	s := spec
	if len(s.Packages) == 0 {
		s.Packages = nil
	}
	if len(s.Skills) == 0 {
		s.Skills = nil
	}
	if len(s.Env) == 0 {
		s.Env = nil
	}
	if len(s.ExtraMounts) == 0 {
		s.ExtraMounts = nil
	}
	if s.PidsLimit == 0 {
		s.PidsLimit = DefaultPidsLimit
	}
	if s.Network == "" {
		s.Network = DefaultNetwork
	}
	in := struct {
		Layout   int
		Spec     Spec
		Helper   string
		Image    string
		Instance string
	}{containerLayout, s, helperSum, imageID, instance}
	b, err := json.Marshal(in)
	if err != nil {
		panic("sandbox: hash spec: " + err.Error()) // plain data; cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// containerConfig turns spec into the engine's create request. It is pure:
// prepareHost creates what must exist on the host first.
func containerConfig(spec Spec, labels map[string]string) (*container.Config, *container.HostConfig) {
	network, netEnv := networkOf(spec)
	env := []string{"PATH=" + DefaultPATH}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if _, ok := netEnv[k]; k == "PATH" || ok {
			continue // PATH is always DefaultPATH; the network's variables win
		}
		env = append(env, k+"="+spec.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(netEnv)) {
		env = append(env, k+"="+netEnv[k])
	}
	cmd := []string{HelperPath, "idle"}
	if spec.HelperBinary == "" {
		// No helper binary: idle with the image's shell.
		cmd = []string{"/bin/sh", "-c", `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`}
	}
	cfg := &container.Config{
		Hostname:   ContainerName(spec.Agent),
		Image:      spec.Image,
		Env:        env,
		Entrypoint: cmd, // replaces the image's entrypoint; the image's CMD is not used
		WorkingDir: WorkspacePath,
		Labels:     labels,
	}

	pids := spec.PidsLimit
	if pids == 0 {
		pids = DefaultPidsLimit
	}
	capDrop, capAdd, secOpt := spec.CapDrop, spec.CapAdd, spec.SecurityOpt
	if capDrop == nil {
		capDrop = DefaultCapDrop
	}
	if capAdd == nil {
		capAdd = DefaultCapAdd
	}
	if secOpt == nil {
		secOpt = DefaultSecurityOpt
	}
	yes := true
	host := &container.HostConfig{
		Mounts:      mounts(spec),
		NetworkMode: container.NetworkMode(network),
		CapDrop:     slices.Clone(capDrop),
		CapAdd:      slices.Clone(capAdd),
		SecurityOpt: slices.Clone(secOpt),
		Runtime:     spec.Runtime,
		Init:        &yes,
		Resources: container.Resources{
			Memory:    spec.MemoryLimit,
			NanoCPUs:  int64(math.Round(spec.CPUs * 1e9)),
			PidsLimit: &pids,
		},
	}
	return cfg, host
}

// mounts lists the bind mounts of spec, parents before children.
func mounts(spec Spec) []mount.Mount {
	var ms []mount.Mount
	add := func(src, dst string, ro bool) {
		if src != "" {
			ms = append(ms, mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: ro})
		}
	}
	add(spec.Workspace, WorkspacePath, false)
	add(spec.Launchers, ToolsBinPath, true)
	add(spec.PackagesDir, PackagesPath, true)
	for _, name := range slices.Sorted(maps.Keys(spec.Packages)) {
		add(spec.Packages[name], path.Join(PackagesPath, name), true)
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Skills)) {
		add(spec.Skills[name], path.Join(SkillsPath, name), true)
	}
	add(spec.SocketDir, BeigeDir, true)
	add(spec.HelperBinary, ToolClientPath, true)
	add(spec.HelperBinary, HelperPath, true)
	for _, m := range spec.ExtraMounts {
		add(m.Source, path.Clean(m.Target), m.ReadOnly)
	}
	slices.SortStableFunc(ms, func(a, b mount.Mount) int {
		return strings.Count(a.Target, "/") - strings.Count(b.Target, "/")
	})
	return ms
}

// prepareHost creates the host folders the mounts need: the workspace,
// launcher, packages and socket folders, and the empty mount points inside
// the read-only parents (a read-only mount cannot get new mount points).
func prepareHost(spec Spec) error {
	for _, dir := range []string{spec.Workspace, spec.Launchers, spec.PackagesDir, spec.SocketDir} {
		if dir == "" {
			continue
		}
		mode := os.FileMode(0o755)
		if dir == spec.SocketDir {
			mode = 0o700 // the agent's socket: only the gateway's user (and the sandbox's root) may enter
		}
		if err := os.MkdirAll(dir, mode); err != nil {
			return fmt.Errorf("prepare host folder: %w", err)
		}
	}
	if spec.PackagesDir != "" {
		for name := range spec.Packages {
			if err := os.MkdirAll(filepath.Join(spec.PackagesDir, name), 0o755); err != nil {
				return fmt.Errorf("prepare package mount point: %w", err)
			}
		}
	}
	if spec.HelperBinary != "" {
		if _, err := os.Stat(spec.HelperBinary); err != nil {
			return fmt.Errorf("helper binary: %w", err)
		}
		if spec.SocketDir != "" {
			for _, name := range []string{path.Base(ToolClientPath), path.Base(HelperPath)} {
				if err := touch(filepath.Join(spec.SocketDir, name)); err != nil {
					return fmt.Errorf("prepare helper mount point: %w", err)
				}
			}
		}
	}
	return nil
}

func touch(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// fileSum returns the hex sha256 of a file's content.
func fileSum(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ParseMemory parses a memory size: plain bytes ("1048576") or a number with
// a k, m, g or t suffix in powers of 1024, optionally followed by "b" or "i"
// ("512m", "2g", "1.5G", "3gb"). The empty string is 0 (no limit).
func ParseMemory(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, nil
	}
	t = strings.TrimSuffix(strings.TrimSuffix(t, "b"), "i")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	if t == "" || strings.Trim(t, "0123456789.") != "" {
		return 0, fmt.Errorf("invalid memory size %q", s)
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("invalid memory size %q", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid memory size %q", s)
	}
	return int64(f * float64(mult)), nil
}
