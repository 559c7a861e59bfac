package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/policy"
	"github.com/beige-dev/beige/internal/proto"
)

// answerFirst answers the first pending request of b with a, once it is there.
func answerFirst(t *testing.T, b *approval.Broker, a approval.Answer) {
	t.Helper()
	for range 1000 {
		if p := b.Pending(""); len(p) > 0 {
			if err := b.Answer(p[0].ID, a); err != nil {
				t.Error(err)
			}
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Error("no pending request")
}

// An ask rule on exec "git push*": the outcome of each answer, as the
// caller, the tool and the audit log see it.
func TestPipelineApproval(t *testing.T) {
	tests := []struct {
		name    string
		command string
		answer  *approval.Answer // nil: nobody answers
		ran     bool
		records []string // phase/decision/exitCode/approval/approvedBy
		errText string   // of the result and the last record
	}{
		{"no rule matches", "git status", nil, true,
			[]string{"started/allowed/-//", "finished/allowed/0//"}, ""},
		{"approved in the console", "git push origin main", &approval.Answer{Decision: approval.Approve, By: "console", Via: "webui"}, true,
			[]string{"pending/pending/-//", "started/allowed/-/approve/console via webui", "finished/allowed/0/approve/console via webui"}, ""},
		{"denied in telegram", "git push", &approval.Answer{Decision: approval.Deny, By: "@ann", Via: "telegram"}, false,
			[]string{"pending/pending/-//", "finished/denied/1/deny/@ann via telegram"}, "Permission denied: tool 'exec' blocked for agent 'travel': denied by @ann via telegram"},
		{"timeout", "git push", nil, false,
			[]string{"pending/pending/-//", "finished/denied/1/timeout/"}, "Permission denied: tool 'exec' blocked for agent 'travel': no answer within 0.05 s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := approval.New(approval.Options{Rules: func(agent string) approval.Rules {
				if agent != "travel" {
					return approval.Rules{}
				}
				return approval.Rules{Exec: []string{"git push*"}, Timeout: 50 * time.Millisecond}
			}})
			e := newEnv(t, Options{Approvals: b})
			c := coreCall("travel")
			c.Args = []string{tt.command}
			c.Session = proto.SessionContext{SessionKey: "s1", Channel: "webui"}
			if tt.answer != nil {
				go answerFirst(t, b, *tt.answer)
			}
			res, err := e.pipe.Run(context.Background(), c, e.tool())
			if err != nil {
				t.Fatal(err)
			}
			if (e.ran == 1) != tt.ran {
				t.Errorf("ran %d", e.ran)
			}
			var got []string
			recs := e.records(t)
			for _, r := range recs {
				code := "-"
				if r.ExitCode != nil {
					code = string(rune('0' + *r.ExitCode))
				}
				got = append(got, strings.Join([]string{r.Phase, r.Decision, code, r.Approval, r.ApprovedBy}, "/"))
				if r.Tool != "exec" || r.Session != "s1" {
					t.Errorf("record %+v", r)
				}
				if tt.records[0] == "pending/pending/-//" && r.Rule != "exec:git push*" {
					t.Errorf("record without its rule: %+v", r)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.records, " ") {
				t.Errorf("records\n%v\nwant\n%v", got, tt.records)
			}
			if last := recs[len(recs)-1]; last.Error != tt.errText {
				t.Errorf("error %q, want %q", last.Error, tt.errText)
			}
			if tt.errText != "" {
				var de *policy.DeniedError
				if !res.Denied() || res.ExitCode != 1 || !res.IsError || res.Content[0].Text != tt.errText || res.Stderr != tt.errText || !errors.As(res.Err, &de) {
					t.Errorf("denied result %+v", res)
				}
				if len(e.hooks.pre) != 0 {
					t.Errorf("hooks saw a call that was not approved: %v", e.hooks.pre)
				}
			} else if res.Denied() || res.Output != "out" {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// "always" stops asking for the rule in that session only; a call that
// cannot be attributed to a session is asked every time.
func TestPipelineApprovalAlways(t *testing.T) {
	b := approval.New(approval.Options{Rules: func(string) approval.Rules {
		return approval.Rules{Exec: []string{"git push*"}, Timeout: 50 * time.Millisecond}
	}})
	e := newEnv(t, Options{Approvals: b})
	call := func(session string, unattributed bool) Call {
		c := coreCall("travel")
		c.Args = []string{"git push"}
		c.Session = proto.SessionContext{SessionKey: session}
		c.Unattributed = unattributed
		return c
	}
	go answerFirst(t, b, approval.Answer{Decision: approval.Always, By: "bob", Via: "tui"})
	if res, err := e.pipe.Run(context.Background(), call("s1", false), e.tool()); err != nil || res.Denied() {
		t.Fatalf("first call: %+v %v", res, err)
	}
	// The same session: no question, no pending record.
	if res, err := e.pipe.Run(context.Background(), call("s1", false), e.tool()); err != nil || res.Denied() {
		t.Fatalf("second call: %+v %v", res, err)
	}
	// Another session, and an unattributed call claiming s1: asked again
	// (nobody answers: denied after the timeout).
	for _, c := range []Call{call("s2", false), call("s1", true)} {
		if res, _ := e.pipe.Run(context.Background(), c, e.tool()); !res.Denied() {
			t.Errorf("session %q unattributed=%v was not asked", c.Session.SessionKey, c.Unattributed)
		}
	}
	if e.ran != 2 {
		t.Errorf("ran %d, want 2", e.ran)
	}
	var got []string
	for _, r := range e.records(t) {
		got = append(got, r.Phase+"/"+r.Approval)
	}
	want := "pending/ started/always finished/always started/remembered finished/remembered pending/ finished/timeout pending/ finished/timeout"
	if strings.Join(got, " ") != want {
		t.Errorf("records %v\nwant %s", got, want)
	}
}

// A call whose context ends while it waits is not run; its finished record
// says so.
func TestPipelineApprovalCanceled(t *testing.T) {
	b := approval.New(approval.Options{Rules: func(string) approval.Rules { return approval.Rules{Tools: []string{"git"}} }})
	e := newEnv(t, Options{Approvals: b})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(b.Pending("")) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err := e.pipe.Run(ctx, pluginCall("travel", "git"), e.tool())
	if !errors.Is(err, context.Canceled) || e.ran != 0 {
		t.Fatalf("err %v, ran %d", err, e.ran)
	}
	recs := e.records(t)
	if len(recs) != 2 || recs[1].Decision != audit.DecisionDenied || recs[1].Approval != "canceled" {
		t.Errorf("records %+v", recs)
	}
}
