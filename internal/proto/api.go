package proto

import (
	"encoding/json"
	"fmt"
)

// Error is an error whose message is safe to show an API client, with the
// HTTP status it maps to. Errors of any other type are internal (500).
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Errorf returns a client-visible error with an HTTP status.
func Errorf(status int, format string, args ...any) error {
	return &Error{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// ExecRequest is the body of POST /api/agents/:name/exec.
type ExecRequest struct {
	Tool       string          `json:"tool"`
	Params     json.RawMessage `json:"params"`
	SessionKey string          `json:"sessionKey,omitempty"`
	// ActiveModel is the model the client is talking to, which asked for
	// the call (pi-based clients send it with every call); it is recorded
	// as the audit record's model, "provider/modelId", as the client says.
	// When it is one of the agent's models, read returns images only if
	// that model takes them.
	ActiveModel *ActiveModel `json:"activeModel,omitempty"`
}

// ActiveModel names the model of an exec call: {provider, modelId}.
type ActiveModel struct {
	Provider string `json:"provider"`
	ModelID  string `json:"modelId"`
}

// String returns "provider/modelId", or "" when either part is missing.
func (m *ActiveModel) String() string {
	if m == nil || m.Provider == "" || m.ModelID == "" {
		return ""
	}
	return m.Provider + "/" + m.ModelID
}

// Health is the body of GET /api/health. Status is "ok" when every agent's
// sandbox is ready, "starting" while they are being prepared, and
// "degraded" when some agent is unavailable (Agents says why), a plugin
// cannot run (Plugins says why) or the disk is low.
type Health struct {
	Status string            `json:"status"`
	Agents map[string]string `json:"agents,omitempty"` // agent -> problem, only for agents that are not ready
	// Plugins are the plugins that cannot run now (plugin -> why): a
	// TypeScript/JavaScript plugin with no Node.js or no jail, or whose
	// host crashed or fails to load and is retried with backoff.
	Plugins map[string]string `json:"plugins,omitempty"`
	Config  string            `json:"config,omitempty"` // why the last config reload was refused
	Disk    string            `json:"disk,omitempty"`   // "disk full/low: N MB free on <fs>" when $BEIGE_HOME's disk is
	// Stats are the headline figures, from the counters of GET /metrics.
	Stats *HealthStats `json:"stats,omitempty"`
}

// HealthStats are the headline figures of GET /api/health (and `beige
// gateway status`), counted since the gateway process started.
type HealthStats struct {
	ToolCalls  int64 `json:"toolCalls"`  // tool calls, core and plugin tools
	ToolErrors int64 `json:"toolErrors"` // of them, those that failed or were denied
	Cooldowns  int   `json:"cooldowns"`  // models in a rate-limit cooldown now
	// AuditHead is the sequence number of the audit chain's last record;
	// absent when the gateway does not know it.
	AuditHead *int64 `json:"auditHead,omitempty"`
}

// ModelRef names a model of a configured provider.
type ModelRef struct {
	Provider      string `json:"provider"`
	Model         string `json:"model"`
	ThinkingLevel string `json:"thinkingLevel,omitempty"`
}

// AgentInfo is one entry of GET /api/agents.
type AgentInfo struct {
	Name           string     `json:"name"`
	Model          ModelRef   `json:"model"`
	FallbackModels []ModelRef `json:"fallbackModels"`
	Tools          []string   `json:"tools"`
	Skills         []string   `json:"skills"`
	WorkspaceDir   string     `json:"workspaceDir"`
	ToolContext    string     `json:"toolContext"`
	SkillContext   string     `json:"skillContext"`
}

// AgentList is the body of GET /api/agents.
type AgentList struct {
	Agents []AgentInfo `json:"agents"`
}

// ConfigView is the body of GET /api/config: the agents and the providers'
// metadata, never a key or token.
type ConfigView struct {
	Agents map[string]AgentConfigView `json:"agents"`
	LLM    struct {
		Providers map[string]ProviderView `json:"providers"`
	} `json:"llm"`
}

// AgentConfigView is one agent in GET /api/config.
type AgentConfigView struct {
	Model          ModelRef   `json:"model"`
	FallbackModels []ModelRef `json:"fallbackModels"`
	Tools          []string   `json:"tools"`
	Skills         []string   `json:"skills"`
	WorkspaceDir   string     `json:"workspaceDir"`
}

// ProviderView is one provider in GET /api/config. Nil fields are null.
type ProviderView struct {
	BaseURL     *string `json:"baseUrl"`
	API         *string `json:"api"`
	Concurrency int     `json:"concurrency"`
}

// PromptRequest is the body of POST /api/agents/:name/prompt.
type PromptRequest struct {
	Message    string `json:"message"`
	SessionKey string `json:"sessionKey,omitempty"`
}

// PromptResponse is its answer.
type PromptResponse struct {
	Response string `json:"response"`
}
