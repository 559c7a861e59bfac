package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/proto"
)

// approvalGateway is the stub gateway with a broker: an exec of "git
// push" waits for an answer, as an ask rule makes the real one do.
type approvalGateway struct {
	*gateway
	b *approval.Broker
}

func (g approvalGateway) Exec(ctx context.Context, a string, req proto.ExecRequest) (proto.ToolResult, error) {
	if strings.Contains(string(req.Params), "git push") {
		o, err := g.b.Wait(ctx, approval.Request{Agent: a, Session: req.SessionKey, Tool: "exec", Args: []string{"git push"}, Rule: "exec:git push*"}, time.Minute)
		if err != nil {
			return proto.ToolResult{}, err
		}
		if !o.Approved {
			return proto.TextResult("Permission denied: tool 'exec' blocked for agent '"+a+"': denied by "+o.Answer.Who(), true), nil
		}
		return proto.TextResult("Exit code: 0\npushed by "+o.Answer.Who(), false), nil
	}
	if strings.Contains(string(req.Params), "wget") {
		// The sandbox's connection asks, with no session.
		o, err := g.b.Wait(ctx, approval.Request{Agent: a, Tool: "egress", Args: []string{"x.org:443", "CONNECT"}, Rule: "egress:*"}, time.Minute)
		if err != nil {
			return proto.TextResult("", true), err
		}
		if !o.Approved {
			return proto.TextResult("Exit code: 1\n403 Forbidden: denied by "+o.Answer.Who(), true), nil
		}
		return proto.TextResult("Exit code: 0\nfetched, approved by "+o.Answer.Who(), false), nil
	}
	return g.gateway.Exec(ctx, a, req)
}

func (g approvalGateway) Approvals(ctx context.Context) []proto.ApprovalRequest {
	var out []proto.ApprovalRequest
	for _, r := range g.b.Pending("") {
		out = append(out, proto.ApprovalRequest{ID: r.ID, Agent: r.Agent, Session: r.Session, Tool: r.Tool, Args: r.Args, Rule: r.Rule})
	}
	return out
}

func (g approvalGateway) AnswerApproval(ctx context.Context, id string, a proto.ApprovalAnswer) error {
	d, err := approval.ParseDecision(a.Decision)
	if err != nil {
		return err
	}
	return g.b.Answer(id, approval.Answer{Decision: d, By: "terminal", Via: a.Via})
}

// TestApprovalPrompt: a tool call of the terminal's session that waits for
// approval is shown with y / n / a; "n" denies it (the model gets the
// refusal), "y" approves the next one.
func TestApprovalPrompt(t *testing.T) {
	b := approval.New(approval.Options{})
	f := newFixtureWith(t, func(gw *gateway) any { return approvalGateway{gw, b} })
	for _, tc := range []struct{ key, want string }{
		{"n", "denied by terminal via tui"},
		{"y", "pushed by terminal via tui"},
	} {
		f.gw.script(call("exec", `{"command":"git push"}`), say("ok "+tc.key))
		f.enter("push it")
		f.waitScreen("approve exec git push?  y = approve · n = deny · a = always for this session")
		f.p.Send(tea.KeyPressMsg{Code: rune(tc.key[0]), Text: tc.key})
		f.waitFor("ok " + tc.key)
		n := f.gw.chatCount()
		last := f.gw.chat(n - 1).Context.Messages
		if tr := last[len(last)-1].ToolResult; tr == nil || !strings.Contains(tr.Text(), tc.want) {
			t.Errorf("%s: the model got %+v, want %q", tc.key, last[len(last)-1], tc.want)
		}
	}
}

// TestApprovalPromptEgress: a connection of the agent's sandbox, which has
// no session, is shown to the agent's terminal while its turn runs.
func TestApprovalPromptEgress(t *testing.T) {
	b := approval.New(approval.Options{})
	f := newFixtureWith(t, func(gw *gateway) any { return approvalGateway{gw, b} })
	f.gw.script(call("exec", `{"command":"wget https://x.org/"}`), say("ok fetched"))
	f.enter("fetch it")
	f.waitScreen("approve egress x.org:443 CONNECT?  y = approve · n = deny · a = always for this host:port")
	f.p.Send(tea.KeyPressMsg{Code: 'y', Text: "y"})
	f.waitFor("ok fetched")
	n := f.gw.chatCount()
	last := f.gw.chat(n - 1).Context.Messages
	if tr := last[len(last)-1].ToolResult; tr == nil || !strings.Contains(tr.Text(), "approved by terminal via tui") {
		t.Errorf("the model got %+v", last[len(last)-1])
	}
}
