package proto

// Session hook names: the {hook} of POST /api/agents/{name}/hooks/{hook}
// (besides pre-prompt and post-response), as httpapi.Hooker.SessionHook gets them.
const (
	HookSessionCreated  = "session-created"
	HookSessionDisposed = "session-disposed"
)

// Hook endpoint bodies, as http-api.md "Hook Endpoints".
type (
	PrePromptRequest struct {
		Message    string `json:"message"`
		SessionKey string `json:"sessionKey,omitempty"`
		Channel    string `json:"channel,omitempty"`
	}
	PrePromptResponse struct {
		Message string  `json:"message"`
		Block   bool    `json:"block"`
		Reason  *string `json:"reason"`
	}
	PostResponseRequest struct {
		Response   string `json:"response"`
		SessionKey string `json:"sessionKey,omitempty"`
		Channel    string `json:"channel,omitempty"`
	}
	PostResponseResponse struct {
		Response string `json:"response"`
		Block    bool   `json:"block"`
	}
	SessionHookRequest struct {
		SessionKey string `json:"sessionKey"`
		Channel    string `json:"channel,omitempty"`
	}
)

// SessionModelRequest is the body of PATCH /api/agents/:name/sessions/:key/model.
type SessionModelRequest struct {
	Provider string `json:"provider"`
	ModelID  string `json:"modelId"`
}

// SessionInfo is one session of GET /api/agents/:name/sessions: the spec's
// fields, then the original Beige's (sessionFile, sessionId, agentName,
// firstMessage), for the scripts written against it.
type SessionInfo struct {
	ID        string `json:"id"` // the session key
	File      string `json:"file"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`

	SessionFile string `json:"sessionFile"` // = File
	SessionID   string `json:"sessionId"`   // the file's name without .jsonl
	AgentName   string `json:"agentName"`
	// FirstMessage is the text of the session's first user message, cut to
	// 100 characters; "(session)" when there is none.
	FirstMessage string `json:"firstMessage"`
}
