// Package home owns the layout of $BEIGE_HOME (default ~/.beige): where the
// config, sockets, logs, sessions and agent folders live, and the lazy
// first-run setup that creates them.
package home

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Home is one $BEIGE_HOME folder.
type Home struct {
	Dir string
}

// Default returns $BEIGE_HOME, or ~/.beige when it is unset.
func Default() (Home, error) {
	if d := os.Getenv("BEIGE_HOME"); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return Home{}, fmt.Errorf("BEIGE_HOME %q: %w", d, err)
		}
		return Home{Dir: abs}, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return Home{}, fmt.Errorf("find home folder (set BEIGE_HOME): %w", err)
	}
	return Home{Dir: filepath.Join(h, ".beige")}, nil
}

func (h Home) path(elem ...string) string { return filepath.Join(append([]string{h.Dir}, elem...)...) }

// Config is the default config file.
func (h Home) Config() string { return h.path("config.json5") }

// PIDFile holds the pid of a running gateway.
func (h Home) PIDFile() string { return h.path("gateway.pid") }

// AddrFile holds the host:port the running gateway's API listens on, which
// the CLI uses instead of the config's (edited since, perhaps); believed
// only while the lock is held.
func (h Home) AddrFile() string { return h.path("gateway.addr") }

// LockFile is locked (flock) by the running gateway for its whole life; the
// PID file is believed only while it is held.
func (h Home) LockFile() string { return h.path("gateway.lock") }

// LogsDir holds audit.jsonl and gateway.log.
func (h Home) LogsDir() string { return h.path("logs") }

// AuditLog is the audit log.
func (h Home) AuditLog() string { return h.path("logs", "audit.jsonl") }

// GatewayLog is the gateway's own log, unless gateway.logFile says otherwise.
func (h Home) GatewayLog() string { return h.path("logs", "gateway.log") }

// AuditHead is the audit chain's head: the newest record's seq and hash.
func (h Home) AuditHead() string { return h.path("data", "audit-head") }

// DataDir holds provider-health.json and plugin data.
func (h Home) DataDir() string { return h.path("data") }

// PackagesDir is where `beige plugins install` keeps packages with several
// plugins whole (plugins/<name> links into them), as the original does.
func (h Home) PackagesDir() string { return h.path("packages") }

// EgressCADir holds the egress proxy's CA (ca.key 0600, ca.pem), made at
// the first start of a gateway with sandbox.egress.credentials.
func (h Home) EgressCADir() string { return h.path("data", "egress-ca") }

// SessionsDir holds session files, session-map.json and session-settings.json.
func (h Home) SessionsDir() string { return h.path("sessions") }

// SocketsDir holds one socket per agent; only the gateway's user may enter it.
func (h Home) SocketsDir() string { return h.path("sockets") }

// SocketDir is the per-agent folder mounted at /beige in the sandbox; it
// holds the agent's gateway.sock. (A folder is mounted, not the socket
// file, so that a restarted gateway's new socket is seen by a running
// sandbox.)
func (h Home) SocketDir(agent string) string { return h.path("sockets", agent) }

// Socket is the agent's socket; SocketLink ($BEIGE_HOME/sockets/<agent>.sock)
// points at it.
func (h Home) Socket(agent string) string { return h.path("sockets", agent, "gateway.sock") }

// SocketLink is the documented $BEIGE_HOME/sockets/<agent>.sock.
func (h Home) SocketLink(agent string) string { return h.path("sockets", agent+".sock") }

// AgentDir holds an agent's workspace, launchers and package mountpoints.
func (h Home) AgentDir(agent string) string { return h.path("agents", agent) }

// Workspace is the default host folder mounted at /workspace.
func (h Home) Workspace(agent string) string { return h.path("agents", agent, "workspace") }

// Launchers is the host folder mounted at /tools/bin.
func (h Home) Launchers(agent string) string { return h.path("agents", agent, "launchers") }

// Packages is the host folder mounted at /tools/packages.
func (h Home) Packages(agent string) string { return h.path("agents", agent, "packages") }

// ToolsDir holds the documentation of built-in plugins, written by setup.
func (h Home) ToolsDir() string { return h.path("tools") }

//go:embed config.template.json5
var configTemplate []byte

// ConfigTemplate is the commented config that setup writes.
func ConfigTemplate() []byte { return configTemplate }

// Exists reports whether the home folder exists.
func (h Home) Exists() bool {
	_, err := os.Stat(h.Dir)
	return err == nil
}

// private are the folders no other local user may enter: $BEIGE_HOME itself
// (config, sessions, logs and the agents' workspaces, where a sandbox may
// leave setuid files of its own user), and, in case it is opened up, what
// is under it that holds secrets or workspaces.
func (h Home) private() []string {
	return []string{h.Dir, h.path("agents"), h.SocketsDir(), h.LogsDir(), h.DataDir(), h.SessionsDir()}
}

// Secure makes the private folders that exist 0700 (a folder made by an
// older beige was 0755) and returns those it changed with their old mode,
// for the caller to log. It never creates anything, and does not follow a
// symbolic link below $BEIGE_HOME.
func (h Home) Secure() (fixed []string, err error) {
	for i, p := range h.private() {
		stat := os.Lstat
		if i == 0 {
			stat = os.Stat // $BEIGE_HOME itself may be a link the operator made
		}
		fi, err := stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fixed, fmt.Errorf("secure %s: %w", p, err)
		}
		if !fi.IsDir() {
			continue
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(p, perm&^0o077); err != nil {
				return fixed, fmt.Errorf("secure %s: %w", p, err)
			}
			fixed = append(fixed, fmt.Sprintf("%s (was %#o, now %#o)", p, perm, perm&^0o077))
		}
	}
	return fixed, nil
}

// Setup creates the layout: the folders and, when there is none, a config
// from the template. It is idempotent and never overwrites a config. It
// returns what it created, for the user to see.
func (h Home) Setup() (created []string, err error) {
	dirs := []struct {
		path string
		mode fs.FileMode
	}{
		{h.Dir, 0o700},
		{h.path("agents"), 0o700},
		{h.SocketsDir(), 0o700},
		{h.LogsDir(), 0o700},
		{h.DataDir(), 0o700},
		{h.SessionsDir(), 0o700},
		{h.ToolsDir(), 0o755},
	}
	for _, d := range dirs {
		if _, err := os.Stat(d.path); err == nil {
			continue // Secure below tightens the private ones
		}
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return created, fmt.Errorf("setup: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return created, fmt.Errorf("setup: %w", err)
		}
		created = append(created, d.path+"/")
	}
	if _, err := h.Secure(); err != nil {
		return created, fmt.Errorf("setup: %w", err)
	}
	f, err := os.OpenFile(h.Config(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		return created, fmt.Errorf("setup: %w", err)
	default:
		_, werr := f.Write(configTemplate)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return created, fmt.Errorf("setup: write %s: %w", h.Config(), werr)
		}
		created = append(created, h.Config())
	}
	return created, nil
}
