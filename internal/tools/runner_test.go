package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

func TestRunAuditsStartedThenFinished(t *testing.T) {
	e := newEnv(t, nil)
	e.sb.execFn = func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte("hello\n"), OutputBytes: 6, ExitCode: 0}, nil
	}
	res := e.run(t, &ExecCall{Command: "echo hello", Timeout: 5 * time.Second})
	if res.Text() != "Exit code: 0\nhello\n" || res.IsError {
		t.Fatalf("result %+v", res)
	}
	recs := e.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d audit records, want 2: %+v", len(recs), recs)
	}
	started, finished := recs[0], recs[1]
	for _, r := range recs {
		if r.Agent != "travel" || r.Session != "telegram:123:45" || r.Channel != "telegram" || r.Model != "claude-sonnet-4-6" ||
			r.Type != audit.TypeCoreTool || r.Tool != "exec" || r.Target != audit.TargetSandbox || r.Decision != audit.DecisionAllowed ||
			string(r.Args) != `["echo hello"]` || r.Time.IsZero() {
			t.Errorf("record %+v (args %s)", r, r.Args)
		}
	}
	if started.Phase != audit.PhaseStarted || started.DurationMs != nil || started.ExitCode != nil || started.OutputBytes != nil {
		t.Errorf("started record %+v", started)
	}
	if finished.Phase != audit.PhaseFinished || finished.DurationMs == nil || *finished.ExitCode != 0 || *finished.OutputBytes != 6 || finished.Error != "" {
		t.Errorf("finished record %+v", finished)
	}
}

// TestRunAuditArgs reads the audit log the way a script written for the
// spec's format (and the original Beige's records) does: args is an array of
// strings for every core tool, in both phases, and write's content is never
// in it, only its size.
func TestRunAuditArgs(t *testing.T) {
	e := newEnv(t, nil)
	e.sb.put("/workspace/a", "x")
	e.run(t, &ReadCall{Path: "a", Offset: 1, Limit: 5})
	e.run(t, &WriteCall{Path: "b", Content: "secret content"})
	e.run(t, &PatchCall{Path: "b", OldText: "secret", NewText: "public"})
	e.run(t, &ExecCall{Command: "ls -la /tmp", Timeout: 5 * time.Second})
	want := [][]string{
		{"/workspace/a"},
		{"/workspace/b", "(14 bytes)"},
		{"/workspace/b"},
		{"ls -la /tmp"},
	}
	recs := e.records(t)
	if len(recs) != 2*len(want) {
		t.Fatalf("%d records, want %d", len(recs), 2*len(want))
	}
	for i, r := range recs {
		var args []string // what a script does
		if err := json.Unmarshal(r.Args, &args); err != nil {
			t.Errorf("%s %s: args %s is not an array of strings: %v", r.Tool, r.Phase, r.Args, err)
			continue
		}
		if w := want[i/2]; !slices.Equal(args, w) {
			t.Errorf("%s %s: args %q, want %q", r.Tool, r.Phase, args, w)
		}
		if strings.Contains(string(r.Args), "secret") || strings.Contains(string(r.Args), "public") {
			t.Errorf("%s %s: args %s hold the text written", r.Tool, r.Phase, r.Args)
		}
	}
}

func TestRunDenied(t *testing.T) {
	var asked []string
	e := newEnv(t, func(agent, tool string) error {
		asked = append(asked, agent+"/"+tool)
		return fmt.Errorf("tool %q not allowed for agent %q", tool, agent)
	})
	res := e.run(t, &ExecCall{Command: "rm -rf /"})
	if !res.IsError || res.Text() != `permission denied: tool "exec" not allowed for agent "travel"` {
		t.Errorf("result %+v", res)
	}
	if len(e.sb.execs) != 0 {
		t.Error("denied call ran")
	}
	if strings.Join(asked, ",") != "travel/exec" {
		t.Errorf("policy asked %v", asked)
	}
	recs := e.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d records, want one finished record", len(recs))
	}
	r := recs[0]
	if r.Phase != audit.PhaseFinished || r.Decision != audit.DecisionDenied || r.Error != res.Text() || r.Tool != "exec" || r.ExitCode != nil {
		t.Errorf("record %+v", r)
	}

	// A policy that already says "permission denied" is not said twice.
	e2 := newEnv(t, func(agent, tool string) error { return errors.New("Permission denied: no") })
	if got := e2.run(t, &ExecCall{Command: "ls"}).Text(); got != "Permission denied: no" {
		t.Errorf("got %q", got)
	}
}

