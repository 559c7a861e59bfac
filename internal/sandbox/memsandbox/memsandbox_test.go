package memsandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/memsandbox"
)

func newSandbox(t testing.TB, opts memsandbox.Options) (*memsandbox.Runtime, sandbox.Sandbox) {
	t.Helper()
	rt := memsandbox.New(opts)
	sb, err := rt.Ensure(context.Background(), sandbox.Spec{Agent: "unit", Image: "mem", Env: map[string]string{"GREETING": "hello world"}})
	if err != nil {
		t.Fatal(err)
	}
	return rt, sb
}

// The interpreter: what it knows works as sh does; what it does not know
// is refused, saying so, and nothing runs on the host.
func TestInterpret(t *testing.T) {
	_, sb := newSandbox(t, memsandbox.Options{})
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "in.txt", []byte("content\n")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  string
		out  string // "*" + s: contains s
		code int
	}{
		{`echo a   b`, "a b\n", 0},
		{`echo 'a   b' "c  $GREETING" \$GREETING`, "a   b c  hello world $GREETING\n", 0},
		{`echo "${GREETING}!" "\"q\""`, "hello world! \"q\"\n", 0},
		{`echo -n x; echo y`, "xy\n", 0},
		{"echo one\necho two # a comment", "one\ntwo\n", 0},
		{`false; echo $?`, "1\n", 0},
		{`true && echo yes || echo no`, "yes\n", 0},
		{`false && echo yes || echo no`, "no\n", 0},
		{`exit 7; echo never`, "", 7},
		{`exit 300`, "", 300 & 0xff},
		{`echo x>out.txt; cat out.txt; echo y >> out.txt; cat out.txt`, "x\nx\ny\n", 0},
		{`cat in.txt nope.txt`, "content\ncat: can't open 'nope.txt': No such file or directory\n", 1},
		{`cat nope.txt 2>/dev/null`, "", 1},
		{`cat nope.txt >/dev/null 2>&1; echo $?`, "1\n", 0},
		{`cat nope.txt 2>err.txt; cat err.txt`, "cat: can't open 'nope.txt': No such file or directory\n", 0},
		{`echo hi > /workspace/no/such/dir`, "*can't create /workspace/no/such/dir: No such file or directory", 1},
		{`echo planted > /beige/gateway.sock`, "*Permission denied", 1},
		{`echo planted > /tools/bin/git`, "*Permission denied", 1},
		{`mkdir -p a/b && cd a/b && pwd && cd .. && ls`, "/workspace/a/b\nb\n", 0},
		{`mkdir x/y`, "*can't create directory 'x/y'", 1},
		{`mkdir -p r/s && echo f > r/s/f && rm r; rm -rf r; ls r`, "*rm: can't remove 'r': Directory not empty", 1},
		{`rm -f nope.txt`, "", 0},
		{`rm /workspace`, "*Permission denied", 1},
		{`cd /nowhere`, "*can't cd to /nowhere", 2},
		{`cd in.txt`, "*can't cd to /workspace/in.txt: Not a directory", 2},
		{`mkdir d1 && mkdir d1`, "*can't create directory 'd1': File exists", 1},
		{`printf '%s-%d%%\n' x 42`, "x-42%\n", 0},
		{`printf '\211PNG\r\n'`, "\x89PNG\r\n", 0},
		{`env`, "*GREETING=hello world\n", 0},
		{`sleep 0.01; echo slept`, "slept\n", 0},
		{`sleep x`, "*invalid number", 1},
		// Refused: never run anything else.
		{`ls | wc -l`, "*unsupported shell syntax", 2},
		{`sleep 1 &`, "*unsupported shell syntax", 2},
		{`echo $(id)`, "*unsupported shell syntax: $(...)", 2},
		{"echo `id`", "*unsupported shell syntax", 2},
		{`(echo sub)`, "*unsupported shell syntax", 2},
		{`cat < in.txt`, "*unsupported shell syntax", 2},
		{`echo 'open`, "*unterminated", 2},
		{`echo ok &&`, "*nothing after", 2},
		{`; echo`, "*empty command before \";\"", 2},
		{"echo a;\n\necho b &&\necho c;", "a\nb\nc\n", 0},
		{`&& echo`, "*empty command", 2},
		{`rm -rf / ; id; /bin/sh -c id`, "*id: command not found", 127},
		{`git status`, "*memsandbox: git: command not found", 127},
	} {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: c.cmd})
		if err != nil {
			t.Errorf("%q: %v", c.cmd, err)
			continue
		}
		got := string(res.Output)
		ok := got == c.out
		if want, found := strings.CutPrefix(c.out, "*"); found {
			ok = strings.Contains(got, want)
		}
		if !ok || res.ExitCode != c.code {
			t.Errorf("%q: exit %d, output %q; want %d, %q", c.cmd, res.ExitCode, got, c.code, c.out)
		}
	}
}

