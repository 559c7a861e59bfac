package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// Status is the Agents and health view: the gateway's health, each agent's
// sandbox and tools, each model's routing health.
type Status struct {
	Health    proto.Health     `json:"health"`
	Agents    []AgentStatus    `json:"agents"`
	Providers []ProviderStatus `json:"providers"`
}

// AgentStatus is one agent in the Agents and health view.
type AgentStatus struct {
	Name    string   `json:"name"`
	Model   string   `json:"model"`
	Models  []string `json:"models,omitempty"` // primary, then fallbacks: provider/model
	Tools   []string `json:"tools"`
	Skills  []string `json:"skills"`
	Image   string   `json:"image,omitempty"`
	State   string   `json:"state"` // "ready" or the problem
	Network string   `json:"network,omitempty"`
	// Limits are the sandbox's resource limits, as configured ("memory":
	// "512m", …).
	Limits map[string]string `json:"limits,omitempty"`
}

// ProviderStatus is one model's routing health (provider/model).
type ProviderStatus struct {
	Key string `json:"key"`
	// CooldownUntil is set while the model is in a rate-limit cooldown.
	CooldownUntil *time.Time `json:"cooldownUntil,omitempty"`
	Failures      int        `json:"consecutiveFailures"`
	LastError     string     `json:"lastError,omitempty"`
	// InUse and Waiting are the provider's concurrency slots taken and
	// the calls queued for one.
	InUse   int `json:"inUse"`
	Waiting int `json:"queueDepth"`
}

// backlogRecords is how many of the last audit records a new Activity view
// gets; readMax bounds one read of new ones.
const (
	backlogRecords = 200
	readMax        = 1000
)

// events is GET /ui/events: Server-Sent Events. "audit" events carry one
// audit record each (as written); "status" events the Status, sent at the
// start and whenever it changed; "now" the server's time with each
// status, so that the page counts cooldowns down from the server's clock;
// "approvals" the calls that wait for an answer ({"approvals": [...]}), at
// the start and whenever the list changes.
func (u *UI) events(w http.ResponseWriter, r *http.Request) {
	headers(w)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	// A write that cannot go out (a client that stopped reading) must not
	// hold the handler forever.
	send := func(event string, data []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		var b bytes.Buffer
		fmt.Fprintf(&b, "event: %s\n", event)
		for line := range bytes.Lines(data) {
			b.WriteString("data: ")
			b.Write(bytes.TrimRight(line, "\n"))
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := send("hello", []byte(`{}`)); err != nil {
		return
	}

	var lastStatus []byte
	sendStatus := func() error {
		if u.opts.Status == nil {
			return nil
		}
		b, err := u.statusSnapshot(ctx)
		if err != nil || bytes.Equal(b, lastStatus) {
			return err
		}
		lastStatus = b
		msg, _ := json.Marshal(struct {
			Now    time.Time       `json:"now"`
			Status json.RawMessage `json:"status"`
		}{time.Now(), b})
		return send("status", msg)
	}
	var cur Cursor
	sendAudit := func() error {
		if u.opts.Audit == nil {
			return nil
		}
		max := readMax
		if !cur.set {
			max = backlogRecords
		}
		recs, next, err := u.opts.Audit.Read(cur, max)
		if err != nil {
			u.log.Warn("console: read the audit log", "err", err)
			return nil
		}
		cur = next
		for _, rec := range recs {
			if err := send("audit", rec); err != nil {
				return err
			}
		}
		return nil
	}

	var approvalsChanged <-chan struct{}
	sendApprovals := func() error {
		if u.opts.Approvals == nil {
			return nil
		}
		approvalsChanged = u.opts.Approvals.Changed() // before reading, as for the audit log
		list := u.opts.Approvals.Pending()
		if list == nil {
			list = []proto.ApprovalRequest{}
		}
		b, err := json.Marshal(proto.ApprovalList{Approvals: list})
		if err != nil {
			return err
		}
		return send("approvals", b)
	}
	if sendStatus() != nil || sendApprovals() != nil {
		return
	}
	var changed <-chan struct{}
	if u.opts.Audit != nil {
		changed = u.opts.Audit.Changed()
	}
	if sendAudit() != nil {
		return
	}
	tick := time.NewTicker(u.opts.StatusEvery)
	defer tick.Stop()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.done:
			return
		case <-changed:
			changed = u.opts.Audit.Changed() // before reading: a record written during the read is not missed
			if sendAudit() != nil || sendStatus() != nil {
				return
			}
		case <-approvalsChanged:
			if sendApprovals() != nil {
				return
			}
		case <-tick.C:
			if sendStatus() != nil {
				return
			}
			if u.opts.Audit != nil && sendAudit() != nil { // a record whose notification we lack (another writer)
				return
			}
		case <-keepalive.C:
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// statusSnapshot returns the health snapshot as JSON, taking a new one when
// the last is older than half of StatusEvery.
func (u *UI) statusSnapshot(ctx context.Context) ([]byte, error) {
	u.statusMu.Lock()
	defer u.statusMu.Unlock()
	if u.statusJSON != nil && time.Since(u.statusAt) < u.opts.StatusEvery/2 {
		return u.statusJSON, nil
	}
	b, err := json.Marshal(u.opts.Status(ctx))
	if err != nil {
		return nil, fmt.Errorf("encode the health snapshot: %w", err)
	}
	u.statusJSON, u.statusAt = b, time.Now()
	return b, nil
}
