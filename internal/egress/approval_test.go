package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/audit"
)

// answerer answers every pending request of b with decision (none when
// decision is ""), as alice through the API, and counts the requests.
type answerer struct {
	mu   sync.Mutex
	reqs []approval.Request
	outs []approval.Outcome
}

func (a *answerer) requests() []approval.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]approval.Request(nil), a.reqs...)
}

func (a *answerer) outcomes() []approval.Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]approval.Outcome(nil), a.outs...)
}

func newApprover(t *testing.T, rules approval.Rules, decision approval.Decision) (*approval.Broker, *answerer) {
	b := approval.New(approval.Options{Rules: func(agent string) approval.Rules {
		if agent != "a" {
			return approval.Rules{}
		}
		return rules
	}})
	a := &answerer{}
	cancel := b.Subscribe(func(e approval.Event) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if e.Type == approval.EventResolved {
			a.outs = append(a.outs, e.Outcome)
			return
		}
		a.reqs = append(a.reqs, e.Request)
		if decision != "" {
			id := e.Request.ID
			go func() {
				if err := b.Answer(id, approval.Answer{Decision: decision, By: "alice", Via: "api"}); err != nil {
					t.Errorf("answer: %v", err)
				}
			}()
		}
	})
	t.Cleanup(cancel)
	return b, a
}

func TestApproval(t *testing.T) {
	const (
		get = "GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
		// (port 80, whose test server closes at once when the client does)
		connect = "CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n"
	)
	tests := []struct {
		name     string
		allow    []string
		egress   []string
		timeout  time.Duration
		decision approval.Decision
		req      string
		code     int
		body     string // in the answer's body
		asked    []string
		// the finished record
		decided, rule, approval, by string
	}{
		{name: "approve forward", egress: []string{"allowed.test"}, decision: approval.Approve, req: get,
			code: 200, body: "hello GET /x 0", asked: []string{"allowed.test:80", "GET"},
			decided: audit.DecisionAllowed, rule: "*", approval: "approve", by: "alice via api"},
		{name: "approve connect", egress: []string{"*"}, decision: approval.Approve, req: connect,
			code: 200, asked: []string{"allowed.test:80", "CONNECT"},
			decided: audit.DecisionAllowed, rule: "*", approval: "approve", by: "alice via api"},
		{name: "deny connect", egress: []string{"*.test"}, decision: approval.Deny, req: connect,
			code: 403, body: "allowed.test:80 waited for approval (rule egress:*.test) and was denied by alice via api", asked: []string{"allowed.test:80", "CONNECT"},
			decided: audit.DecisionDenied, rule: "egress:*.test", approval: "deny", by: "alice via api"},
		{name: "deny forward", egress: []string{"allowed.test:80"}, decision: approval.Deny, req: get,
			code: 403, body: "denied by alice via api", asked: []string{"allowed.test:80", "GET"},
			decided: audit.DecisionDenied, rule: "egress:allowed.test:80", approval: "deny", by: "alice via api"},
		{name: "timeout", egress: []string{"*"}, timeout: 100 * time.Millisecond, req: connect,
			code: 403, body: "got no answer within 0.1 s", asked: []string{"allowed.test:80", "CONNECT"},
			decided: audit.DecisionDenied, rule: "egress:*", approval: "timeout"},
		{name: "other port not asked", egress: []string{"allowed.test:443"}, decision: approval.Deny, req: get,
			code: 200, body: "hello GET /x 0", decided: audit.DecisionAllowed, rule: "*"},
		{name: "other host not asked", egress: []string{"other.test", "*.allowed.test"}, decision: approval.Deny, req: connect,
			code: 200, decided: audit.DecisionAllowed, rule: "*"},
		{name: "policy refusal not asked", allow: []string{"other.test"}, egress: []string{"*"}, decision: approval.Approve, req: connect,
			code: 403, body: "matches no rule of sandbox.egress.allow", decided: audit.DecisionDenied, rule: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, ans := newApprover(t, approval.Rules{Egress: tc.egress, Timeout: tc.timeout}, tc.decision)
			e := newEnv(t, tc.allow, nil, func(o *Options) { o.Approver = b })
			resp, body := rawReq(t, e, tc.req)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("answer = %d %q, want %d with %q", resp.StatusCode, body, tc.code, tc.body)
			}
			reqs := ans.requests()
			n := 1
			if tc.asked != nil {
				n = 2
				if len(reqs) != 1 || reqs[0].Agent != "a" || reqs[0].Tool != "egress" || reqs[0].Session != "" ||
					strings.Join(reqs[0].Args, " ") != strings.Join(tc.asked, " ") {
					t.Errorf("approval requests = %+v, want one for %q", reqs, tc.asked)
				}
			} else if len(reqs) != 0 {
				t.Errorf("approval requests = %+v, want none", reqs)
			}
			recs := e.audit.wait(t, n)
			if n == 2 {
				p := recs[0]
				if p.Phase != audit.PhasePending || p.Decision != audit.DecisionPending || p.Type != audit.TypeNet ||
					p.Host != "allowed.test" || p.Rule != "egress:"+tc.egress[0] && !strings.HasPrefix(tc.rule, "egress:") {
					t.Errorf("pending record = %+v", p)
				}
			}
			f := recs[n-1]
			if f.Phase != audit.PhaseFinished || f.Decision != tc.decided || f.Rule != tc.rule || f.Approval != tc.approval || f.ApprovedBy != tc.by {
				t.Errorf("finished record = %+v, want decision %q rule %q approval %q by %q", f, tc.decided, tc.rule, tc.approval, tc.by)
			}
			if tc.decided == audit.DecisionDenied && tc.asked != nil && !strings.Contains(f.Error, tc.body) {
				t.Errorf("record error = %q, want %q", f.Error, tc.body)
			}
		})
	}
}

