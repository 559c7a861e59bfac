package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

var _ httpapi.Approver = (*Gateway)(nil)

// newApprovals returns the broker of cfg's ask rules (agents.<a>.approval).
func newApprovals(cfg *config.Config, log *slog.Logger) *approval.Broker {
	rules := map[string]approval.Rules{}
	for name, a := range cfg.Agents {
		if a.Approval.Empty() {
			continue
		}
		rules[name] = approval.Rules{Exec: a.Approval.Exec, Tools: a.Approval.Tools, Egress: a.Approval.Egress, Timeout: a.Approval.Timeout()}
		log.Info("tool calls of this agent wait for approval", "agent", name, "exec", a.Approval.Exec, "tools", a.Approval.Tools, "egress", a.Approval.Egress, "timeout", a.Approval.Timeout())
	}
	return approval.New(approval.Options{
		Rules:  func(agent string) approval.Rules { return rules[agent] },
		Logger: log.With("component", "approvals"),
	})
}

func approvalRequest(r approval.Request) proto.ApprovalRequest {
	return proto.ApprovalRequest{ID: r.ID, Agent: r.Agent, Session: r.Session, Channel: r.Channel, Tool: r.Tool, Args: r.Args, Rule: r.Rule, Created: r.Created, Expires: r.Expires}
}

// Approvals lists the calls that wait for an answer (GET /api/approvals).
func (g *Gateway) Approvals(ctx context.Context) []proto.ApprovalRequest {
	var out []proto.ApprovalRequest
	for _, r := range g.approvals.Pending("") {
		out = append(out, approvalRequest(r))
	}
	return out
}

// maxApprover bounds the name an answer gives for its approver.
const maxApprover = 64

// approverName is by as the audit log shows it: printable, bounded, or def.
func approverName(by, def string) string {
	by = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, strings.TrimSpace(by))
	if by == "" {
		return def
	}
	if len(by) > maxApprover {
		n := maxApprover
		for n > 0 && !utf8.RuneStart(by[n]) {
			n--
		}
		by = by[:n]
	}
	return by
}

// AnswerApproval answers a pending call (POST /api/approvals/:id). Every
// answer through the API is the token holder's; Via and By only label it.
func (g *Gateway) AnswerApproval(ctx context.Context, id string, a proto.ApprovalAnswer) error {
	d, err := approval.ParseDecision(a.Decision)
	if err != nil {
		return proto.Errorf(http.StatusBadRequest, "%v", err)
	}
	via := a.Via
	switch via {
	case "":
		via = "api"
	case "api", "webui", "tui":
	default:
		return proto.Errorf(http.StatusBadRequest, "unknown via %q (want api, webui or tui)", a.Via)
	}
	err = g.approvals.Answer(id, approval.Answer{Decision: d, By: approverName(a.By, "token holder"), Via: via})
	if errors.Is(err, approval.ErrNotPending) {
		return proto.Errorf(http.StatusNotFound, "%v", err)
	}
	return err
}

// consoleApprovals is the broker as the web console sees it.
type consoleApprovals struct{ g *Gateway }

func (c consoleApprovals) Pending() []proto.ApprovalRequest {
	return c.g.Approvals(context.Background())
}
func (c consoleApprovals) Changed() <-chan struct{} { return c.g.approvals.Changed() }

var _ plugin.Approvals = (*pluginContext)(nil)

// SubscribeApprovals implements plugin.Approvals.
func (pc *pluginContext) SubscribeApprovals(f func(plugin.ApprovalEvent)) func() {
	return pc.g.approvals.Subscribe(func(e approval.Event) {
		ev := plugin.ApprovalEvent{
			Pending: e.Type == approval.EventPending, ID: e.Request.ID, Agent: e.Request.Agent, Session: e.Request.Session,
			Tool: e.Request.Tool, Args: e.Request.Args, Rule: e.Request.Rule, Expires: e.Request.Expires,
		}
		if !ev.Pending {
			ev.Outcome = outcomeText(e.Outcome)
			if e.Request.Tool == approval.EgressTool && e.Outcome.Approved && e.Outcome.Answer.Decision == approval.Always {
				ev.Outcome = "approved for this host:port by " + e.Outcome.Answer.Who()
			}
		}
		f(ev)
	})
}

// outcomeText says how a request ended, for the channels.
func outcomeText(o approval.Outcome) string {
	switch {
	case o.TimedOut:
		return "denied: no answer in time"
	case o.Approved && o.Answer.Decision == approval.Always:
		return "approved for this session by " + o.Answer.Who()
	case o.Approved:
		return "approved by " + o.Answer.Who()
	case o.Answer.Decision == approval.Deny:
		return "denied by " + o.Answer.Who()
	}
	return "no longer waiting (the call was cancelled)"
}

// AnswerApproval implements plugin.Approvals.
func (pc *pluginContext) AnswerApproval(id, decision, by, via string) error {
	d, err := approval.ParseDecision(decision)
	if err != nil {
		return err
	}
	return pc.g.approvals.Answer(id, approval.Answer{Decision: d, By: approverName(by, "someone"), Via: approverName(via, "channel")})
}
