package pipeline

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/policy"
	"github.com/beige-dev/beige/internal/proto"
)

type env struct {
	pipe   *Pipeline
	audit  *audit.Logger
	path   string
	hooks  *fakeHooks
	logs   *bytes.Buffer
	ran    int
	result Result
}

type fakeHooks struct {
	mu   sync.Mutex
	pre  []string
	post []string
	deny string // a pre hook's reason, or ""
}

func (h *fakeHooks) PreToolExec(ctx context.Context, c *Call) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pre = append(h.pre, c.Tool+" "+strings.Join(c.Args, " "))
	if h.deny != "" {
		return errors.New(h.deny)
	}
	return nil
}

func (h *fakeHooks) PostToolExec(ctx context.Context, c *Call, r Result, err error, d time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.post = append(h.post, c.Tool)
	return errors.New("post hook errors are logged")
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	e := &env{path: filepath.Join(t.TempDir(), "audit.jsonl"), hooks: &fakeHooks{}, logs: &bytes.Buffer{}}
	al, err := audit.Open(e.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { al.Close() })
	e.audit = al
	opts.Audit = al
	if opts.Policy == nil {
		opts.Policy = policy.New(map[string][]string{"travel": {"git"}})
	}
	opts.Hooks = e.hooks
	opts.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	e.pipe = New(opts)
	e.result = Result{Output: "out", ExitCode: 0}
	return e
}

func (e *env) tool() Tool {
	return ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
		e.ran++
		return e.result, nil
	})
}

