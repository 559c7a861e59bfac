package docker

// The slow path: one docker exec per call, used when the helper is disabled
// or cannot start. It needs nothing in the image beyond /bin/sh and the
// usual tools (cat, head, wc, mkdir, dirname).
//
// Timeouts and cancellation: every exec carries a random marker variable,
// BEIGE_EXEC_MARK, that all its descendants inherit. When the timeout expires
// (or ctx ends) a second exec kills, with SIGKILL, every process whose
// /proc/<pid>/environ holds the marker. This needs only sh, cat and kill
// (no `timeout` binary, whose busybox version would only kill the direct
// child), and it reaches background children too; a process that scrubs its
// environment escapes it, as one that calls setsid escapes the helper's
// process-group kill.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
)

const (
	execMarkVar = "BEIGE_EXEC_MARK"
	// killScript kills the processes whose environment holds the marker $1.
	// NUL bytes dropped by $(...) do not matter: the marker is random.
	killScript = `for p in /proc/[0-9]*; do
  case "$(cat "$p/environ" 2>/dev/null)" in
  *"` + execMarkVar + `=$1"*) kill -9 "${p#/proc/}" 2>/dev/null ;;
  esac
done
exit 0`
	// readScript prints the size of $1 on a line, then at most $2 bytes of it.
	readScript = `[ -d "$1" ] && exit 21
[ -e "$1" ] || exit 44
wc -c < "$1" || exit 1
head -c "$2" < "$1"`
	// writeScript replaces $1 with stdin, creating parent folders.
	writeScript = `[ -d "$1" ] && exit 21
mkdir -p "$(dirname "$1")" && cat > "$1"`
	exitIsDir    = 21
	exitNotExist = 44

	// killWait is how long a timed-out exec's stream may stay open after the kill.
	killWait = 5 * time.Second
)

// dockerExecSpec is one docker exec.
type dockerExecSpec struct {
	argv           []string
	env            []string
	dir            string
	stdin          []byte
	attachStdin    bool
	stdout, stderr io.Writer
	timeout        time.Duration // 0 = none
	killable       bool          // mark the exec so a timeout or cancellation can kill it
}

// dockerExec runs one exec and returns its exit code, and whether it was
// killed because the timeout expired. It always waits for the output copy to
// end before it returns, so the writers are the caller's again.
func (s *dockerSandbox) dockerExec(ctx context.Context, e dockerExecSpec) (exitCode int, timedOut bool, err error) {
	api := s.d.api
	env := e.env
	var mark string
	if e.killable {
		mark = rand.Text()
		env = append(slices.Clip(env), execMarkVar+"="+mark)
	}
	ex, err := api.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		Cmd:          e.argv,
		User:         s.user, // the agent's user, never the container's root
		Env:          env,
		WorkingDir:   e.dir,
		AttachStdin:  e.attachStdin,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return -1, false, mapExecErr(err)
	}
	att, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return -1, false, mapExecErr(err)
	}
	hr := att.HijackedResponse
	defer hr.Close() // also ends the stdin writer if the process never read
	if e.attachStdin {
		go func() {
			if len(e.stdin) > 0 {
				if _, err := hr.Conn.Write(e.stdin); err != nil {
					return
				}
			}
			_ = hr.CloseWrite()
		}()
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(e.stdout, e.stderr, hr.Reader)
		copied <- err
	}()

	var timer <-chan time.Time
	if e.timeout > 0 {
		t := time.NewTimer(e.timeout)
		defer t.Stop()
		timer = t.C
	}
	var copyErr error
	select {
	case copyErr = <-copied:
	case <-timer:
		timedOut = true
		s.killMarked(ctx, mark)
		copyErr = waitCopy(copied, &hr)
	case <-ctx.Done():
		s.killMarked(ctx, mark)
		hr.Close()
		<-copied
		return -1, false, ctx.Err()
	}
	if copyErr != nil && !timedOut {
		return -1, false, fmt.Errorf("docker exec stream: %w", copyErr)
	}
	code, err := s.execExitCode(ctx, ex.ID)
	return code, timedOut, err
}

// waitCopy waits for the output copy after a kill, dropping the stream if a
// process that escaped the kill keeps it open.
func waitCopy(copied <-chan error, hr *client.HijackedResponse) error {
	select {
	case err := <-copied:
		return err
	case <-time.After(killWait):
		hr.Close()
		return <-copied
	}
}