func TestRunRefusedWhenAuditFails(t *testing.T) {
	for _, c := range []Call{
		&ExecCall{Command: "ls"},
		&WriteCall{Path: "a", Content: "x"},
		&PatchCall{Path: "p", OldText: "a", NewText: "b"},
		&ReadCall{Path: "p"},
	} {
		e := newEnv(t, nil)
		e.sb.put("/workspace/p", "a")
		e.audit.Close()
		_, err := e.runner.Run(context.Background(), e.inv(c))
		if !errors.Is(err, audit.ErrClosed) {
			t.Errorf("%s: err %v, want the audit error", c.Tool(), err)
		}
		if len(e.sb.execs) != 0 || e.sb.reads != 0 || e.sb.writes != 0 {
			t.Errorf("%s ran without an audit record", c.Tool())
		}
	}

	// Denied calls too need their record.
	e := newEnv(t, func(string, string) error { return errors.New("no") })
	e.audit.Close()
	if _, err := e.runner.Run(context.Background(), e.inv(&ExecCall{Command: "ls"})); err == nil {
		t.Error("denied call without audit record: no error")
	}
}

func TestRunInvalidInvocation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for name, inv := range map[string]Invocation{
		"no call":    {Agent: "a", Sandbox: e.sb},
		"no sandbox": {Agent: "a", Call: &ExecCall{Command: "ls"}},
		"no agent":   {Sandbox: e.sb, Call: &ExecCall{Command: "ls"}},
		"bad call":   {Agent: "a", Sandbox: e.sb, Call: &PatchCall{Path: "a"}},
	} {
		if _, err := e.runner.Run(ctx, inv); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.runner.Run(cancelled, e.inv(&ExecCall{Command: "ls"})); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if recs := e.records(t); len(recs) != 0 {
		t.Errorf("%d audit records for calls that were never made", len(recs))
	}
}

func TestRunDoesNotChangeCallersCall(t *testing.T) {
	e := newEnv(t, nil)
	c := &WriteCall{Path: "rel/a.txt", Content: "x"}
	if res := e.run(t, c); res.Text() != "Wrote 1 bytes to /workspace/rel/a.txt" {
		t.Errorf("result %q", res.Text())
	}
	if c.Path != "rel/a.txt" {
		t.Errorf("caller's call changed to %q", c.Path)
	}
}

