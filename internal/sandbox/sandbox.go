// Package sandbox is the runtime-neutral side of the agents' sandboxes: the
// Spec of one agent's container, the Sandbox, Freezer and Runtime interfaces,
// exec requests and results, the paths inside every sandbox, the hardening
// defaults and the network modes. It imports no container engine: the Docker
// implementation is internal/sandbox/docker, and code that only runs
// commands in a sandbox (tools, the agent loop) depends on this package alone.
package sandbox

import (
	"path"

	"context"
	"errors"
	"fmt"
	"github.com/beige-dev/beige/internal/proto"
	"os"
	"strconv"
	"strings"
	"time"
)

// Paths inside every sandbox.
const (
	WorkspacePath  = "/workspace"
	ToolsBinPath   = "/tools/bin"
	PackagesPath   = "/tools/packages"
	SkillsPath     = "/skills"
	BeigeDir       = "/beige"
	SocketPath     = "/beige/gateway.sock"
	ToolClientPath = "/beige/tool-client"
	HelperPath     = "/beige/beige-sandbox"
	DefaultPATH    = "/tools/bin:/usr/local/bin:/usr/bin:/bin"
)

// Errors a Sandbox returns; callers test them with errors.Is.
var (
	ErrNotExist    = errors.New("sandbox: no such file or directory")
	ErrIsDir       = errors.New("sandbox: is a directory")
	ErrNotRunning  = errors.New("sandbox: not running")
	ErrNoSuchAgent = errors.New("sandbox: no sandbox for agent")
)

// Mount is a bind mount from the host into the sandbox.
type Mount struct {
	Source   string // host path
	Target   string // path in the sandbox
	ReadOnly bool
}

// Spec describes the container of one agent. Two specs that are equal give
// the same config hash; a running container with another hash is recreated.
type Spec struct {
	Agent string // safe identifier; the container is named beige-<agent>
	Image string

	Workspace   string // host folder mounted rw at /workspace
	Launchers   string // host folder mounted ro at /tools/bin
	PackagesDir string // gateway-owned host folder mounted ro at /tools/packages
	// Packages maps a plugin name to its host folder. Only its documentation
	// (PackageFiles, regular files only) is copied into PackagesDir/<name>,
	// seen at /tools/packages/<name>: the folder itself is never mounted, so
	// nothing else in it (a secret.env, say) reaches the sandbox.
	Packages     map[string]string
	Skills       map[string]string // skill name -> host folder, mounted ro at /skills/<name>
	SocketDir    string            // host folder holding gateway.sock, mounted ro at /beige
	HelperBinary string            // host path of the static beige-sandbox binary, mounted ro at /beige/tool-client and /beige/beige-sandbox
	ExtraMounts  []Mount
	Env          map[string]string // sandbox.extraEnv; PATH is always DefaultPATH
	// User is "uid:gid" (numeric) that the agent's commands and file
	// operations run as; "" = DefaultUser(). "0:0" (root) only when asked for.
	User string

	MemoryLimit int64   // bytes; 0 = DefaultMemoryLimit, < 0 = no limit
	CPUs        float64 // 0 = DefaultCPUs, < 0 = no limit
	PidsLimit   int64   // 0 = default (see DefaultPidsLimit), -1 = no limit
	// ReadOnlyRootfs mounts the image's root filesystem read-only; /tmp,
	// $HOME (HomePath) and the mounts stay writable.
	ReadOnlyRootfs bool
	Network        string // "proxy" (default), "none", "open" (or "bridge") or a Docker network name; see NetworkProxy
	Runtime        string // OCI runtime, e.g. "runsc"; "" = engine default
	// CapAdd nil means DefaultCapAdd (RootCapAdd when User is root).
	CapAdd  []string
	CapDrop []string // when nil, the documented default drop list applies (DefaultCapDrop)
	// SecurityOpt is passed to the engine; when nil, DefaultSecurityOpt
	// (no-new-privileges) applies.
	SecurityOpt []string
}

// RootUser is the User value that runs agent code as root.
const RootUser = "0:0"

