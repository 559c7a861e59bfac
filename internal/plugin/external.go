package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/config"
)

// DefaultExternalTimeout is how long an external plugin's command may run
// when its plugin.json gives no run.timeout.
const DefaultExternalTimeout = 60 * time.Second

// external is a plugin whose plugin.json has a run command: every tool it
// provides runs that command on the host, once per call.
type external struct {
	name, dir string
	manifest  *config.Manifest
	program   string   // resolved command[0]
	args      []string // command[1:]
	timeout   time.Duration
}

// newExternal resolves the run command of the plugin in dir: command[0] is
// used as is when absolute; joined to dir when it has a slash or names a
// file in dir; looked up in PATH otherwise.
func newExternal(name, dir string, m *config.Manifest) (*external, error) {
	run := m.Run
	if run == nil || len(run.Command) == 0 || run.Command[0] == "" {
		return nil, fmt.Errorf("plugin %s: plugin.json has no run.command", name)
	}
	if run.Timeout < 0 {
		return nil, fmt.Errorf("plugin %s: run.timeout must not be negative", name)
	}
	prog := run.Command[0]
	switch {
	case filepath.IsAbs(prog):
	case strings.ContainsRune(prog, '/') || fileExists(filepath.Join(dir, prog)):
		prog = filepath.Join(dir, prog)
	default:
		p, err := lookPath(prog)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: run.command %q: not found in PATH", name, prog)
		}
		prog = p
	}
	fi, err := os.Stat(prog)
	switch {
	case err != nil:
		return nil, fmt.Errorf("plugin %s: run.command: %w", name, err)
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return nil, fmt.Errorf("plugin %s: run.command %s is not an executable file", name, prog)
	}
	timeout := DefaultExternalTimeout
	if run.Timeout > 0 {
		timeout = time.Duration(run.Timeout * float64(time.Second))
	}
	return &external{
		name: name, dir: dir, manifest: m,
		program: prog, args: append([]string(nil), run.Command[1:]...),
		timeout: timeout,
	}, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// lookPath looks prog up in the PATH external commands get.
func lookPath(prog string) (string, error) {
	for _, d := range filepath.SplitList(safePath(os.Getenv("PATH"))) {
		p := filepath.Join(d, prog)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// Register registers the tools the manifest lists (provides.tools), or one
// tool named like the plugin.
func (e *external) Register(r *Registrar) error {
	names := e.manifest.Provides.Tools
	if len(names) == 0 {
		names = []string{e.name}
	}
	for _, n := range names {
		if err := r.Tool(Tool{
			Name:        n,
			Description: e.manifest.Description,
			Commands:    e.manifest.Commands,
			Handler:     e.handle,
		}); err != nil {
			return err
		}
	}
	return nil
}

// handle runs the command with the call's args appended, the merged config
// as JSON on stdin, in the call's folder, with a minimal environment: none
// of the gateway's secrets.
func (e *external) handle(ctx context.Context, call *Call) (Result, error) {
	stdin, err := json.Marshal(call.Config)
	if err != nil {
		return Result{ExitCode: 1}, fmt.Errorf("tool '%s': encode config: %w", call.Tool, err)
	}
	env := HostEnv("PATH", "HOME", "LANG")
	env = append(env,
		"BEIGE_AGENT_NAME="+call.Agent,
		"BEIGE_SESSION_KEY="+call.Session.SessionKey,
		"BEIGE_CHANNEL="+call.Session.Channel,
		"BEIGE_TOOL_NAME="+call.Tool,
		"BEIGE_PLUGIN_DIR="+e.dir,
		"BEIGE_WORKSPACE="+call.Workspace,
	)
	if call.Session.ChatID != "" {
		env = append(env, "BEIGE_CHAT_ID="+call.Session.ChatID)
	}
	if call.Session.ThreadID != "" {
		env = append(env, "BEIGE_THREAD_ID="+call.Session.ThreadID)
	}
	// The folder is opened beneath the workspace without following links
	// and the command started in that open folder: the agent may have
	// swapped a folder of the path for a link since the call's folder was
	// resolved, and that must not move a host program out of the
	// workspace. (The sandbox is not paused for external tools.)
	dir, err := OpenDir(call.Workspace, call.Dir)
	if err != nil {
		return Result{ExitCode: 1}, fmt.Errorf("tool '%s': the working folder: %w", call.Tool, err)
	}
	defer dir.Close()
	args := append(append([]string(nil), e.args...), call.Args...)
	res, err := RunCommand(ctx, Command{
		Tool: call.Tool, Path: e.program, Args: args, Dir: call.Dir, DirFile: dir,
		Env: env, Stdin: stdin, Timeout: e.timeout,
	})
	if err != nil && errors.Is(err, exec.ErrNotFound) {
		res.ExitCode = ExitNotFound
	}
	return res, err
}