func TestExecRequest(t *testing.T) {
	e := newEnv(t, nil)
	command := `echo "$HOME" '$(rm -rf /)' ; cat 'a b' > "c"`
	inv := e.inv(&ExecCall{Command: command})
	inv.Session.AgentName = "someone-else" // the Invocation's Agent wins
	if _, err := e.runner.Run(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	req := e.sb.execs[0]
	if req.Command != command {
		t.Errorf("command %q, want it unchanged", req.Command)
	}
	if req.OutputLimit != 50*1024+redactSlack || req.Timeout != ModelExecTimeout || req.Dir != "" || req.Stdin != nil {
		t.Errorf("request %+v", req)
	}
	want := map[string]string{
		"BEIGE_AGENT_NAME": "travel", "BEIGE_CHANNEL": "telegram", "BEIGE_SESSION_KEY": "telegram:123:45",
		"BEIGE_CHAT_ID": "123", "BEIGE_THREAD_ID": "45",
	}
	if fmt.Sprint(req.Env) != fmt.Sprint(want) {
		t.Errorf("env %v, want %v", req.Env, want)
	}

	// Timeouts: the call's, else the invocation's, else HTTPExecTimeout.
	for _, tt := range []struct{ call, inv, want time.Duration }{
		{2 * time.Second, ModelExecTimeout, 2 * time.Second},
		{0, ModelExecTimeout, ModelExecTimeout},
		{0, 0, HTTPExecTimeout},
	} {
		inv := e.inv(&ExecCall{Command: "true", Timeout: tt.call})
		inv.ExecTimeout = tt.inv
		if _, err := e.runner.Run(context.Background(), inv); err != nil {
			t.Fatal(err)
		}
		if got := e.sb.execs[len(e.sb.execs)-1].Timeout; got != tt.want {
			t.Errorf("timeout %v (call %v, invocation %v), want %v", got, tt.call, tt.inv, tt.want)
		}
	}
}

func TestExecResults(t *testing.T) {
	big := strings.Repeat("o", 50*1024)
	tests := []struct {
		name     string
		res      sandbox.ExecResult
		timeout  time.Duration
		text     string
		isError  bool
		exitCode int
		outBytes int64
		auditErr string
	}{
		{"ok", sandbox.ExecResult{Output: []byte("a\nb\n"), OutputBytes: 4}, 0, "Exit code: 0\na\nb\n", false, 0, 4, ""},
		{"no output", sandbox.ExecResult{}, 0, "Exit code: 0", false, 0, 0, ""},
		{"failure", sandbox.ExecResult{Output: []byte("nope"), OutputBytes: 4, ExitCode: 2}, 0, "Exit code: 2\nnope", true, 2, 4, ""},
		{"timeout", sandbox.ExecResult{Output: []byte("partial\n"), OutputBytes: 8, ExitCode: 137, TimedOut: true}, 5 * time.Second,
			"Exit code: 137\nCommand timed out after 5s\npartial\n", true, 137, 8, "timed out after 5s"},
		{"timeout fraction", sandbox.ExecResult{ExitCode: -1, TimedOut: true}, 1500 * time.Millisecond,
			"Exit code: -1\nCommand timed out after 1.5s", true, -1, 0, "timed out after 1.5s"},
		{"truncated", sandbox.ExecResult{Output: []byte(big), OutputBytes: 1 << 20}, 0,
			"Exit code: 0\n" + big + "\n\n[output truncated: showed 51200 of 1048576 bytes]", false, 0, 1 << 20, ""},
		{"truncated mid-rune", sandbox.ExecResult{Output: []byte("ab\xc3"), OutputBytes: 100, ExitCode: 1}, 0,
			"Exit code: 1\nab\n\n[output truncated: showed 2 of 100 bytes]", true, 1, 100, ""},
		{"binary output", sandbox.ExecResult{Output: []byte("\xff\x00ok"), OutputBytes: 4}, 0, "Exit code: 0\n\uFFFD\x00ok", false, 0, 4, ""},
		{"oversized output kept by sandbox", sandbox.ExecResult{Output: []byte(big + "more"), OutputBytes: int64(len(big)) + 4}, 0,
			"Exit code: 0\n" + big + "\n\n[output truncated: showed 51200 of 51204 bytes]", false, 0, int64(len(big)) + 4, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.sb.execFn = func(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) { return tt.res, nil }
			res := e.run(t, &ExecCall{Command: "x", Timeout: tt.timeout})
			if res.Text() != tt.text || res.IsError != tt.isError {
				t.Errorf("got (isError %v) %.200q, want (isError %v) %.200q", res.IsError, res.Text(), tt.isError, tt.text)
			}
			f := e.records(t)[1]
			if *f.ExitCode != tt.exitCode || *f.OutputBytes != tt.outBytes || f.Error != tt.auditErr {
				t.Errorf("audit exitCode %d outputBytes %d error %q", *f.ExitCode, *f.OutputBytes, f.Error)
			}
		})
	}
}

func TestExecSandboxError(t *testing.T) {
	e := newEnv(t, nil)
	e.sb.execFn = func(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{}, sandbox.ErrNotRunning
	}
	_, err := e.runner.Run(context.Background(), e.inv(&ExecCall{Command: "ls"}))
	if !errors.Is(err, sandbox.ErrNotRunning) {
		t.Fatalf("err %v", err)
	}
	recs := e.records(t)
	if len(recs) != 2 || recs[1].Error != "exec: sandbox: not running" || recs[1].ExitCode != nil {
		t.Errorf("records %+v", recs)
	}
}

