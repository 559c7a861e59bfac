// Package pipeline is the one path every tool call takes.
//
// Every entry — the model's tool calls in the agent loop, POST
// /api/agents/:name/exec and the socket calls of the launchers in a sandbox
// (built-in and external plugins, later TypeScript ones) — builds a [Call]
// and hands it, with the [Tool] that carries it out, to [Pipeline.Run]. The
// pipeline is assembled once, by the gateway, with [New]: decorators around
// the tool, outermost first,
//
//	redact -> metrics -> policy -> approval -> audit -> hooks -> the tool
//
// The steps:
//
//   - redact: configured secrets in what goes back to the caller (result
//     blocks, stdout, stderr, error text) become "[redacted:<config path>]".
//     The audit log redacts its own records (audit.Options.Redactor).
//   - metrics: a seam (Options.Metrics, see [Observe]) that sees every call
//     with its decision, outcome and duration; nil means none.
//   - policy: deny by default (policy.Engine). A denial is ONE finished
//     record, decision "denied", exit code 1 and the spec's text ("Permission
//     denied: tool 'git' not allowed for agent 'travel'"); policy has no side
//     effects, so it comes before the started record.
//   - approval: a call that one of the agent's ask rules matches
//     (Options.Approvals, see internal/approval) writes a "pending" record
//     (phase and decision "pending", the rule) and waits for the first
//     answer on a channel of the session. Approved, it goes on: its started
//     and finished records carry approvedBy ("<who> via <channel>") and
//     approval ("approve", "always", or "remembered" after an earlier
//     "always" of the session). Denied, or unanswered in time, it is ONE
//     more finished record, decision "denied", exit code 1, approvedBy and
//     approval ("deny", "timeout"), and the caller sees a
//     policy.DeniedError: "… blocked for agent 'a': denied by ann via
//     telegram" or "…: no answer within 300 s".
//   - audit: a started record — if it cannot be written the call is refused
//     with [NotRunError], the same text on every entry — then after the call
//     a finished record (duration, exit code, output size, error). A
//     finished record that cannot be written is logged; the result still
//     goes back, since the call has run.
//   - hooks: the plugins' preToolExec hooks, in config order, for every tool,
//     core tools included; one that fails denies the call (the started
//     record is followed by a finished one with decision "denied", exit code
//     1 and a policy.DeniedError carrying the hook's reason). The
//     postToolExec hooks see what the tool did; their errors are logged.
//
// So the same outcome gives the same records whichever way a call came in.
// The agent of a Call is always the entry's own (the socket's, the URL's,
// the loop's), never one named in a payload.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/policy"
	"github.com/beige-dev/beige/internal/proto"
)

// Call is one tool call and on whose behalf it runs.
type Call struct {
	// Agent is the agent as the entry knows it: the socket's, the URL's or
	// the agent loop's, never a name taken from a payload.
	Agent string
	// Session says where the call comes from; Run sets its AgentName to Agent.
	Session proto.SessionContext
	Model   string // the model that asked for the call, for the audit log, or ""
	Tool    string // the tool's name: "exec", "git", …
	Type    string // audit.TypeCoreTool or audit.TypeTool
	Target  string // audit.TargetSandbox or audit.TargetGateway
	// Args are the call's arguments as the audit log and the hooks see them:
	// the command for exec, [path] for read and patch, [path, "(N bytes)"]
	// for write (never the content), the argv of a plugin tool.
	Args []string
	// Cwd is, for a plugin tool, the folder the sandbox sent (relative to
	// /workspace); "" for core tools.
	Cwd string
	// Unattributed marks a socket call whose session the toolbridge could
	// not attribute (no valid call token).
	Unattributed bool

	tool Tool // set by Run
	// Set by the approval step for the audit records.
	rule, approvedBy, approval string
}

// Result is what a call gave. A tool fills in the fields its entry reads
// back (Content and IsError for a core tool; Output, Stderr and ExitCode
// for a plugin tool) and the audit summary (ExitCode, OutputBytes, Err).
type Result struct {
	// Content and IsError are a core tool's result for its caller.
	Content []proto.Content
	IsError bool
	// Output and Stderr are a plugin tool's stdout and stderr (the latter
	// with the error text, if any) for the sandbox.
	Output, Stderr string
	ExitCode       int
	// OutputBytes is the true size of the output, even when it was cut.
	OutputBytes int64
	// Err is why the tool failed (a timeout, a handler's error, a denial),
	// for the audit log and the hooks; nil when it did not.
	Err error
	// Decision is audit.DecisionAllowed or audit.DecisionDenied; set by the
	// pipeline.
	Decision string
	// Redacted says the tool already redacted Content, Output and Stderr
	// with Options.Redact (exec must, before it cuts its output), so the
	// redaction step does not scan them again. Err is redacted either way.
	Redacted bool
}

