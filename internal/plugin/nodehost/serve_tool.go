package nodehost

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// Limits on ctx.invokeTool's arguments (they come from the plugin).
const (
	maxInvokeArgs      = 1024
	maxInvokeArgsBytes = 1 << 20
)

// serveInvokeTool answers ctx.invokeTool(toolName, args, sessionContext).
// Unlike the original, which calls the tool's handler directly, the call
// goes through the gateway's one tool pipeline as a call of the agent
// sessionContext.agentName names: that agent's policy, approval, audit and
// hooks apply, so a plugin gains nothing by naming an agent beyond what
// that agent may do itself. Without a configured agent the call is refused
// (the original would run the handler as nobody). The answer is the
// original's ToolResult: output (stdout, then stderr of a failed call) and
// exitCode. A tool no plugin registered answers the original's
// {output: "Unknown tool: <name>", exitCode: 1} without running anything.
func (p *Plugin) serveInvokeTool(ctx context.Context, pc plugin.PluginContext, raw json.RawMessage, need func() error) (any, error) {
	const op = "invokeTool"
	var a struct {
		ToolName       string                `json:"toolName"`
		Args           []string              `json:"args"`
		SessionContext *proto.SessionContext `json:"sessionContext"`
	}
	if err := decodeNamed(op, raw, &a, need); err != nil {
		return nil, err
	}
	if err := checkNames(op, a.ToolName); err != nil {
		return nil, err
	}
	if len(a.Args) > maxInvokeArgs {
		return nil, fmt.Errorf("ctx.%s: bad arguments: more than %d args", op, maxInvokeArgs)
	}
	n := 0
	for _, s := range a.Args {
		n += len(s)
	}
	if n > maxInvokeArgsBytes {
		return nil, fmt.Errorf("ctx.%s: bad arguments: args longer than %d bytes", op, maxInvokeArgsBytes)
	}
	ti, ok := pc.(plugin.ToolInvoker)
	if !ok {
		return nil, fmt.Errorf("ctx.%s is not supported by this gateway", op)
	}
	var sc proto.SessionContext
	if a.SessionContext != nil {
		sc = *a.SessionContext
	}
	if sc.AgentName == "" {
		return nil, fmt.Errorf("ctx.%s: sessionContext.agentName is required: the tool runs as that agent, under its policy", op)
	}
	for _, f := range []string{sc.AgentName, sc.SessionKey, sc.Channel, sc.ChatID, sc.ThreadID} {
		if len(f) > maxNameLen {
			return nil, fmt.Errorf("ctx.%s: bad arguments: a sessionContext field longer than %d bytes", op, maxNameLen)
		}
	}
	if !slices.Contains(pc.Agents(), sc.AgentName) {
		return nil, fmt.Errorf("ctx.%s: unknown agent %q", op, sc.AgentName)
	}
	if p.env.RegisteredTools == nil || !slices.Contains(p.env.RegisteredTools(), a.ToolName) {
		return map[string]any{"output": "Unknown tool: " + a.ToolName, "exitCode": 1}, nil
	}
	if a.Args == nil {
		a.Args = []string{}
	}
	resp, err := ti.InvokeTool(ctx, sc.AgentName, a.ToolName, a.Args, sc)
	if err != nil {
		return nil, fmt.Errorf("ctx.%s: %w", op, err)
	}
	out := resp.Output
	if !resp.Success && resp.Error != "" {
		if out != "" && out[len(out)-1] != '\n' {
			out += "\n"
		}
		out += resp.Error
	}
	return map[string]any{"output": out, "exitCode": resp.ExitCode}, nil
}
