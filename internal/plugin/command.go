package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultOutputLimit is how much of a command's stdout, and of its stderr,
// RunCommand keeps by default.
const DefaultOutputLimit = 1 << 20

// Exit codes RunCommand gives when the program did not exit on its own.
const (
	ExitTimeout   = 124 // as timeout(1)
	ExitCannotRun = 126
	ExitNotFound  = 127
	ExitCancelled = 130
)

// waitDelay is how long RunCommand waits, after the program was killed or
// exited, for its output pipes to close (a grandchild may hold them).
const waitDelay = 2 * time.Second

// Command is a program run on the host for a tool call.
type Command struct {
	Tool string   // the tool's name, for messages
	Path string   // the program; an absolute path
	Args []string // its arguments (not including the program's name)
	Dir  string   // working folder
	// DirFile, when set, is the working folder itself (from OpenDir): the
	// program starts in that very folder, even if Dir's path has been
	// changed to lead elsewhere since it was opened. Dir is then only used
	// in messages.
	DirFile *os.File
	Env     []string // the whole environment, "KEY=value"
	Stdin   []byte   // nil means empty
	// Timeout kills the program's whole process group; 0 means no limit.
	Timeout time.Duration
	// OutputLimit is how many bytes of stdout, and of stderr, are kept
	// (DefaultOutputLimit when 0); past it the output is cut and a note
	// is added to Result.Stderr.
	OutputLimit int
}

// RunCommand runs c in its own process group and returns its output and
// exit code. The group is killed when the timeout passes or ctx ends; the
// error then says so ("tool 'x' timed out after 5s"). A program that could
// not start is an error too; an exit code other than 0 is not.
func RunCommand(ctx context.Context, c Command) (Result, error) {
	limit := c.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	runCtx := ctx
	cancel := context.CancelFunc(func() {})
	if c.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, c.Timeout)
	}
	defer cancel()

	cmd := exec.CommandContext(runCtx, c.Path, c.Args...)
	cmd.Dir = c.Dir
	if c.DirFile != nil {
		cmd.Dir = dirOf(c.DirFile)
	}
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // never the gateway's own environment
	}
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	stdout := &capBuffer{limit: limit}
	stderr := &capBuffer{limit: limit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	setProcessGroup(cmd)
	cmd.WaitDelay = waitDelay

	err := cmd.Start()
	runtime.KeepAlive(c.DirFile) // open until the child changed into it
	if err != nil {
		code := ExitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		return Result{ExitCode: code}, fmt.Errorf("tool '%s': cannot run %s: %w", c.Tool, filepath.Base(c.Path), unwrapPathErr(err))
	}
	err = cmd.Wait()
	killProcessGroup(cmd) // stragglers left in the background

	res := Result{Output: stdout.String(), OutputBytes: stdout.total}
	var notes []string
	if stderr.buf.Len() > 0 {
		notes = append(notes, stderr.String())
	}
	if stdout.total > int64(limit) {
		notes = append(notes, fmt.Sprintf("beige: the output of %s was cut to %d of %d bytes", c.Tool, limit, stdout.total))
	}
	if stderr.total > int64(limit) {
		notes = append(notes, fmt.Sprintf("beige: the error output of %s was cut to %d of %d bytes", c.Tool, limit, stderr.total))
	}
	res.Stderr = strings.Join(notes, ensureNL(notes))
	if cmd.ProcessState != nil {
		res.ExitCode = exitCode(cmd.ProcessState)
	}

	switch {
	case errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		res.ExitCode = ExitTimeout
		return res, fmt.Errorf("tool '%s' timed out after %s", c.Tool, Seconds(c.Timeout))
	case ctx.Err() != nil:
		res.ExitCode = ExitCancelled
		return res, fmt.Errorf("tool '%s' was cancelled: %w", c.Tool, context.Cause(ctx))
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		if res.ExitCode == 0 {
			res.ExitCode = 1
		}
		return res, fmt.Errorf("tool '%s': %w", c.Tool, err)
	}
	return res, nil
}

// ensureNL returns the separator to put between notes: a newline unless
// the first already ends with one.
func ensureNL(notes []string) string {
	if len(notes) > 0 && strings.HasSuffix(notes[0], "\n") {
		return ""
	}
	return "\n"
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// Seconds formats d as a number of seconds: "5s", "1.5s", "120s".
func Seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// capBuffer keeps the first limit bytes written and counts them all.
type capBuffer struct {
	buf   bytes.Buffer
	limit int
	total int64
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	if room := b.limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *capBuffer) String() string { return b.buf.String() }

// HostEnv returns "KEY=value" for each of keys that is set in the gateway's
// environment. PATH keeps only its absolute entries (an empty or relative
// entry would look up programs in the working folder, which the agent
// controls) and defaults to /usr/local/bin:/usr/bin:/bin.
func HostEnv(keys ...string) []string {
	var env []string
	for _, k := range keys {
		v, ok := os.LookupEnv(k)
		if k == "PATH" {
			v, ok = safePath(v), true
		}
		if ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func safePath(p string) string {
	var keep []string
	for _, d := range filepath.SplitList(p) {
		if filepath.IsAbs(d) {
			keep = append(keep, d)
		}
	}
	if len(keep) == 0 {
		return "/usr/local/bin:/usr/bin:/bin"
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}