func (e *env) records(t *testing.T) []audit.Record {
	t.Helper()
	recs, err := audit.ReadFile(e.path)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func coreCall(agent string) Call {
	return Call{Agent: agent, Tool: "exec", Type: audit.TypeCoreTool, Target: audit.TargetSandbox, Args: []string{"ls"}}
}

func pluginCall(agent, tool string) Call {
	return Call{Agent: agent, Tool: tool, Type: audit.TypeTool, Target: audit.TargetGateway, Args: []string{"status"}}
}

// The outcome of each step, the same for a core and a plugin call: the
// records written, the decision, what ran.
func TestPipelineSteps(t *testing.T) {
	tests := []struct {
		name     string
		call     Call
		hookDeny string
		ran      bool
		pre      int
		records  []string // phase/decision/exitCode
		errText  string   // of the finished record
	}{
		{"core allowed", coreCall("travel"), "", true, 1, []string{"started/allowed/-", "finished/allowed/0"}, ""},
		{"plugin allowed", pluginCall("travel", "git"), "", true, 1, []string{"started/allowed/-", "finished/allowed/0"}, ""},
		{"core, unknown agent", coreCall("ghost"), "", false, 0, []string{"finished/denied/1"}, "Permission denied: tool 'exec' not allowed for agent 'ghost'"},
		{"plugin not allowed", pluginCall("travel", "web"), "", false, 0, []string{"finished/denied/1"}, "Permission denied: tool 'web' not allowed for agent 'travel'"},
		{"core, hook", coreCall("travel"), "too risky", false, 1, []string{"started/allowed/-", "finished/denied/1"}, "Permission denied: tool 'exec' blocked for agent 'travel': too risky"},
		{"plugin, hook", pluginCall("travel", "git"), "too risky", false, 1, []string{"started/allowed/-", "finished/denied/1"}, "Permission denied: tool 'git' blocked for agent 'travel': too risky"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			e.hooks.deny = tt.hookDeny
			res, err := e.pipe.Run(context.Background(), tt.call, e.tool())
			if err != nil {
				t.Fatal(err)
			}
			if (e.ran == 1) != tt.ran || len(e.hooks.pre) != tt.pre {
				t.Errorf("ran %d, pre hooks %v", e.ran, e.hooks.pre)
			}
			var got []string
			for _, r := range e.records(t) {
				code := "-"
				if r.ExitCode != nil {
					code = string(rune('0' + *r.ExitCode))
				}
				got = append(got, r.Phase+"/"+r.Decision+"/"+code)
				if r.Agent != tt.call.Agent || r.Tool != tt.call.Tool || r.Type != tt.call.Type || r.Target != tt.call.Target {
					t.Errorf("record %+v", r)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.records, " ") {
				t.Errorf("records %v, want %v", got, tt.records)
			}
			last := e.records(t)[len(got)-1]
			if last.Error != tt.errText {
				t.Errorf("error %q, want %q", last.Error, tt.errText)
			}
			if tt.errText != "" {
				var de *policy.DeniedError
				if !res.Denied() || res.ExitCode != 1 || res.Stderr != tt.errText || !res.IsError || res.Content[0].Text != tt.errText || !errors.As(res.Err, &de) {
					t.Errorf("denied result %+v", res)
				}
			} else if res.Denied() || res.Output != "out" {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// A started record that cannot be written refuses the call with the same
// error for every kind of call; a denied call is still denied.
func TestPipelineAuditFailure(t *testing.T) {
	for _, c := range []Call{coreCall("travel"), pluginCall("travel", "git")} {
		e := newEnv(t, Options{})
		e.audit.Close()
		_, err := e.pipe.Run(context.Background(), c, e.tool())
		var nr *NotRunError
		if !errors.As(err, &nr) || !errors.Is(err, audit.ErrClosed) || err.Error() != "beige: tool '"+c.Tool+"' was not run: the audit log cannot be written" {
			t.Errorf("%s: err %v", c.Tool, err)
		}
		if e.ran != 0 || len(e.hooks.pre) != 0 {
			t.Errorf("%s ran without its started record", c.Tool)
		}
		res, err := e.pipe.Run(context.Background(), pluginCall("travel", "web"), e.tool())
		if err != nil || !res.Denied() || e.ran != 0 {
			t.Errorf("denied call: %+v %v", res, err)
		}
	}
}

// A finished record that cannot be written is logged; the result, of a
// call that has run, still goes back.
func TestPipelineFinishedRecordFails(t *testing.T) {
	e := newEnv(t, Options{})
	tool := ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
		e.audit.Close()
		return Result{Output: "done"}, nil
	})
	res, err := e.pipe.Run(context.Background(), pluginCall("travel", "git"), tool)
	if err != nil || res.Output != "done" {
		t.Errorf("%+v %v", res, err)
	}
	if !strings.Contains(e.logs.String(), "audit log write failed after a tool call") {
		t.Errorf("log: %s", e.logs)
	}
}

// A tool that could not be carried out: a finished record with the error
// and no exit code; the error goes back.
func TestPipelineToolError(t *testing.T) {
	e := newEnv(t, Options{})
	boom := errors.New("exec: sandbox: not running")
	_, err := e.pipe.Run(context.Background(), coreCall("travel"), ToolFunc(func(context.Context, *Call) (Result, error) {
		return Result{}, boom
	}))
	if !errors.Is(err, boom) {
		t.Errorf("err %v", err)
	}
	recs := e.records(t)
	if len(recs) != 2 || recs[1].Error != boom.Error() || recs[1].ExitCode != nil || recs[1].Decision != audit.DecisionAllowed || len(e.hooks.post) != 1 {
		t.Errorf("records %+v, post hooks %v", recs, e.hooks.post)
	}
}

// Redaction covers every text that goes back; metrics see every call with
// its decision.
func TestPipelineRedactAndMetrics(t *testing.T) {
	type seen struct{ tool, decision string }
	var mu sync.Mutex
	var calls []seen
	metrics := Observe(func(c *Call, res Result, err error, d time.Duration) {
		mu.Lock()
		calls = append(calls, seen{c.Tool, res.Decision})
		mu.Unlock()
	})
	red := func(s string) string { return strings.ReplaceAll(s, "s3cret", "[redacted:k]") }
	e := newEnv(t, Options{Redact: red, Metrics: metrics})
	e.result = Result{
		Content: []proto.Content{{Type: "text", Text: "a s3cret"}}, Output: "o s3cret", Stderr: "e s3cret",
		ExitCode: 1, Err: errors.New("failed: s3cret"),
	}
	res, err := e.pipe.Run(context.Background(), pluginCall("travel", "git"), e.tool())
	if err != nil || res.Content[0].Text != "a [redacted:k]" || res.Output != "o [redacted:k]" || res.Stderr != "e [redacted:k]" || res.Err.Error() != "failed: [redacted:k]" {
		t.Errorf("result %+v %v", res, err)
	}
	_, err = e.pipe.Run(context.Background(), coreCall("travel"), ToolFunc(func(context.Context, *Call) (Result, error) {
		return Result{}, errors.New("sandbox says s3cret")
	}))
	if err == nil || err.Error() != "sandbox says [redacted:k]" {
		t.Errorf("err %v", err)
	}
	e.pipe.Run(context.Background(), pluginCall("travel", "web"), e.tool())
	if len(calls) != 3 || calls[0] != (seen{"git", audit.DecisionAllowed}) || calls[2] != (seen{"web", audit.DecisionDenied}) {
		t.Errorf("metrics saw %v", calls)
	}
}

// The agent of a call is the entry's: the session's claimed agent is
// replaced; a call without agent, tool name or tool is refused.
func TestPipelineCallChecks(t *testing.T) {
	e := newEnv(t, Options{})
	c := pluginCall("travel", "git")
	c.Session = proto.SessionContext{AgentName: "admin", SessionKey: "tui:travel:default"}
	var saw string
	e.pipe.Run(context.Background(), c, ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
		saw = c.Session.AgentName
		return Result{}, nil
	}))
	if saw != "travel" {
		t.Errorf("the tool saw agent %q", saw)
	}
	for _, c := range []Call{{Tool: "git"}, {Agent: "travel"}} {
		if _, err := e.pipe.Run(context.Background(), c, e.tool()); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := e.pipe.Run(context.Background(), c, nil); err == nil {
		t.Error("no tool: no error")
	}
}

// A result its tool already redacted (exec, which must redact before it
// cuts its output) is not scanned again; its error still is.
func TestPipelineRedactsOnce(t *testing.T) {
	var scanned []string
	red := func(s string) string {
		scanned = append(scanned, s)
		return strings.ReplaceAll(s, "s3cret", "[redacted:k]")
	}
	e := newEnv(t, Options{Redact: red})
	e.result = Result{
		Content: []proto.Content{{Type: "text", Text: "out [redacted:k]"}}, Output: "o", Stderr: "e",
		Err: errors.New("failed: s3cret"), Redacted: true,
	}
	res, err := e.pipe.Run(context.Background(), pluginCall("travel", "git"), e.tool())
	if err != nil || res.Content[0].Text != "out [redacted:k]" || res.Err.Error() != "failed: [redacted:k]" {
		t.Errorf("result %+v %v", res, err)
	}
	if want := []string{"failed: s3cret"}; !slices.Equal(scanned, want) {
		t.Errorf("redacted %q, want only %q", scanned, want)
	}
}