// "always" approves the same agent's later connections to the same
// host:port without asking, whatever the method; another port asks again.
func TestApprovalAlways(t *testing.T) {
	b, ans := newApprover(t, approval.Rules{Egress: []string{"*"}}, approval.Always)
	e := newEnv(t, nil, nil, func(o *Options) { o.Approver = b })
	for i, req := range []string{
		"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n",
		"GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n",
	} {
		if resp, body := rawReq(t, e, req); resp.StatusCode != 200 {
			t.Fatalf("request %d = %d %q", i, resp.StatusCode, body)
		}
	}
	reqs := ans.requests()
	if len(reqs) != 2 || reqs[0].Args[0] != "allowed.test:80" || reqs[1].Args[0] != "allowed.test:443" {
		t.Fatalf("approval requests = %+v, want allowed.test:80 then allowed.test:443", reqs)
	}
	// pending, finished; finished; pending, finished (a tunnel's record
	// is written when it ends)
	var got []string
	for _, r := range e.audit.wait(t, 5) {
		got = append(got, fmt.Sprintf("%s %s %d %s %s", r.Phase, r.Method, r.Port, r.Approval, r.ApprovedBy))
	}
	slices.Sort(got)
	want := []string{
		"finished CONNECT 443 always alice via api", "finished CONNECT 80 always alice via api", "finished GET 80 remembered ",
		"pending CONNECT 443  ", "pending CONNECT 80  ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Another agent's sandbox is not approved by it (its own rules ask).
	if b.Remembered("b", "", "egress:*") {
		t.Error("remembered for another agent")
	}
}

// A sandbox that closes its connection while it waits stops the wait: the
// request ends at once (not at the timeout), and the record says so.
func TestApprovalClientHangsUp(t *testing.T) {
	b, ans := newApprover(t, approval.Rules{Egress: []string{"*"}, Timeout: time.Minute}, "")
	e := newEnv(t, nil, nil, func(o *Options) { o.Approver = b })
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(ans.requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no approval request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := b.Pending("a"); len(got) != 1 {
		t.Fatalf("pending = %+v", got)
	}
	start := time.Now()
	c.Close()
	recs := e.audit.wait(t, 2)
	if time.Since(start) > 2*time.Second {
		t.Errorf("the wait ended %v after the hang-up", time.Since(start))
	}
	f := recs[1]
	if f.Decision != audit.DecisionDenied || f.Approval != "canceled" || !strings.Contains(f.Error, "closed while it waited") {
		t.Errorf("record = %+v", f)
	}
	if got := b.Pending("a"); len(got) != 0 {
		t.Errorf("still pending: %+v", got)
	}
	if o := ans.outcomes(); len(o) != 1 || o[0].Approved {
		t.Errorf("outcomes = %+v", o)
	}
	if d := e.net.dialed(); len(d) != 0 {
		t.Errorf("dialed %v before any approval", d)
	}
}

var _ Approver = (*approval.Broker)(nil)

// rawReq sends one request as written and returns the proxy's answer
// (a CONNECT's 200 has no body).
func rawReq(t *testing.T, e *env, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(req, " ")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read answer to %q: %v", req, err)
	}
	if method == http.MethodConnect && resp.StatusCode == http.StatusOK {
		return resp, "" // the tunnel
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}