func TestWriteTool(t *testing.T) {
	e := newEnv(t, nil)
	res := e.run(t, &WriteCall{Path: "/workspace/out/deep/x.txt", Content: "Hello, world!"})
	if res.Text() != "Wrote 13 bytes to /workspace/out/deep/x.txt" || res.IsError {
		t.Errorf("result %+v", res)
	}
	if got := e.sb.file("/workspace/out/deep/x.txt"); got != "Hello, world!" {
		t.Errorf("file %q", got)
	}
	e.sb.dirs["/workspace/d"] = true
	if res := e.run(t, &WriteCall{Path: "d", Content: "x"}); res.Text() != "write /workspace/d: is a directory" || !res.IsError {
		t.Errorf("result %+v", res)
	}
	e.sb.writeErr = errors.New("sandbox: permission denied")
	if res := e.run(t, &WriteCall{Path: "/etc/passwd", Content: "x"}); res.Text() != "write /etc/passwd: permission denied" || !res.IsError {
		t.Errorf("result %+v", res)
	}
	f := e.records(t)[5]
	if *f.ExitCode != 1 || f.Error != "write /etc/passwd: permission denied" {
		t.Errorf("audit %+v", f)
	}
}

func TestPatchTool(t *testing.T) {
	const p = "/workspace/f.go"
	tests := []struct {
		name     string
		file     string
		old, new string
		text     string
		isError  bool
		after    string // file afterwards
	}{
		{"once", "a\nfoo()\nb\n", "foo()", "bar()", "Patched /workspace/f.go at line 2: replaced 5 bytes with 5 bytes", false, "a\nbar()\nb\n"},
		{"delete", "keep\ndrop\n", "drop\n", "", "Patched /workspace/f.go at line 2: replaced 5 bytes with 0 bytes", false, "keep\n"},
		{"newText holds oldText", "x", "x", "xx", "Patched /workspace/f.go at line 1: replaced 1 bytes with 2 bytes", false, "xx"},
		{"not found", "abc", "zzz", "y", "oldText not found in /workspace/f.go", true, "abc"},
		{"three times", "x\nx\nx\n", "x", "y", "oldText occurs 3 times in /workspace/f.go; it must occur exactly once (add surrounding lines to make it unique)", true, "x\nx\nx\n"},
		{"overlapping", "aaa", "aa", "b", "oldText occurs 2 times in /workspace/f.go; it must occur exactly once (add surrounding lines to make it unique)", true, "aaa"},
		{"crlf hint", "a\r\nb\r\n", "a\nb", "c", "oldText not found in /workspace/f.go (the file has CRLF line endings; oldText has LF only)", true, "a\r\nb\r\n"},
		{"crlf match", "a\r\nb\r\n", "a\r\nb", "c", "Patched /workspace/f.go at line 1: replaced 4 bytes with 1 bytes", false, "c\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.sb.put(p, tt.file)
			res := e.run(t, &PatchCall{Path: "f.go", OldText: tt.old, NewText: tt.new})
			if res.Text() != tt.text || res.IsError != tt.isError {
				t.Errorf("got (isError %v) %q, want (isError %v) %q", res.IsError, res.Text(), tt.isError, tt.text)
			}
			if got := e.sb.file(p); got != tt.after {
				t.Errorf("file %q, want %q", got, tt.after)
			}
			if tt.isError && e.sb.writes != 0 {
				t.Error("a failed patch wrote the file")
			}
		})
	}

	e := newEnv(t, nil)
	if res := e.run(t, &PatchCall{Path: "nope", OldText: "a", NewText: "b"}); res.Text() != "patch /workspace/nope: no such file or directory" || !res.IsError {
		t.Errorf("missing: %+v", res)
	}
	e.sb.put("/workspace/big", strings.Repeat("a", patchMaxBytes)+"b")
	if res := e.run(t, &PatchCall{Path: "big", OldText: "b", NewText: "c"}); res.Text() != "patch /workspace/big: the file is 10485761 bytes; patch edits files up to 10 MB (use exec for larger files)" || !res.IsError {
		t.Errorf("big: %+v", res)
	}
}

