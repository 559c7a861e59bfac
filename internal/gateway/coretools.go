package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/tools"
)

// coreTools are the four core tools (read, write, patch, exec) of one agent
// as its agent loop calls them (agent.Tools): each call is decoded strictly
// (bad arguments become an error result "invalid arguments for exec: …"),
// then run by the runner — through the gateway's tool pipeline: policy,
// audit, hooks, redaction — in the sandbox that sandbox returns (called for
// each call, so that a restarted sandbox is picked up). Exec gets
// tools.ModelExecTimeout unless the call says otherwise.
type coreTools struct {
	runner  *tools.Runner
	sandbox func(ctx context.Context) (sandbox.Sandbox, error)
	agent   string
	defs    []llm.Tool
}

var _ agent.Tools = (*coreTools)(nil)

func newCoreTools(runner *tools.Runner, sandboxFn func(ctx context.Context) (sandbox.Sandbox, error), agentName string) *coreTools {
	defs := tools.Definitions()
	out := make([]llm.Tool, len(defs))
	for i, d := range defs {
		out[i] = llm.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters}
	}
	return &coreTools{runner: runner, sandbox: sandboxFn, agent: agentName, defs: out}
}

func (t *coreTools) Definitions() []llm.Tool {
	out := make([]llm.Tool, len(t.defs))
	for i, d := range t.defs {
		d.Parameters = append(json.RawMessage(nil), d.Parameters...)
		out[i] = d
	}
	return out
}

func (t *coreTools) Run(ctx context.Context, call agent.ToolCall) agent.ToolOutcome {
	if call.InvalidArguments != "" {
		return agent.InvalidJSONOutcome(call.Name, call.InvalidArguments)
	}
	c, err := tools.Decode(call.Name, call.Arguments)
	if err != nil {
		var de *tools.DecodeError
		if errors.As(err, &de) && strings.HasPrefix(de.Msg, "unknown tool") {
			return agent.UnknownToolOutcome(call.Name, t.defs)
		}
		return agent.ErrorOutcome("invalid arguments for %s: %v", call.Name, err)
	}
	sb, err := t.sandbox(ctx)
	if err != nil {
		return agent.ErrorOutcome("%s not run: the sandbox is not available: %v", call.Name, err)
	}
	res, err := t.runner.Run(ctx, tools.Invocation{
		Agent:       t.agent,
		Sandbox:     sb,
		Call:        c,
		Session:     call.Session,
		Model:       call.Model,
		ExecTimeout: tools.ModelExecTimeout,
		NoImages:    !call.Images,
	})
	if err != nil {
		var nr *pipeline.NotRunError
		switch {
		case ctx.Err() != nil:
			return agent.ErrorOutcome("%s aborted: %v", call.Name, context.Cause(ctx))
		case errors.As(err, &nr):
			return agent.ErrorOutcome("%v", err)
		}
		return agent.ErrorOutcome("%s failed: %v", call.Name, err)
	}
	return agent.FromToolResult(res)
}
