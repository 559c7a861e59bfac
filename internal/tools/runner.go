package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

// PolicyFunc decides whether agent may call tool. A non-nil error denies the
// call; its message goes to the audit log and, after "permission denied: ",
// to the caller.
type PolicyFunc func(agent, tool string) error

// AllowCoreTools is the policy the spec gives core tools: every agent may
// call all four.
func AllowCoreTools(agent, tool string) error { return nil }

// Runner runs core tool calls in sandboxes, checking policy and writing the
// audit log around each call. It is safe for concurrent use.
type Runner struct {
	audit *audit.Logger
	allow PolicyFunc
	log   *slog.Logger
	locks pathLocks
	now   func() time.Time // for tests

	callTokens CallTokens          // nil: exec commands get no call token
	redact     func(string) string // nil: results are not redacted
}

// SetRedact makes every result text pass through f (redact.Redactor.String)
// before it goes back to the caller. Call it before the Runner is used.
func (r *Runner) SetRedact(f func(string) string) { r.redact = f }

// CallTokens registers sc as the session of the tool calls made by the one
// exec command about to start for agent, and returns the secret token the
// command gets in proto.CallTokenEnv and the func that ends the
// registration (called when the command ends). A "" token means none.
type CallTokens func(agent string, sc proto.SessionContext) (token string, release func())

// SetCallTokens sets how exec commands get their call token (see
// toolbridge.Server.Attribute). Call it before the Runner is used.
func (r *Runner) SetCallTokens(f CallTokens) { r.callTokens = f }

// NewRunner returns a Runner that writes to auditLog (required), asks allow
// before each call (nil means AllowCoreTools) and logs to logger (nil means
// nowhere).
func NewRunner(auditLog *audit.Logger, allow PolicyFunc, logger *slog.Logger) *Runner {
	if auditLog == nil {
		panic("tools: NewRunner without an audit logger")
	}
	if allow == nil {
		allow = AllowCoreTools
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{audit: auditLog, allow: allow, log: logger, now: time.Now}
}

// Invocation is one core tool call and on whose behalf it runs.
type Invocation struct {
	Agent   string          // the agent, as the gateway knows it (never taken from a payload)
	Sandbox sandbox.Sandbox // the agent's running sandbox
	Call    Call
	// Session says where the call comes from; it is audited and passed to
	// exec as BEIGE_* variables. Its AgentName is overridden by Agent.
	Session proto.SessionContext
	Model   string // the model that asked for the call, for the audit log; through the HTTP API the client's activeModel, or ""
	// ExecTimeout is exec's timeout when the call gives none:
	// ModelExecTimeout for the model, HTTPExecTimeout (also used when zero)
	// through the HTTP API.
	ExecTimeout time.Duration
	// NoImages makes read describe image files instead of returning them,
	// for models that do not take images.
	NoImages bool
}

// outcome is what a tool did, for the caller and the audit log.
type outcome struct {
	res         proto.ToolResult
	exitCode    int
	outputBytes int64  // the true size of the output, even when cut
	errMsg      string // for the audit log when the call failed
}

// Run runs one call. The policy decision comes first (it has no side
// effects); then a record is written to the audit log — a started record, or
// for a denied call its one finished record — and only if that write
// succeeds does the call run. A finished record follows with the duration,
// exit code, output size and error.
//
// A tool that fails (missing file, exit code ≠ 0, timeout, denial) gives a
// result with IsError and a nil error. The error is for calls that could not
// be carried out: an invalid invocation, an audit record that could not be
// written, a sandbox that is not running or fails, or ctx ending.
func (r *Runner) Run(ctx context.Context, inv Invocation) (proto.ToolResult, error) {
	if inv.Call == nil || inv.Sandbox == nil || inv.Agent == "" {
		return proto.ToolResult{}, errors.New("tools: invocation needs an agent, a sandbox and a call")
	}
	call := clone(inv.Call)
	if err := call.check(); err != nil {
		return proto.ToolResult{}, err
	}
	inv.Call = call
	inv.Session.AgentName = inv.Agent
	if err := ctx.Err(); err != nil {
		return proto.ToolResult{}, err
	}
	tool := call.Tool()
	rec := audit.Record{
		Agent:   inv.Agent,
		Session: inv.Session.SessionKey,
		Model:   inv.Model,
		Channel: inv.Session.Channel,
		Type:    audit.TypeCoreTool,
		Tool:    tool,
		Args:    call.auditArgs(),
		Target:  audit.TargetSandbox,
	}

	start := r.now()
	if err := r.allow(inv.Agent, tool); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(strings.ToLower(msg), "permission denied") {
			msg = "permission denied: " + msg
		}
		rec.Phase, rec.Decision, rec.Error = audit.PhaseFinished, audit.DecisionDenied, msg
		rec.DurationMs = ptr(r.now().Sub(start).Milliseconds())
		if aerr := r.audit.Log(rec); aerr != nil {
			r.log.Error("audit log write failed", "agent", inv.Agent, "tool", tool, "err", aerr)
			return proto.ToolResult{}, fmt.Errorf("tools: %s denied, and its audit record failed: %w", tool, aerr)
		}
		r.log.Info("core tool denied", "agent", inv.Agent, "tool", tool, "reason", err)
		return proto.TextResult(msg, true), nil
	}

	rec.Phase, rec.Decision = audit.PhaseStarted, audit.DecisionAllowed
	if err := r.audit.Log(rec); err != nil {
		r.log.Error("audit log write failed; call refused", "agent", inv.Agent, "tool", tool, "err", err)
		return proto.ToolResult{}, fmt.Errorf("tools: %s not run: %w", tool, err)
	}

	start = r.now()
	out, err := r.dispatch(ctx, inv)
	dur := r.now().Sub(start)

	rec.Time = time.Time{}
	rec.Phase = audit.PhaseFinished
	rec.DurationMs = ptr(dur.Milliseconds())
	if err != nil {
		rec.Error = clip(err.Error(), 1024)
	} else {
		rec.ExitCode = ptr(out.exitCode)
		rec.OutputBytes = ptr(out.outputBytes)
		rec.Error = clip(out.errMsg, 1024)
	}
	if aerr := r.audit.Log(rec); aerr != nil {
		// The call has run; its result still goes back.
		r.log.Error("audit log write failed after call", "agent", inv.Agent, "tool", tool, "err", aerr)
	}
	if err != nil {
		r.log.Warn("core tool failed", "agent", inv.Agent, "tool", tool, "duration", dur, "err", err)
		return proto.ToolResult{}, err
	}
	r.log.Debug("core tool", "agent", inv.Agent, "tool", tool, "duration", dur, "isError", out.res.IsError)
	if r.redact != nil {
		for i := range out.res.Content {
			out.res.Content[i].Text = r.redact(out.res.Content[i].Text)
		}
	}
	return out.res, nil
}

