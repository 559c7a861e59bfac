package plugin

import (
	"context"
	"encoding/json"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
)

// PluginContext is what a channel uses to talk to agents: the gateway's
// agent manager and session settings, seen from a plugin. The gateway
// implements it; everything a chat channel needs is here, so a Slack or
// Discord channel needs nothing new.
type PluginContext interface {
	// Agents lists the configured agents, in config order.
	Agents() []string
	// Prompt sends a user message to an agent in a session and waits for
	// the final answer. Prompts to one session run one at a time; Abort
	// stops the running one. Streaming and verbose mode go through the
	// request's callbacks.
	Prompt(ctx context.Context, req PromptRequest) (*PromptResult, error)
	// NewSession starts a fresh session under sessionKey; the old one's
	// file stays.
	NewSession(ctx context.Context, agent, sessionKey string) error
	// Abort stops the running prompt of a session; it reports whether one ran.
	Abort(agent, sessionKey string) bool
	// Compact summarises the session's older turns now.
	Compact(ctx context.Context, agent, sessionKey string) error
	// Status describes a session.
	Status(ctx context.Context, agent, sessionKey string) (SessionStatus, error)
	// Models lists the agent's models as "provider/model", primary first.
	Models(agent string) []string
	// SetModel pins the session to one of the agent's models
	// ("provider/model"); "" returns it to the agent's own order
	// (primary, then fallbacks). Any other model is an error.
	SetModel(ctx context.Context, agent, sessionKey, model string) error
	// Settings returns the session's settings: the system defaults
	// (SystemSettings), overridden by the channel's defaults, overridden by
	// what the session set (SetSetting).
	Settings(sessionKey string, channelDefaults map[string]any) map[string]any
	// SetSetting overrides one setting for a session (persisted in
	// $BEIGE_HOME/sessions/session-settings.json); a nil value removes the
	// override.
	SetSetting(sessionKey, name string, value any) error
}

// SystemSettings are the settings every session starts from.
var SystemSettings = map[string]any{
	"verbose":   false,
	"streaming": true,
}

// PromptRequest is one user message for PluginContext.Prompt.
type PromptRequest struct {
	Agent      string
	SessionKey string // channel:chatId[:threadId]
	Message    string
	// Channel, if set, is the channel the session records (a plugin
	// channel's name), else the session key's first part.
	Channel string
	// OnEvent, if set, receives the model's stream events (text deltas and
	// so on), for streaming replies.
	OnEvent func(llm.Event)
	// OnToolStart, if set, is told before each tool call runs, with a one
	// line summary such as "exec: ls -la" (verbose mode).
	OnToolStart func(summary string)
	// OnToolCall, if set, is told before each tool call runs, with the
	// tool's name and its arguments as the model gave them (a TypeScript
	// plugin's onToolStart).
	OnToolCall func(name string, args json.RawMessage)
	// ModelOverride, if set ("provider/model", the provider up to the
	// first slash), is the only model of this prompt (no fallback). It must
	// be the agent's primary or one of its fallbacks; the session's pinned
	// model is not changed.
	ModelOverride string
	// ReplyTo, if set, is where the session's replies go (the original's
	// ReplyTarget, a JSON object), kept in the session's metadata as
	// "_replyTo".
	ReplyTo json.RawMessage
	// OnCompactionStart and OnCompactionEnd, if set, are told when the
	// session's older turns are summarised during this prompt.
	OnCompactionStart func()
	OnCompactionEnd   func(CompactionEnd)
}

// CompactionEnd is how an automatic compaction ended (the original's
// onAutoCompactionEnd argument).
type CompactionEnd struct {
	Success      bool
	TokensBefore int // 0 on failure
	WillRetry    bool
	ErrorMessage string
}

// Steerer is the optional part of a PluginContext that steers a session's
// running prompt (the original's ctx.steerSession; the gateway's
// implements it).
type Steerer interface {
	// Steer queues text as a user message for the session's running
	// prompt (of agent; "" means whichever agent has the session): it is
	// taken after the running tool call, skipping the reply's other calls.
	// When no prompt runs it waits for the session's next prompt, or, with
	// runningOnly, is refused (false). False, and nothing done, when no
	// session exists for the key.
	Steer(ctx context.Context, agent, sessionKey, text string, runningOnly bool) (bool, error)
}

