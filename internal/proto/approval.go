package proto

import "time"

// ApprovalRequest is a tool call that waits for a human's answer (GET
// /api/approvals).
type ApprovalRequest struct {
	ID      string    `json:"id"`
	Agent   string    `json:"agent"`
	Session string    `json:"session,omitempty"`
	Channel string    `json:"channel,omitempty"`
	Tool    string    `json:"tool"`
	Args    []string  `json:"args"`
	Rule    string    `json:"rule"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// ApprovalList is the body of GET /api/approvals.
type ApprovalList struct {
	Approvals []ApprovalRequest `json:"approvals"`
}

// ApprovalAnswer is the body of POST /api/approvals/:id. Decision is
// "approve", "deny" or "always" (approve, and stop asking for this rule in
// this session). Via is the client ("webui", "tui"; default "api") and By
// an optional name for the audit log: both are the token holder's own
// word.
type ApprovalAnswer struct {
	Decision string `json:"decision"`
	Via      string `json:"via,omitempty"`
	By       string `json:"by,omitempty"`
}