// DefaultUser is the user agent code runs as when Spec.User is empty: the
// gateway's own uid:gid when the gateway is not root (workspace files then
// belong to the operator), else 1000:1000. Agent code never runs as root by
// default: without a user namespace, container root is host root.
func DefaultUser() string {
	if uid := os.Getuid(); uid > 0 {
		return strconv.Itoa(uid) + ":" + strconv.Itoa(os.Getgid())
	}
	return "1000:1000"
}

// ParseUser parses a "uid:gid" pair of numbers; "" means DefaultUser().
func ParseUser(s string) (uid, gid int, err error) {
	if s == "" {
		s = DefaultUser()
	}
	us, gs, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("user %q: want numeric \"uid:gid\"", s)
	}
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 || uid > 1<<31-2 || gid > 1<<31-2 {
		return 0, 0, fmt.Errorf("user %q: want numeric \"uid:gid\"", s)
	}
	return uid, gid, nil
}

// ExecRequest is one command run with sh -c in the sandbox.
type ExecRequest struct {
	Command     string            // passed to sh -c as one argument, never re-quoted
	Env         map[string]string // added to the container's env for this call (BEIGE_* etc.)
	Dir         string            // working folder; default /workspace
	Timeout     time.Duration     // 0 = none; on expiry the whole process group is killed
	Stdin       []byte
	OutputLimit int // bytes of combined stdout+stderr kept; 0 = DefaultOutputLimit
}

// DefaultOutputLimit is how much output an exec keeps when the request says nothing.
const DefaultOutputLimit = 50 * 1024

// Normalize returns r with its defaults filled in, as every runtime runs
// it: OutputLimit DefaultOutputLimit when unset and at most what one helper
// answer carries, Dir /workspace when unset and resolved (ResolvePath). An
// environment variable with an empty or invalid name, or a NUL in its
// value, is an error.
func (r ExecRequest) Normalize() (ExecRequest, error) {
	if r.OutputLimit <= 0 {
		r.OutputLimit = DefaultOutputLimit
	}
	r.OutputLimit = min(r.OutputLimit, proto.MaxHelperBody)
	if r.Dir == "" {
		r.Dir = WorkspacePath
	}
	r.Dir = ResolvePath(r.Dir)
	for k, v := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return r, fmt.Errorf("invalid environment variable %q", k)
		}
	}
	return r, nil
}

// ResolvePath makes p absolute — a relative path is under WorkspacePath —
// and clean, as every runtime resolves the paths of file operations and
// exec's Dir.
func ResolvePath(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(WorkspacePath, p)
	}
	return path.Clean(p)
}

// ExecResult is what a command did. Output holds stdout and stderr interleaved
// as written (2>&1), cut after the limit; OutputBytes is the true size.
type ExecResult struct {
	Output      []byte
	OutputBytes int64
	ExitCode    int
	TimedOut    bool
	Duration    time.Duration
}

// Truncated reports whether output was cut.
func (r ExecResult) Truncated() bool { return int64(len(r.Output)) < r.OutputBytes }

// Sandbox is the running container of one agent.
type Sandbox interface {
	ID() string // container ID
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	// ReadFile returns at most max bytes of the file and its true size.
	ReadFile(ctx context.Context, path string, max int64) (data []byte, size int64, err error)
	// WriteFile writes data to path, creating parent folders.
	WriteFile(ctx context.Context, path string, data []byte) error
}

// Freezer is an optional ability of a Sandbox: Freeze stops every process
// in it until thaw is called, so that the gateway can check files of the
// workspace and then use them without the agent changing them in between.
// Freezes nest: the sandbox runs again when every thaw has been called.
type Freezer interface {
	Freeze(ctx context.Context) (thaw func(), err error)
}

// Runtime creates and tracks sandboxes. Docker (internal/sandbox/docker) is the one implementation
// today; gVisor (through Spec.Runtime), remote engines and Kubernetes fit
// behind the same interface.
type Runtime interface {
	// Ensure returns the running sandbox for spec.Agent: it re-attaches to a
	// running container with the same config hash, and (re)creates otherwise.
	Ensure(ctx context.Context, spec Spec) (Sandbox, error)
	// Prune removes the sandboxes of agents not in keep, returning their names.
	Prune(ctx context.Context, keep []string) ([]string, error)
	// Close drops connections to the sandboxes (helpers exit); the containers
	// keep running so that the next gateway re-attaches to them.
	Close() error
}
