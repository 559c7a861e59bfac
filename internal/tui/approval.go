package tui

import (
	"context"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/proto"
)

// While a turn runs tools, the terminal asks the gateway every
// approvalPoll which calls wait for approval; one of this agent and session
// is shown in place of the activity, and y / n / a (with an empty input)
// answers it: approve, deny, always for this session. The first answer on
// any channel wins.
const approvalPoll = 300 * time.Millisecond

type (
	approvalPollMsg struct{ turn int }
	approvalsMsg    struct {
		turn int
		list []proto.ApprovalRequest
	}
	approvalAnsweredMsg struct {
		decision string
		err      error
	}
)

// pollApprovals starts the polling of the running turn, once; the chain
// of an earlier turn ends by itself.
func (m *model) pollApprovals() tea.Cmd {
	if m.pollTurn == m.turn || !m.running {
		return nil
	}
	m.pollTurn = m.turn
	turn := m.turn
	return tea.Tick(approvalPoll, func(time.Time) tea.Msg { return approvalPollMsg{turn} })
}

func (m *model) onApprovalPoll(msg approvalPollMsg) tea.Cmd {
	if msg.turn != m.turn {
		return nil
	}
	if !m.running {
		m.approval = nil
		return nil
	}
	c := m.env.back.c
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		list, _ := c.Approvals(ctx) // a gateway without approvals: none
		return approvalsMsg{turn: msg.turn, list: list}
	}
}

func (m *model) onApprovals(msg approvalsMsg) tea.Cmd {
	if msg.turn != m.turn {
		return nil
	}
	m.approval = nil
	if !m.running {
		m.refreshLive()
		return nil
	}
	for i, a := range msg.list {
		// A connection of the agent's sandbox through the egress proxy
		// belongs to no session: every terminal of that agent is asked.
		if a.Agent == m.ag.name() && (a.Session == m.key || a.Session == "" && a.Tool == approval.EgressTool) {
			m.approval = &msg.list[i]
			break
		}
	}
	m.refreshLive()
	turn := m.turn
	return tea.Tick(approvalPoll, func(time.Time) tea.Msg { return approvalPollMsg{turn} })
}

// approvalKeys are the answers to the shown request.
var approvalKeys = map[string]string{"y": "approve", "n": "deny", "a": "always"}

// answerApproval answers the shown request with key, if it is an answer.
func (m *model) answerApproval(key string) (tea.Cmd, bool) {
	decision, ok := approvalKeys[key]
	if !ok || m.approval == nil || m.input.Value() != "" {
		return nil, false
	}
	id, c := m.approval.ID, m.env.back.c
	m.approval = nil
	m.refreshLive()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return approvalAnsweredMsg{decision: decision, err: c.AnswerApproval(ctx, id, decision, "tui")}
	}, true
}

func (m *model) onApprovalAnswered(msg approvalAnsweredMsg) tea.Cmd {
	if msg.err != nil {
		m.notice = "approval: " + msg.err.Error()
	} else {
		m.notice = map[string]string{"approve": "approved", "deny": "denied", "always": "approved for this session"}[msg.decision]
	}
	return nil
}

// approvalLine is what the live area shows for the shown request.
func (m *model) approvalLine() string {
	a := m.approval
	call := strings.Join(append([]string{a.Tool}, a.Args...), " ")
	always := "always for this session"
	if a.Tool == approval.EgressTool {
		always = "always for this host:port"
	}
	return "approve " + liveTail(call) + "?  y = approve · n = deny · a = " + always
}