// A scripted ExecFunc sees the request with the sandbox's whole env, and
// its output is cut to the limit with the true size kept.
func TestExecFunc(t *testing.T) {
	var seen sandbox.ExecRequest
	rt, sb := newSandbox(t, memsandbox.Options{Exec: func(ctx context.Context, s *memsandbox.Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		seen = req
		if req.Command == "fail" {
			return sandbox.ExecResult{}, errors.New("scripted failure")
		}
		return sandbox.ExecResult{Output: []byte(strings.Repeat("y", 100)), ExitCode: 4}, nil
	}})
	ctx := context.Background()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "anything", OutputLimit: 10, Env: map[string]string{"BEIGE_AGENT_NAME": "unit"}, Dir: "sub"})
	if err != nil || res.ExitCode != 4 || string(res.Output) != "yyyyyyyyyy" || res.OutputBytes != 100 {
		t.Errorf("scripted result: %+v %v", res, err)
	}
	if seen.Dir != "/workspace/sub" || seen.Env["BEIGE_AGENT_NAME"] != "unit" || seen.Env["GREETING"] != "hello world" ||
		seen.Env["PATH"] != sandbox.DefaultPATH || seen.Env["HTTP_PROXY"] == "" {
		t.Errorf("the function saw %+v", seen)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "fail"}); err == nil || !strings.Contains(err.Error(), "scripted failure") {
		t.Errorf("a failing function: %v", err)
	}
	execs := rt.Sandbox("unit").Execs()
	if len(execs) != 2 || execs[0].Command != "anything" || execs[0].Dir != "/workspace/sub" || len(execs[0].Env) != 1 {
		t.Errorf("Execs: %+v", execs)
	}
	rt.SetExec(nil)
	if res, _ := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo back"}); string(res.Output) != "back\n" {
		t.Errorf("after SetExec(nil): %q", res.Output)
	}
}

// Freeze stops calls until every thaw; a kill ends a running command and
// a frozen sandbox alike.
func TestFreezeAndKill(t *testing.T) {
	rt, sb := newSandbox(t, memsandbox.Options{})
	ctx := context.Background()
	thaw, err := sb.(sandbox.Freezer).Freeze(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo ran"})
		done <- fmt.Sprint(string(res.Output), err)
	}()
	select {
	case got := <-done:
		t.Fatalf("a call ran while frozen: %q", got)
	case <-time.After(100 * time.Millisecond):
	}
	thaw()
	if got := <-done; got != "ran\n<nil>" {
		t.Errorf("after the thaw: %q", got)
	}
	// A call waiting on a frozen sandbox gives up with its context.
	thaw, _ = sb.(sandbox.Freezer).Freeze(ctx)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := sb.Exec(cctx, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call on a frozen sandbox past its deadline: %v", err)
	}
	cancel()
	thaw()

	n := len(rt.Sandbox("unit").Execs())
	go func() {
		_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 30"})
		done <- fmt.Sprint(err)
	}()
	for len(rt.Sandbox("unit").Execs()) == n { // the sleep runs
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := rt.Kill("unit"); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !strings.Contains(got, "stopped while the command ran") || time.Since(start) > 5*time.Second {
		t.Errorf("a command in a killed sandbox: %q after %v", got, time.Since(start))
	}
	if _, err := sb.(sandbox.Freezer).Freeze(ctx); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("Freeze of a killed sandbox: %v", err)
	}
	if err := rt.Kill("nobody"); !errors.Is(err, sandbox.ErrNoSuchAgent) {
		t.Errorf("Kill of no sandbox: %v", err)
	}
}