// execExitCode waits for the engine to record the exec's exit code (it can
// lag the end of the stream by a moment).
func (s *dockerSandbox) execExitCode(ctx context.Context, execID string) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		ins, err := s.d.api.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, fmt.Errorf("inspect exec: %w", mapExecErr(err))
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, errors.New("inspect exec: still running after its stream ended")
		case <-time.After(delay):
		}
	}
}

// killMarked kills the processes of the exec marked mark (see the file comment).
func (s *dockerSandbox) killMarked(ctx context.Context, mark string) {
	if mark == "" {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _, err := s.dockerExec(kctx, dockerExecSpec{
		argv:   []string{"/bin/sh", "-c", killScript, "sh", mark},
		stdout: io.Discard, stderr: io.Discard,
	})
	if err != nil {
		s.log.Warn("kill timed-out exec", "err", err)
	}
}

// dockerExecCommand runs req with sh -c through docker exec.
func (s *dockerSandbox) dockerExecCommand(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	out := &cappedWriter{limit: req.OutputLimit}
	code, timedOut, err := s.dockerExec(ctx, dockerExecSpec{
		argv:        []string{"/bin/sh", "-c", req.Command},
		env:         envList(req.Env),
		dir:         req.Dir,
		stdin:       req.Stdin,
		attachStdin: len(req.Stdin) > 0,
		stdout:      out,
		stderr:      out,
		timeout:     req.Timeout,
		killable:    true,
	})
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	return sandbox.ExecResult{Output: out.buf, OutputBytes: out.total, ExitCode: code, TimedOut: timedOut}, nil
}

// dockerReadFile reads through `wc -c` and `head -c`, the path passed as an
// argument, never inside the script.
func (s *dockerSandbox) dockerReadFile(ctx context.Context, p string, limit int64) ([]byte, int64, error) {
	var stdout, stderr bytes.Buffer
	code, _, err := s.dockerExec(ctx, dockerExecSpec{
		argv:   []string{"/bin/sh", "-c", readScript, "sh", p, strconv.FormatInt(max(limit, 0), 10)},
		stdout: &stdout, stderr: &stderr,
		killable: true,
	})
	if err != nil {
		return nil, 0, err
	}
	if err := scriptError(code, &stderr); err != nil {
		return nil, 0, err
	}
	out := stdout.Bytes()
	i := bytes.IndexByte(out, '\n')
	if i < 0 {
		return nil, 0, fmt.Errorf("unexpected output of wc: %q", out)
	}
	size, err := strconv.ParseInt(string(bytes.TrimSpace(out[:i])), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("unexpected output of wc: %q", out[:i])
	}
	return out[i+1:], size, nil
}

// dockerWriteFile writes data through `cat > "$1"` with data on stdin.
func (s *dockerSandbox) dockerWriteFile(ctx context.Context, p string, data []byte) error {
	var stderr bytes.Buffer
	code, _, err := s.dockerExec(ctx, dockerExecSpec{
		argv:        []string{"/bin/sh", "-c", writeScript, "sh", p},
		stdin:       data,
		attachStdin: true,
		stdout:      io.Discard,
		stderr:      &stderr,
		killable:    true,
	})
	if err != nil {
		return err
	}
	return scriptError(code, &stderr)
}

func scriptError(code int, stderr *bytes.Buffer) error {
	switch code {
	case 0:
		return nil
	case exitIsDir:
		return sandbox.ErrIsDir
	case exitNotExist:
		return sandbox.ErrNotExist
	}
	msg := bytes.TrimSpace(stderr.Bytes())
	if len(msg) > 512 {
		msg = msg[:512]
	}
	return fmt.Errorf("exit status %d: %s", code, msg)
}

// mapExecErr turns the engine's "no such container" and "container is not
// running" into ErrNotRunning.
func mapExecErr(err error) error {
	if cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
		return fmt.Errorf("%w: %v", sandbox.ErrNotRunning, err)
	}
	return err
}

// envList turns env into sorted K=V pairs.
func envList(env map[string]string) []string {
	list := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, k+"="+env[k])
	}
	return list
}

// cappedWriter keeps the first limit bytes and counts them all; not safe for
// concurrent use (StdCopy writes from one goroutine).
type cappedWriter struct {
	limit int
	buf   []byte
	total int64
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if room := w.limit - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}
