// Package jail owns the confinement of plugin host processes in their own
// Linux namespaces (mount, network, IPC, UTS, PID, and a user namespace when
// the gateway is not root), so that the gateway's loopback API, Unix sockets
// and files do not exist for a plugin host.
//
// Command builds the *exec.Cmd: the running binary re-executes itself with
// the hidden first argument "__plugin-jail" (handled by this package's init,
// before any command line parsing) and its Spec in the environment. That
// jail init, already in the new namespaces, builds a new root on a tmpfs
// from read-only binds of a system allowlist and the Spec's folders, brings
// up lo (the only interface), pivots into it, sets no-new-privileges, drops
// every capability and runs the plugin's program: exec'd directly, or, when
// the plugin has an egress socket, as its child while the init stays PID 1
// running the egress forwarder on 127.0.0.1:3128.
package jail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Arg is the hidden first argument of the jail init.
const Arg = "__plugin-jail"

// specEnv is the variable that carries the Spec to the jail init; the
// init removes it (the program gets Spec.Env only).
const specEnv = "BEIGE_PLUGIN_JAIL_SPEC"

// ProxyAddr is where the forwarder listens inside the jail.
const ProxyAddr = "127.0.0.1:3128"

// Spec is what runs in a jail. Paths are host paths; they keep their names
// inside the jail.
type Spec struct {
	Path string   `json:"path"` // the program, absolute
	Args []string `json:"args"` // its arguments, without argv[0]
	Env  []string `json:"env"`
	Dir  string   `json:"dir"` // working folder (must be one of the folders below)
	// ReadOnly and ReadWrite are folders (or files) bound into the jail.
	// The program's own folder is added read-only.
	ReadOnly  []string `json:"ro"`
	ReadWrite []string `json:"rw"`
	// EgressSocket is the host path of the Unix socket of the plugin's
	// egress proxy ("": the jail has no network at all).
	EgressSocket string `json:"egress"`
	// RootDir is the empty folder the jail's root is mounted on, one per
	// gateway uid (Command fills it in).
	RootDir string `json:"root"`
}

func (s *Spec) check() error {
	if !filepath.IsAbs(s.Path) {
		return fmt.Errorf("program %q is not an absolute path", s.Path)
	}
	for _, l := range [][]string{s.ReadOnly, s.ReadWrite, {s.Dir}} {
		for _, p := range l {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
				return fmt.Errorf("folder %q must be a clean absolute path other than /", p)
			}
		}
	}
	if s.RootDir != "" && !filepath.IsAbs(s.RootDir) {
		return fmt.Errorf("root folder %q is not an absolute path", s.RootDir)
	}
	if s.EgressSocket != "" && !filepath.IsAbs(s.EgressSocket) {
		return fmt.Errorf("egress socket %q is not an absolute path", s.EgressSocket)
	}
	for _, e := range s.Env {
		if strings.HasPrefix(e, specEnv+"=") {
			return errors.New("the program's env must not hold the jail's spec")
		}
	}
	return nil
}

// Command returns the command that runs spec in a jail. The caller sets
// Stdout, Stderr, ExtraFiles (passed through to the program with the same
// numbers), Cancel and WaitDelay; SysProcAttr is the jail's (its own
// process group, so killing -pid kills the jail with everything in it).
func Command(ctx context.Context, spec Spec) (*exec.Cmd, error) {
	if err := spec.check(); err != nil {
		return nil, fmt.Errorf("plugin jail: %w", err)
	}
	if err := Available(); err != nil {
		return nil, fmt.Errorf("no plugin jail available: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("plugin jail: find own binary: %w", err)
	}
	spec.RootDir = filepath.Join(os.TempDir(), fmt.Sprintf(".beige-plugin-jail-%d", os.Geteuid()))
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("plugin jail: encode spec: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, Arg)
	cmd.Env = []string{specEnv + "=" + string(data)}
	cmd.Dir = "/"
	if err := setNamespaces(cmd, os.Geteuid()); err != nil {
		return nil, fmt.Errorf("plugin jail: %w", err)
	}
	return cmd, nil
}

var probe = sync.OnceValue(Probe)

// Available reports, once per process, whether plugin hosts can be jailed
// here (see Probe); the error says why not.
func Available() error { return probe() }

// Probe reports whether the kernel lets this process create the namespaces a
// plugin host runs in, by starting `true` in them. The error says why not.
func Probe() error {
	path, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("probe plugin jail: find true: %w", err)
	}
	cmd := exec.Command(path)
	cmd.Env = []string{}
	if err := setNamespaces(cmd, os.Geteuid()); err != nil {
		return fmt.Errorf("probe plugin jail: %w", err)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("probe plugin jail: start in new namespaces: %w", err)
	}
	return nil
}

func init() {
	if len(os.Args) > 1 && os.Args[1] == Arg {
		runInit()
	}
}

func decodeSpec(s string) (*Spec, error) {
	var spec Spec
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&spec); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	if err := spec.check(); err != nil {
		return nil, err
	}
	return &spec, nil
}