// Denied reports whether the call was refused, by policy or by a hook.
func (r Result) Denied() bool { return r.Decision == audit.DecisionDenied }

// Tool carries out a call. A tool that fails (missing file, exit code ≠ 0,
// timeout) returns a Result saying so and a nil error; the error is for a
// call that could not be carried out (an invalid call, a sandbox that is
// not running, ctx ending).
type Tool interface {
	Run(ctx context.Context, c *Call) (Result, error)
}

// ToolFunc is a func as a Tool.
type ToolFunc func(ctx context.Context, c *Call) (Result, error)

func (f ToolFunc) Run(ctx context.Context, c *Call) (Result, error) { return f(ctx, c) }

// Decorator wraps a Tool in one step of the pipeline.
type Decorator func(next Tool) Tool

// Observe returns a Decorator for Options.Metrics that calls f after every
// call — denied ones and those refused for the audit log included — with
// what it gave (Result.Decision says allowed or denied; err a call that
// could not be carried out) and how long it took.
func Observe(f func(c *Call, res Result, err error, d time.Duration)) Decorator {
	return func(next Tool) Tool {
		return ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
			start := time.Now()
			res, err := next.Run(ctx, c)
			f(c, res, err, time.Since(start))
			return res, err
		})
	}
}

// Policy decides whether an agent may call a tool: *policy.Engine. A non-nil
// error denies; a *policy.DeniedError's text is what the caller sees.
type Policy interface {
	Check(agent, tool string) error
}

// PolicyFunc is a func as a Policy.
type PolicyFunc func(agent, tool string) error

func (f PolicyFunc) Check(agent, tool string) error { return f(agent, tool) }

// Hooks are the plugins' tool hooks (plugin.Host).
type Hooks interface {
	// PreToolExec runs before the tool; a non-nil error denies the call and
	// its text is the reason the caller sees.
	PreToolExec(ctx context.Context, c *Call) error
	// PostToolExec runs after the tool with what it gave (err is the
	// tool's error, when it could not be carried out); errors are logged.
	PostToolExec(ctx context.Context, c *Call, r Result, err error, d time.Duration) error
}