// Close ends the runtime and its handles, not the sandboxes: a reopened
// runtime re-attaches to them, files and all.
func TestCloseAndReopen(t *testing.T) {
	rt, sb := newSandbox(t, memsandbox.Options{})
	ctx := context.Background()
	sb.WriteFile(ctx, "/tmp/kept", []byte("x"))
	rt.Close()
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, memsandbox.ErrClosed) {
		t.Errorf("exec after Close: %v", err)
	}
	if _, err := rt.Ensure(ctx, rt.Sandbox("unit").Spec()); !errors.Is(err, memsandbox.ErrClosed) {
		t.Errorf("Ensure after Close: %v", err)
	}
	rt2 := rt.Reopen()
	sb2, err := rt2.Ensure(ctx, rt2.Sandbox("unit").Spec())
	if err != nil || sb2.ID() != sb.ID() {
		t.Fatalf("Ensure on the reopened runtime: %v, ID %s want %s", err, sb2.ID(), sb.ID())
	}
	if data, _, err := sb2.ReadFile(ctx, "/tmp/kept", 10); err != nil || string(data) != "x" {
		t.Errorf("a file of the running sandbox: %q %v", data, err)
	}

	rt2.SetPingError(errors.New("engine down"))
	if err := rt2.Ping(ctx); err == nil || err.Error() != "engine down" {
		t.Errorf("Ping: %v", err)
	}
	rt2.SetPingError(nil)
	if err := rt2.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
	rt2.SetEnsureError(errors.New("disk full"))
	if _, err := rt2.Ensure(ctx, sandbox.Spec{Agent: "other", Image: "mem"}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Ensure with an ensure error: %v", err)
	}
}

// Many callers at once on several sandboxes (run with -race).
func TestConcurrentUse(t *testing.T) {
	rt := memsandbox.New(memsandbox.Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 200 {
		wg.Go(func() {
			agent := fmt.Sprintf("a%d", i%4)
			sb, err := rt.Ensure(ctx, sandbox.Spec{Agent: agent, Image: "mem"})
			if err != nil {
				errs <- err
				return
			}
			name := fmt.Sprintf("f%d.txt", i)
			if err := sb.WriteFile(ctx, name, []byte(name)); err != nil {
				errs <- err
			}
			res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cat " + name + "; echo"})
			if err != nil || string(res.Output) != name+"\n" {
				errs <- fmt.Errorf("%s: %q %v", name, res.Output, err)
			}
			if i%50 == 0 {
				if thaw, err := sb.(sandbox.Freezer).Freeze(ctx); err == nil {
					thaw()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := rt.Agents(); len(got) != 4 {
		t.Errorf("agents %v", got)
	}
}

// FuzzInterpret: no command line panics the interpreter or outlives its
// context, and none writes outside the writable folders.
func FuzzInterpret(f *testing.F) {
	for _, s := range []string{"echo a; cat b > c", `printf '\1%s%d' "$X" 4`, "mkdir -p a && cd a && rm -rf .", "sleep 0.001 || exit 3",
		"echo x 2>&1 >> /tmp/y", `echo "${A}" '$B' \$C $?`, "cat < x | y", "# c\n;;&&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		rt, sb := newSandbox(t, memsandbox.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 20 * time.Millisecond}); err != nil && ctx.Err() == nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%q ran for %v", cmd, d)
		}
		for _, p := range []string{"/beige/x", "/tools/bin/x", "/etc/passwd", "/x"} {
			if _, ok := rt.Sandbox("unit").Peek(p); ok {
				t.Fatalf("%q wrote %s", cmd, p)
			}
		}
	})
}
