package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/policy"
	"github.com/beige-dev/beige/internal/proto"
)

// maxAuditError bounds the error text written to the audit log.
const maxAuditError = 1024

// Handle runs one tool call from agent's socket; it has the signature of
// toolbridge.Handler. The steps:
//
//  1. policy (deny by default: the tool must be in agents.<a>.tools). A
//     denial is answered with the spec's text, "Permission denied: tool 'git'
//     not allowed for agent 'travel'", exit code 1, and is ONE finished
//     audit record with decision "denied". The policy check has no side
//     effects, so it comes before the started record;
//  2. the started audit record; if it cannot be written the call is refused;
//  3. the tool's lookup (unknown: exit 127) and its working folder
//     (req.Cwd, resolved inside the agent's workspace);
//  4. the preToolExec hooks, in config order; one that fails denies the
//     call (finished record with decision "denied" and the reason);
//  5. the handler;
//  6. the postToolExec hooks (their errors are logged);
//  7. the finished audit record: duration, exit code, output size, error.
//
// agent is the socket's agent: any agent name in req is ignored.
func (h *Host) Handle(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
	start := h.now()
	sc := proto.SessionContext{}
	if req.SessionContext != nil {
		sc = *req.SessionContext
	}
	sc.AgentName = agent
	args := req.Args
	if args == nil {
		args = []string{}
	}
	rec := audit.Record{
		Agent:   agent,
		Session: sc.SessionKey,
		Channel: sc.Channel,
		Type:    audit.TypeTool,
		Tool:    req.Tool,
		Args:    audit.StringArgs(args),
		Target:  audit.TargetGateway,
		// The session is the one the toolbridge attributed by call token;
		// one it could not attribute is marked.
		Unattributed: req.Unattributed,
	}
	ai := h.agents[agent]

	// 1. Policy.
	if ai == nil || h.policy.Check(agent, req.Tool) != nil {
		denied := &policy.DeniedError{Agent: agent, Tool: req.Tool}
		return h.deny(rec, start, denied.Error())
	}

	// 2. Started record.
	rec.Phase, rec.Decision = audit.PhaseStarted, audit.DecisionAllowed
	if err := h.opts.Audit.Log(rec); err != nil {
		h.log.Error("audit log write failed; tool call refused", "agent", agent, "tool", req.Tool, "err", err)
		return proto.ErrorResponse(1, fmt.Sprintf("beige: tool '%s' was not run: the audit log cannot be written", req.Tool))
	}
	finish := func(res Result, err error, decision string) proto.ToolResponse {
		return h.finish(rec, start, res, err, decision)
	}

	// 3. Tool and folder.
	rt := h.tools[req.Tool]
	if rt == nil || slices.Contains(coreTools, req.Tool) {
		return finish(Result{ExitCode: proto.ExitUnknownTool},
			fmt.Errorf("beige: no tool '%s' on the gateway", req.Tool), audit.DecisionAllowed)
	}
	dir, root, err := ResolveDir(ai.workspace, req.Cwd)
	if err != nil {
		return finish(Result{ExitCode: 1}, fmt.Errorf("beige: %s: %w", req.Tool, err), audit.DecisionAllowed)
	}

	// 4. preToolExec hooks.
	pre := &PreToolExecEvent{Agent: agent, Tool: req.Tool, Args: slices.Clone(args), Cwd: req.Cwd, Session: sc}
	if err := runAll(ctx, h.hooks.preToolExec, pre); err != nil {
		reason := err.Error()
		var he *HookError
		if errors.As(err, &he) {
			reason = he.Err.Error()
		}
		denied := &policy.DeniedError{Agent: agent, Tool: req.Tool, Reason: reason}
		h.log.Info("tool call denied by a hook", "agent", agent, "tool", req.Tool, "err", err)
		return finish(Result{ExitCode: 1}, denied, audit.DecisionDenied)
	}

	// 5. The handler.
	call := &Call{
		Agent:     agent,
		Tool:      req.Tool,
		Args:      slices.Clone(args),
		Workspace: root,
		Dir:       dir,
		Config:    MergeConfig(rt.plugin.manifest.DefaultConfig, h.pluginConfig(rt.plugin.name), ai.cfg.PluginConfigs[rt.plugin.name]),
		Session:   sc,
	}
	if h.opts.Freeze != nil {
		call.Freeze = func(ctx context.Context) (func(), error) { return h.opts.Freeze(ctx, agent) }
	}
	callStart := h.now()
	res, herr := runHandler(ctx, rt.Handler, call)

	// 6. postToolExec hooks.
	if len(h.hooks.postToolExec) > 0 {
		post := &PostToolExecEvent{
			Agent: agent, Tool: req.Tool, Args: slices.Clone(args), Session: sc,
			Result: res, Err: herr, Duration: h.now().Sub(callStart),
		}
		if err := runEach(ctx, h.hooks.postToolExec, post); err != nil {
			h.log.Warn("postToolExec hook failed", "agent", agent, "tool", req.Tool, "err", err)
		}
	}

	// 7. Finished record and response.
	return finish(res, herr, audit.DecisionAllowed)
}