// Options configure a Pipeline. Audit is required.
type Options struct {
	Audit *audit.Logger
	// Policy is the one policy engine; nil denies every call.
	Policy Policy
	// Approvals holds calls that match an agent's ask rules until a human
	// answers; nil means no call waits.
	Approvals *approval.Broker
	// Hooks are the plugins' preToolExec and postToolExec hooks; nil means none.
	Hooks Hooks
	// Redact replaces configured secrets in a text (redact.Redactor.String);
	// nil means results are not redacted.
	Redact func(string) string
	// Metrics, when set, wraps the pipeline below redaction and above
	// policy: it sees every call, denied ones included, with the Result's
	// Decision, and its duration (the lead wires internal/metrics here).
	Metrics Decorator
	// Logger receives the pipeline's logs (default: discarded).
	Logger *slog.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Pipeline runs tool calls through the decorators. It is safe for
// concurrent use.
type Pipeline struct {
	opts  Options
	log   *slog.Logger
	now   func() time.Time
	chain Tool
}

// Redact replaces configured secrets in s, as the pipeline does to every
// result; s as it is when none are set. A tool that cuts its output calls
// it first, so that a secret running over the cut is not left half
// visible (see tools' exec).
func (p *Pipeline) Redact(s string) string {
	if p.opts.Redact == nil {
		return s
	}
	return p.opts.Redact(s)
}

// New assembles the pipeline.
func New(opts Options) *Pipeline {
	if opts.Audit == nil {
		panic("pipeline: New without an audit logger")
	}
	p := &Pipeline{opts: opts, log: opts.Logger, now: opts.Now}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.opts.Policy == nil {
		p.opts.Policy = PolicyFunc(func(agent, tool string) error { return &policy.DeniedError{Agent: agent, Tool: tool} })
	}
	// Innermost first.
	var t Tool = ToolFunc(dispatch)
	t = p.hooks(t)
	t = p.audit(t)
	if opts.Approvals != nil {
		t = p.approval(t)
	}
	t = p.policy(t)
	if opts.Metrics != nil {
		t = opts.Metrics(t)
	}
	if opts.Redact != nil {
		t = p.redact(t)
	}
	p.chain = t
	return p
}

// Run runs c through the pipeline and tool. c is not changed; the Call
// the decorators see has Session.AgentName set to c.Agent.
func (p *Pipeline) Run(ctx context.Context, c Call, tool Tool) (Result, error) {
	if c.Agent == "" || c.Tool == "" || tool == nil {
		return Result{}, errors.New("pipeline: a call needs an agent, a tool name and a tool")
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	c.Session.AgentName = c.Agent
	c.tool = tool
	return p.chain.Run(ctx, &c)
}

func dispatch(ctx context.Context, c *Call) (Result, error) { return c.tool.Run(ctx, c) }

// NotRunError refuses a call whose started record could not be written.
type NotRunError struct {
	Tool string
	Err  error
}

func (e *NotRunError) Error() string {
	return fmt.Sprintf("beige: tool '%s' was not run: the audit log cannot be written", e.Tool)
}

func (e *NotRunError) Unwrap() error { return e.Err }

// maxAuditError bounds the error text written to the audit log.
const maxAuditError = 1024

func (p *Pipeline) record(c *Call) audit.Record {
	return audit.Record{
		Agent:        c.Agent,
		Session:      c.Session.SessionKey,
		Model:        c.Model,
		Channel:      c.Session.Channel,
		Type:         c.Type,
		Tool:         c.Tool,
		Args:         audit.StringArgs(c.Args),
		Target:       c.Target,
		Unattributed: c.Unattributed,
		Rule:         c.rule,
		ApprovedBy:   c.approvedBy,
		Approval:     c.approval,
	}
}

// denied is the Result of a refused call.
func denied(err error) Result {
	msg := err.Error()
	return Result{
		Content:  []proto.Content{{Type: "text", Text: msg}},
		IsError:  true,
		Stderr:   msg,
		ExitCode: 1,
		Err:      err,
		Decision: audit.DecisionDenied,
	}
}

func (p *Pipeline) policy(next Tool) Tool {
	return ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
		start := p.now()
		err := p.opts.Policy.Check(c.Agent, c.Tool)
		if err == nil {
			return next.Run(ctx, c)
		}
		var de *policy.DeniedError
		if !errors.As(err, &de) {
			err = &policy.DeniedError{Agent: c.Agent, Tool: c.Tool, Reason: err.Error()}
		}
		res := denied(err)
		rec := p.record(c)
		rec.Phase, rec.Decision, rec.Error = audit.PhaseFinished, audit.DecisionDenied, clip(err.Error(), maxAuditError)
		rec.DurationMs = ptr(p.now().Sub(start).Milliseconds())
		rec.ExitCode = ptr(1)
		if aerr := p.opts.Audit.Log(rec); aerr != nil {
			// The call is refused either way.
			p.log.Error("audit log write failed for a denied call", "agent", c.Agent, "tool", c.Tool, "err", aerr)
		}
		p.log.Info("tool call denied", "agent", c.Agent, "tool", c.Tool, "reason", err)
		return res, nil
	})
}

func (p *Pipeline) approval(next Tool) Tool {
	b := p.opts.Approvals
	return ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
		rule, timeout, ok := b.Rule(c.Agent, c.Tool, c.Args)
		if !ok {
			return next.Run(ctx, c)
		}
		c.rule = rule
		session := c.Session.SessionKey
		if c.Unattributed {
			session = "" // never "this session" of a call nobody can place
		}
		if b.Remembered(c.Agent, session, rule) {
			c.approval = "remembered"
			return next.Run(ctx, c)
		}
		start := p.now()
		rec := p.record(c)
		rec.Phase, rec.Decision = audit.PhasePending, audit.DecisionPending
		if err := p.opts.Audit.Log(rec); err != nil {
			p.log.Error("audit log write failed; tool call refused", "agent", c.Agent, "tool", c.Tool, "err", err)
			return Result{}, &NotRunError{Tool: c.Tool, Err: err}
		}
		out, err := b.Wait(ctx, approval.Request{
			Agent: c.Agent, Session: session, Channel: c.Session.Channel,
			Tool: c.Tool, Args: c.Args, Rule: rule,
		}, timeout)
		if err == nil && out.Approved {
			c.approvedBy, c.approval = out.Answer.Who(), string(out.Answer.Decision)
			if out.Remembered {
				c.approvedBy, c.approval = "", "remembered"
			}
			p.log.Info("tool call approved", "agent", c.Agent, "tool", c.Tool, "rule", rule, "by", c.approvedBy, "approval", c.approval)
			return next.Run(ctx, c)
		}
		rec = p.record(c)
		rec.Phase, rec.Decision = audit.PhaseFinished, audit.DecisionDenied
		rec.DurationMs = ptr(p.now().Sub(start).Milliseconds())
		var res Result
		switch {
		case err != nil:
			rec.Approval = "canceled"
			rec.Error = clip("waiting for approval: "+err.Error(), maxAuditError)
		case out.TimedOut:
			rec.Approval = "timeout"
			res = denied(&policy.DeniedError{Agent: c.Agent, Tool: c.Tool, Reason: "no answer within " + strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64) + " s"})
		default:
			rec.Approval, rec.ApprovedBy = string(out.Answer.Decision), out.Answer.Who()
			res = denied(&policy.DeniedError{Agent: c.Agent, Tool: c.Tool, Reason: "denied by " + out.Answer.Who()})
		}
		if res.Err != nil {
			rec.Error = clip(res.Err.Error(), maxAuditError)
			rec.ExitCode = ptr(1)
		}
		if aerr := p.opts.Audit.Log(rec); aerr != nil {
			p.log.Error("audit log write failed for a call denied by approval", "agent", c.Agent, "tool", c.Tool, "err", aerr)
		}
		p.log.Info("tool call not approved", "agent", c.Agent, "tool", c.Tool, "rule", rule, "approval", rec.Approval, "by", rec.ApprovedBy)
		if err != nil {
			return Result{}, err
		}
		return res, nil
	})
}

