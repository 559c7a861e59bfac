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
	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

// Runner runs core tool calls in sandboxes. Every call goes through the
// gateway's one pipeline (internal/pipeline: policy, audit, hooks,
// redaction); the Runner is the core tools' Tool in it. It is safe for
// concurrent use.
type Runner struct {
	pipe  *pipeline.Pipeline
	log   *slog.Logger
	locks pathLocks

	callTokens CallTokens // nil: exec commands get no call token
}

// CallTokens registers sc as the session of the tool calls made by the one
// exec command about to start for agent, and returns the secret token the
// command gets in proto.CallTokenEnv and the func that ends the
// registration (called when the command ends). A "" token means none.
type CallTokens func(agent string, sc proto.SessionContext) (token string, release func())

// SetCallTokens sets how exec commands get their call token (see
// toolbridge.Server.Attribute). Call it before the Runner is used.
func (r *Runner) SetCallTokens(f CallTokens) { r.callTokens = f }

// NewRunner returns a Runner whose calls go through p (required) and that
// logs to logger (nil means nowhere).
func NewRunner(p *pipeline.Pipeline, logger *slog.Logger) *Runner {
	if p == nil {
		panic("tools: NewRunner without a pipeline")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{pipe: p, log: logger}
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
	redacted    bool   // res is already redacted (pipeline.Result.Redacted)
}

// Run runs one call through the pipeline: policy (a denial is one
// finished audit record), a started audit record (if it cannot be written
// the call is refused with a *pipeline.NotRunError), the preToolExec hooks,
// the tool in the sandbox, the postToolExec hooks and a finished record with
// the duration, exit code, output size and error; the result text is
// redacted.
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
	res, err := r.pipe.Run(ctx, pipeline.Call{
		Agent:   inv.Agent,
		Session: inv.Session,
		Model:   inv.Model,
		Tool:    call.Tool(),
		Type:    audit.TypeCoreTool,
		Target:  audit.TargetSandbox,
		Args:    call.auditArgs(),
	}, coreTool{r: r, inv: inv})
	if err != nil {
		return proto.ToolResult{}, err
	}
	return proto.ToolResult{Content: res.Content, IsError: res.IsError}, nil
}

// coreTool is one core tool call as the pipeline runs it.
type coreTool struct {
	r   *Runner
	inv Invocation
}

func (t coreTool) Run(ctx context.Context, _ *pipeline.Call) (pipeline.Result, error) {
	out, err := t.r.dispatch(ctx, t.inv)
	if err != nil {
		return pipeline.Result{}, err
	}
	res := pipeline.Result{
		Content:     out.res.Content,
		IsError:     out.res.IsError,
		ExitCode:    out.exitCode,
		OutputBytes: out.outputBytes,
		Redacted:    out.redacted,
	}
	if out.errMsg != "" {
		res.Err = errors.New(out.errMsg)
	}
	return res, nil
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