func (r *Runner) dispatch(ctx context.Context, inv Invocation) (outcome, error) {
	switch c := inv.Call.(type) {
	case *ReadCall:
		return r.read(ctx, inv, c)
	case *WriteCall:
		return r.write(ctx, inv, c)
	case *PatchCall:
		return r.patch(ctx, inv, c)
	case *ExecCall:
		return r.exec(ctx, inv, c)
	}
	panic("unreachable")
}

// clone copies c so that Run never writes to its caller's call.
func clone(c Call) Call {
	switch c := c.(type) {
	case *ReadCall:
		cc := *c
		return &cc
	case *WriteCall:
		cc := *c
		return &cc
	case *PatchCall:
		cc := *c
		return &cc
	case *ExecCall:
		cc := *c
		return &cc
	}
	panic("unreachable")
}

// textOutcome is the outcome of a file tool: exit code 1 when it failed.
func textOutcome(text string, isError bool) outcome {
	o := outcome{res: proto.TextResult(text, isError), outputBytes: int64(len(text))}
	if isError {
		o.exitCode, o.errMsg = 1, text
	}
	return o
}

// fileError turns an error of a sandbox file operation into the outcome
// shown to the caller, or into an error when the sandbox itself failed.
func fileError(ctx context.Context, op, path string, err error) (outcome, error) {
	switch {
	case ctx.Err() != nil:
		return outcome{}, ctx.Err()
	case errors.Is(err, sandbox.ErrNotRunning), errors.Is(err, sandbox.ErrNoSuchAgent):
		return outcome{}, fmt.Errorf("%s %s: %w", op, path, err)
	case errors.Is(err, sandbox.ErrNotExist):
		return textOutcome(op+" "+path+": no such file or directory", true), nil
	case errors.Is(err, sandbox.ErrIsDir):
		return textOutcome(op+" "+path+": is a directory", true), nil
	}
	return textOutcome(op+" "+path+": "+strings.TrimPrefix(err.Error(), "sandbox: "), true), nil
}

// pathLocks serialises writes to one file of one sandbox, so that two
// patches of the same file do not lose an update.
type pathLocks struct {
	mu sync.Mutex
	m  map[string]*pathLock
}

type pathLock struct {
	ch   chan struct{} // holds a token while locked
	refs int
}

func (l *pathLocks) lock(ctx context.Context, sb sandbox.Sandbox, path string) (unlock func(), err error) {
	key := sb.ID() + "\x00" + path
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*pathLock{}
	}
	pl := l.m[key]
	if pl == nil {
		pl = &pathLock{ch: make(chan struct{}, 1)}
		l.m[key] = pl
	}
	pl.refs++
	l.mu.Unlock()

	release := func() {
		l.mu.Lock()
		if pl.refs--; pl.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case pl.ch <- struct{}{}:
		return func() { <-pl.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

func ptr[T any](v T) *T { return &v }

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(trimPartialRune([]byte(s[:n]))) + "…"
}

// trimPartialRune drops an incomplete UTF-8 sequence from the end of b, as
// left by cutting valid text at a byte count.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