func (p *Pipeline) audit(next Tool) Tool {
	return ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
		rec := p.record(c)
		rec.Phase, rec.Decision = audit.PhaseStarted, audit.DecisionAllowed
		if err := p.opts.Audit.Log(rec); err != nil {
			p.log.Error("audit log write failed; tool call refused", "agent", c.Agent, "tool", c.Tool, "err", err)
			return Result{}, &NotRunError{Tool: c.Tool, Err: err}
		}
		start := p.now()
		res, err := next.Run(ctx, c)
		dur := p.now().Sub(start)
		if res.Decision == "" {
			res.Decision = audit.DecisionAllowed
		}

		rec.Time = time.Time{}
		rec.Phase, rec.Decision = audit.PhaseFinished, res.Decision
		rec.DurationMs = ptr(dur.Milliseconds())
		if err != nil {
			rec.Error = clip(err.Error(), maxAuditError)
		} else {
			rec.ExitCode = ptr(res.ExitCode)
			rec.OutputBytes = ptr(max(res.OutputBytes, int64(len(res.Output))))
			if res.Err != nil {
				rec.Error = clip(res.Err.Error(), maxAuditError)
			}
		}
		if aerr := p.opts.Audit.Log(rec); aerr != nil {
			// The call has run; its result still goes back.
			p.log.Error("audit log write failed after a tool call", "agent", c.Agent, "tool", c.Tool, "err", aerr)
		}
		if err != nil {
			p.log.Warn("tool call failed", "agent", c.Agent, "tool", c.Tool, "duration", dur, "err", err)
		} else {
			p.log.Debug("tool call", "agent", c.Agent, "tool", c.Tool, "duration", dur, "exitCode", res.ExitCode, "decision", res.Decision)
		}
		return res, err
	})
}

func (p *Pipeline) hooks(next Tool) Tool {
	if p.opts.Hooks == nil {
		return next
	}
	h := p.opts.Hooks
	return ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
		if err := h.PreToolExec(ctx, c); err != nil {
			p.log.Info("tool call denied by a hook", "agent", c.Agent, "tool", c.Tool, "reason", err)
			return denied(&policy.DeniedError{Agent: c.Agent, Tool: c.Tool, Reason: err.Error()}), nil
		}
		start := p.now()
		res, err := next.Run(ctx, c)
		if perr := h.PostToolExec(ctx, c, res, err, p.now().Sub(start)); perr != nil {
			p.log.Warn("postToolExec hook failed", "agent", c.Agent, "tool", c.Tool, "err", perr)
		}
		return res, err
	})
}

func (p *Pipeline) redact(next Tool) Tool {
	red := p.opts.Redact
	return ToolFunc(func(ctx context.Context, c *Call) (Result, error) {
		res, err := next.Run(ctx, c)
		if !res.Redacted {
			for i := range res.Content {
				if res.Content[i].Text != "" {
					res.Content[i].Text = red(res.Content[i].Text)
				}
			}
			if res.Output != "" {
				res.Output = red(res.Output)
			}
			if res.Stderr != "" {
				res.Stderr = red(res.Stderr)
			}
		}
		if res.Err != nil {
			res.Err = redactedError{res.Err, red(res.Err.Error())}
		}
		if err != nil {
			err = redactedError{err, red(err.Error())}
		}
		return res, err
	})
}

// redactedError is an error with secrets taken out of its text; errors.Is
// and As still see the original.
type redactedError struct {
	err error
	msg string
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

func ptr[T any](v T) *T { return &v }

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