func (h *Host) pluginConfig(name string) map[string]any {
	if p := h.cfg.Plugins[name]; p != nil {
		return p.Config
	}
	return nil
}

func runHandler(ctx context.Context, fn Handler, call *Call) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = Result{ExitCode: 1}, fmt.Errorf("beige: tool '%s' failed: internal error (%v)", call.Tool, r)
		}
	}()
	return fn(ctx, call)
}

// deny writes the one finished record of a call policy refused.
func (h *Host) deny(rec audit.Record, start time.Time, msg string) proto.ToolResponse {
	rec.Phase, rec.Decision, rec.Error = audit.PhaseFinished, audit.DecisionDenied, msg
	rec.DurationMs = ptr(h.now().Sub(start).Milliseconds())
	rec.ExitCode = ptr(1)
	if err := h.opts.Audit.Log(rec); err != nil {
		h.log.Error("audit log write failed for a denied call", "agent", rec.Agent, "tool", rec.Tool, "err", err)
	}
	h.log.Info("tool call denied", "agent", rec.Agent, "tool", rec.Tool)
	return proto.ErrorResponse(1, msg)
}

// finish writes the finished record of a call that was started and builds
// its response.
func (h *Host) finish(rec audit.Record, start time.Time, res Result, err error, decision string) proto.ToolResponse {
	resp := proto.ToolResponse{
		Type:     proto.ToolResponseType,
		Output:   res.Output,
		ExitCode: res.ExitCode,
	}
	errText := res.Stderr
	if err != nil {
		if errText != "" && !strings.HasSuffix(errText, "\n") {
			errText += "\n"
		}
		errText += err.Error()
		if resp.ExitCode == 0 {
			resp.ExitCode = 1
		}
	}
	resp.Error = errText
	resp.Success = err == nil && resp.ExitCode == 0
	if red := h.opts.Redact; red != nil {
		resp.Output, resp.Error = red(resp.Output), red(resp.Error)
	}

	outBytes := res.OutputBytes
	if outBytes < int64(len(res.Output)) {
		outBytes = int64(len(res.Output))
	}
	rec.Time = time.Time{}
	rec.Phase, rec.Decision = audit.PhaseFinished, decision
	rec.DurationMs = ptr(h.now().Sub(start).Milliseconds())
	rec.ExitCode = ptr(resp.ExitCode)
	rec.OutputBytes = ptr(outBytes)
	if err != nil {
		rec.Error = clip(err.Error(), maxAuditError)
	}
	if aerr := h.opts.Audit.Log(rec); aerr != nil {
		// The call has run; its result still goes back.
		h.log.Error("audit log write failed after a tool call", "agent", rec.Agent, "tool", rec.Tool, "err", aerr)
	}
	return resp
}

func ptr[T any](v T) *T { return &v }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