// PromptResult is the outcome of a prompt.
type PromptResult struct {
	Text  string // the final answer
	Model string // provider/model that gave it
	Usage llm.Usage
}

// SessionStatus describes a session for a /status command.
type SessionStatus struct {
	Agent      string
	SessionKey string
	Model      string // the model the session uses (pinned, or the agent's primary)
	Pinned     bool   // the model was chosen with SetModel
	Running    bool   // a prompt is running
	File       string // the session file, "" before the first message
	CreatedAt  string
	UpdatedAt  string
}

// Approvals is the optional part of a PluginContext through which a
// channel asks its users about tool calls that wait for approval and
// passes on their answers (the gateway's implements it).
type Approvals interface {
	// SubscribeApprovals calls f for each call that starts or stops
	// waiting, until cancel; f must not block.
	SubscribeApprovals(f func(ApprovalEvent)) (cancel func())
	// AnswerApproval answers the request id: decision "approve", "deny"
	// or "always"; by names who answered, via the channel. An unknown or
	// already answered id is an error.
	AnswerApproval(id, decision, by, via string) error
}

// ApprovalEvent is a call that waits for an answer (Pending), or stopped
// waiting (Outcome says how: "approved by …", "denied by …", "timed out").
type ApprovalEvent struct {
	Pending bool
	ID      string
	Agent   string
	Session string // the session key, "" for a call of no session
	Tool    string
	Args    []string
	Rule    string
	Expires time.Time
	Outcome string
}

// ModelLookup is the optional part of a PluginContext that describes a
// model (the gateway's implements it).
type ModelLookup interface {
	// LookupModel returns the metadata of a model of a configured provider
	// (from the catalogue or llm.providers.<p>.models, else the safe
	// guesses); false for a provider that is not configured.
	LookupModel(provider, modelID string) (llm.Model, bool)
}

// ModelHealth is the optional part of a PluginContext that reads and
// clears the routing's health of a model (the gateway's implements it).
type ModelHealth interface {
	// ModelHealth returns the state recorded for provider/model; false
	// when nothing was recorded.
	ModelHealth(provider, modelID string) (ModelHealthStatus, bool)
	// ClearModelHealth ends the model's cooldown and resets its failures.
	ClearModelHealth(provider, modelID string)
}

// ModelHealthStatus is a model's cooldown and failures.
type ModelHealthStatus struct {
	CoolingDown         bool
	Remaining           time.Duration // of the cooldown; 0 when not cooling down
	LastError           string
	ConsecutiveFailures int
}

// Disposer is the optional part of a PluginContext that drops a session
// from memory (the gateway's implements it).
type Disposer interface {
	// DisposeSession drops every agent's in-memory conversation of the
	// session key, so the next prompt reads it again from its file; a
	// running prompt keeps its own until it ends.
	DisposeSession(sessionKey string)
}

// UsageReader is the optional part of a PluginContext that reads a
// session's most recent token usage (the gateway's implements it).
type UsageReader interface {
	// SessionUsage returns the usage of the session's last assistant reply
	// that did not fail or abort; false when it has none.
	SessionUsage(ctx context.Context, agent, sessionKey string) (llm.Usage, bool, error)
}

// MetadataStore is the optional part of a PluginContext that keeps what
// plugins set on a session in the session's entry, across restarts (the
// gateway's implements it).
type MetadataStore interface {
	// SessionMetadata returns the session's stored metadata; false when
	// the session has no entry yet.
	SessionMetadata(sessionKey string) (map[string]json.RawMessage, bool)
	// SetSessionMetadata stores one key (a nil value removes it); stored
	// is false when the session has no entry yet (before its first
	// message). Oversized names, values or totals are errors.
	SetSessionMetadata(sessionKey, name string, value json.RawMessage) (stored bool, err error)
}

// ToolInvoker is the optional part of a PluginContext that runs a plugin
// tool for a plugin (the original's ctx.invokeTool; the gateway's
// implements it). The call goes through the one tool pipeline as agent's
// call: its policy, approval, audit and hooks, never around them.
type ToolInvoker interface {
	// InvokeTool runs tool with args as agent, in session (whose AgentName
	// is overwritten with agent). An unknown agent is an error; a denied
	// or unknown tool is a failed response (exit code 1 or 127).
	InvokeTool(ctx context.Context, agent, tool string, args []string, session proto.SessionContext) (proto.ToolResponse, error)
}