// Two patches of one file through one runner never lose an update, though
// each one reads, waits and writes.
func TestConcurrentPatches(t *testing.T) {
	e := newEnv(t, nil)
	e.sb.readDelay = time.Millisecond
	const n = 30
	var file strings.Builder
	for i := range n {
		fmt.Fprintf(&file, "slot-%02d\n", i)
	}
	e.sb.put("/workspace/shared.txt", file.String())
	e.sb.put("/workspace/other.txt", "slot-00\n")

	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := e.runner.Run(context.Background(), e.inv(&PatchCall{
				Path: "shared.txt", OldText: fmt.Sprintf("slot-%02d\n", i), NewText: fmt.Sprintf("done-%02d\n", i),
			}))
			if err != nil || res.IsError {
				t.Errorf("patch %d: %+v %v", i, res, err)
			}
		})
	}
	// Another file and another sandbox are not held up by these.
	other := newFake()
	other.id = "other"
	other.put("/workspace/shared.txt", "slot-00\n")
	inv := e.inv(&PatchCall{Path: "shared.txt", OldText: "slot-00", NewText: "x"})
	inv.Sandbox = other
	if res, err := e.runner.Run(context.Background(), inv); err != nil || res.IsError {
		t.Errorf("other sandbox: %+v %v", res, err)
	}
	wg.Wait()

	got := e.sb.file("/workspace/shared.txt")
	for i := range n {
		if !strings.Contains(got, fmt.Sprintf("done-%02d\n", i)) {
			t.Errorf("update %d lost", i)
		}
	}
	e.runner.locks.mu.Lock()
	defer e.runner.locks.mu.Unlock()
	if len(e.runner.locks.m) != 0 {
		t.Errorf("%d path locks left", len(e.runner.locks.m))
	}
}

func TestPatchWaitsForLockWithContext(t *testing.T) {
	e := newEnv(t, nil)
	e.sb.put("/workspace/f", "a")
	unlock, err := e.runner.locks.lock(context.Background(), e.sb, "/workspace/f")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.runner.Run(ctx, e.inv(&PatchCall{Path: "f", OldText: "a", NewText: "b"})); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want deadline exceeded", err)
	}
	unlock()
	if res := e.run(t, &PatchCall{Path: "f", OldText: "a", NewText: "b"}); res.IsError {
		t.Errorf("after unlock: %+v", res)
	}
	recs := e.records(t)
	if len(recs) != 4 || recs[1].Error != "context deadline exceeded" {
		t.Errorf("records %+v", recs)
	}
}

func TestFileErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		err     error
		text    string
		failErr bool // Run returns an error
	}{
		{fmt.Errorf("x: %w", sandbox.ErrNotExist), "read /p: no such file or directory", false},
		{fmt.Errorf("x: %w", sandbox.ErrIsDir), "read /p: is a directory", false},
		{errors.New("sandbox: permission denied"), "read /p: permission denied", false},
		{sandbox.ErrNotRunning, "", true},
		{fmt.Errorf("x: %w", sandbox.ErrNoSuchAgent), "", true},
	}
	for _, tt := range tests {
		o, err := fileError(ctx, "read", "/p", tt.err)
		if (err != nil) != tt.failErr || o.res.Text() != tt.text || (err == nil && !o.res.IsError) {
			t.Errorf("%v: %+v, %v", tt.err, o.res, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fileError(cancelled, "read", "/p", errors.New("boom")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestResultJSON(t *testing.T) {
	b, err := json.Marshal(proto.TextResult("Exit code: 0", false))
	if err != nil || string(b) != `{"content":[{"type":"text","text":"Exit code: 0"}],"isError":false}` {
		t.Errorf("%s %v", b, err)
	}
}
