package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/proto"
)

// Handle runs one tool call from agent's socket; it has the signature of
// toolbridge.Handler. It builds the pipeline.Call (agent is the socket's
// agent: any agent name in req is ignored) and runs the plugin tool through
// the Host's pipeline (SetPipeline: the gateway's one pipeline), which
// checks policy, writes the audit records and runs the preToolExec and
// postToolExec hooks — see internal/pipeline. A denial is answered with its
// text on stderr and exit code 1 ("Permission denied: tool 'git' not allowed
// for agent 'travel'"); a call whose started record cannot be written is
// refused with exit code 1. The tool itself then looks up the handler
// (unknown: exit 127) and resolves the working folder (req.Cwd, inside the
// agent's workspace) before running it.
func (h *Host) Handle(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
	sc := proto.SessionContext{}
	if req.SessionContext != nil {
		sc = *req.SessionContext
	}
	args := req.Args
	if args == nil {
		args = []string{}
	}
	call := pipeline.Call{
		Agent:   agent,
		Session: sc,
		Tool:    req.Tool,
		Type:    audit.TypeTool,
		Target:  audit.TargetGateway,
		Args:    slices.Clone(args),
		Cwd:     req.Cwd,
		// The session is the one the toolbridge attributed by call token;
		// one it could not attribute is marked.
		Unattributed: req.Unattributed,
	}
	res, err := h.pipeline().Run(ctx, call, pluginTool{h: h})
	if err != nil {
		var nr *pipeline.NotRunError
		if errors.As(err, &nr) {
			return proto.ErrorResponse(1, err.Error())
		}
		return proto.ErrorResponse(1, fmt.Sprintf("beige: tool '%s' was not run: %v", req.Tool, err))
	}
	return Response(res)
}

// Response is the socket's answer for what the pipeline gave a plugin tool
// call: stdout, stderr (with the error text) and the exit code.
func Response(res pipeline.Result) proto.ToolResponse {
	return proto.ToolResponse{
		Type:     proto.ToolResponseType,
		Output:   res.Output,
		Error:    res.Stderr,
		ExitCode: res.ExitCode,
		Success:  res.Err == nil && res.ExitCode == 0 && !res.Denied(),
	}
}

// pluginTool is a plugin tool as the pipeline runs it.
type pluginTool struct{ h *Host }

func (t pluginTool) Run(ctx context.Context, c *pipeline.Call) (pipeline.Result, error) {
	h := t.h
	ai := h.agents[c.Agent]
	if ai == nil { // policy lets no unknown agent through; a Host's own pipeline may not be its policy
		return result(Result{ExitCode: 1}, fmt.Errorf("beige: no agent '%s' on the gateway", c.Agent)), nil
	}
	rt := h.tools[c.Tool]
	if rt == nil || slices.Contains(coreTools, c.Tool) {
		return result(Result{ExitCode: proto.ExitUnknownTool}, fmt.Errorf("beige: no tool '%s' on the gateway", c.Tool)), nil
	}
	dir, root, err := ResolveDir(ai.workspace, c.Cwd)
	if err != nil {
		return result(Result{ExitCode: 1}, fmt.Errorf("beige: %s: %w", c.Tool, err)), nil
	}
	call := &Call{
		Agent:     c.Agent,
		Tool:      c.Tool,
		Args:      slices.Clone(c.Args),
		Workspace: root,
		Dir:       dir,
		Config:    MergeConfig(rt.plugin.manifest.DefaultConfig, h.pluginConfig(rt.plugin.name), ai.cfg.PluginConfigs[rt.plugin.name]),
		Session:   c.Session,
	}
	if h.opts.Freeze != nil {
		agent := c.Agent
		call.Freeze = func(ctx context.Context) (func(), error) { return h.opts.Freeze(ctx, agent) }
	}
	res, herr := runHandler(ctx, rt.Handler, call)
	return result(res, herr), nil
}

// result is what a handler gave, as the pipeline records it: stderr with
// the error's text after it, exit code 1 for an error without one.
func result(res Result, err error) pipeline.Result {
	out := pipeline.Result{
		Output:      res.Output,
		Stderr:      res.Stderr,
		ExitCode:    res.ExitCode,
		OutputBytes: max(res.OutputBytes, int64(len(res.Output))),
		Err:         err,
	}
	if err != nil {
		if out.Stderr != "" && !strings.HasSuffix(out.Stderr, "\n") {
			out.Stderr += "\n"
		}
		out.Stderr += err.Error()
		if out.ExitCode == 0 {
			out.ExitCode = 1
		}
	}
	return out
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

var _ pipeline.Hooks = (*Host)(nil)

// PreToolExec runs the preToolExec hooks, in config order, for any tool
// call (core tools too) that policy allowed: the pipeline's Hooks. The
// first error denies the call; the error returned is the hook's own, its
// reason.
func (h *Host) PreToolExec(ctx context.Context, c *pipeline.Call) error {
	if len(h.hooks.preToolExec) == 0 {
		return nil
	}
	ev := &PreToolExecEvent{Agent: c.Agent, Tool: c.Tool, Args: slices.Clone(c.Args), Cwd: c.Cwd, Session: c.Session}
	err := runAll(ctx, h.hooks.preToolExec, ev)
	if err == nil {
		return nil
	}
	h.log.Info("tool call denied by a hook", "agent", c.Agent, "tool", c.Tool, "err", err)
	var he *HookError
	if errors.As(err, &he) {
		return he.Err
	}
	return err
}

// PostToolExec runs the postToolExec hooks; their errors are returned joined.
func (h *Host) PostToolExec(ctx context.Context, c *pipeline.Call, r pipeline.Result, err error, d time.Duration) error {
	if len(h.hooks.postToolExec) == 0 {
		return nil
	}
	res := Result{Output: r.Output, Stderr: r.Stderr, ExitCode: r.ExitCode, OutputBytes: r.OutputBytes}
	if c.Type == audit.TypeCoreTool {
		var b strings.Builder
		for _, ct := range r.Content {
			b.WriteString(ct.Text)
		}
		res.Output = b.String()
	}
	if err == nil {
		err = r.Err
	}
	ev := &PostToolExecEvent{Agent: c.Agent, Tool: c.Tool, Args: slices.Clone(c.Args), Session: c.Session,
		Result: res, Err: err, Duration: d}
	return runEach(ctx, h.hooks.postToolExec, ev)
}
