package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
	"github.com/beige-dev/beige/internal/tools"
)

var (
	_ agent.Model = (*RemoteModel)(nil)
	_ agent.Tools = (*RemoteTools)(nil)
)

// RemoteModel is an agent.Model that streams through the gateway's LLM
// proxy (POST /api/chat/stream): the gateway holds the keys, runs the
// hooks, falls back across the agent's models and audits the call.
type RemoteModel struct {
	client *Client
	agent  string
	model  llm.Model
	opts   *llmproto.ChatOptions
}

// NewRemoteModel returns the model m (one of agentName's, as GET
// /api/agents/:name/models lists them) of the gateway c. opts may be nil.
func NewRemoteModel(c *Client, agentName string, m llm.Model, opts *llmproto.ChatOptions) *RemoteModel {
	return &RemoteModel{client: c, agent: agentName, model: m, opts: opts}
}

// Info returns the model's metadata.
func (m *RemoteModel) Info() llm.Model { return m.model }

// Stream sends the context to the gateway with the session the loop runs
// for (agent.SessionFromContext) and returns the reply; see
// Client.ChatStream for the errors.
func (m *RemoteModel) Stream(ctx context.Context, c llm.Context, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	req := llmproto.ChatStreamRequest{
		Provider: m.model.Provider, ModelID: m.model.ID, Context: c,
		Options: m.opts, AgentName: m.agent,
		Partial: new(bool), // the deltas are enough: Client.ChatStream rebuilds the message
	}
	if sc, ok := agent.SessionFromContext(ctx); ok {
		req.SessionKey = sc.SessionKey
	}
	return m.client.ChatStream(ctx, req, emit)
}

// RemoteTools is an agent.Tools that runs the core tools (read, write,
// patch, exec) in the agent's sandbox through POST
// /api/agents/:name/exec. The gateway checks and audits each call.
type RemoteTools struct {
	client *Client
	agent  string
	defs   []llm.Tool
}

// NewRemoteTools returns the core tools of agentName at the gateway c.
func NewRemoteTools(c *Client, agentName string) *RemoteTools {
	defs := tools.Definitions()
	out := make([]llm.Tool, len(defs))
	for i, d := range defs {
		out[i] = llm.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters}
	}
	return &RemoteTools{client: c, agent: agentName, defs: out}
}

// Definitions lists the core tools.
func (t *RemoteTools) Definitions() []llm.Tool {
	out := make([]llm.Tool, len(t.defs))
	for i, d := range t.defs {
		d.Parameters = append(json.RawMessage(nil), d.Parameters...)
		out[i] = d
	}
	return out
}

// Run runs one call at the gateway. Parameters the gateway rejects (400)
// give an error result that says why, as the gateway's own loop does;
// any other failure an error result saying the call failed.
func (t *RemoteTools) Run(ctx context.Context, call agent.ToolCall) agent.ToolOutcome {
	if call.InvalidArguments != "" {
		return agent.ErrorOutcome("invalid arguments for %s: not a JSON object", call.Name)
	}
	params := call.Arguments
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	if call.Name == tools.ToolExec {
		params = withExecTimeout(params)
	}
	res, err := t.client.Exec(ctx, t.agent, proto.ExecRequest{Tool: call.Name, Params: params, SessionKey: call.Session.SessionKey})
	if err != nil {
		var e *Error
		switch {
		case ctx.Err() != nil:
			return agent.ErrorOutcome("%s aborted: %v", call.Name, context.Cause(ctx))
		case errors.As(err, &e) && e.Status == http.StatusBadRequest:
			return agent.ErrorOutcome("invalid arguments for %s: %s", call.Name, e.Msg)
		case errors.As(err, &e):
			return agent.ErrorOutcome("%s failed: %s", call.Name, e.Msg)
		}
		return agent.ErrorOutcome("%s failed: %v", call.Name, err)
	}
	out := agent.FromToolResult(res)
	if !call.Images {
		for i, c := range out.Content {
			if c.Type == llm.ContentImage {
				out.Content[i] = llm.Text(fmt.Sprintf("[%s image not shown: this model does not accept images]", c.MimeType))
			}
		}
	}
	return out
}

// withExecTimeout gives an exec call without a timeout the timeout the
// gateway gives the model's own calls (tools.ModelExecTimeout) rather than
// the shorter default of the HTTP endpoint.
func withExecTimeout(params json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || m == nil {
		return params // the gateway says what is wrong
	}
	if _, ok := m["timeout"]; ok {
		return params
	}
	m["timeout"] = json.RawMessage(fmt.Sprint(int(tools.ModelExecTimeout.Seconds())))
	b, err := json.Marshal(m)
	if err != nil {
		return params
	}
	return b
}
