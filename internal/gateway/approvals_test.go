package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/proto"
)

// TestApprovalsAPI: GET /api/approvals lists the waiting call, POST
// /api/approvals/{id} answers it behind the API's token; the first answer
// wins and later ones are 404.
func TestApprovalsAPI(t *testing.T) {
	cfg := &config.Config{Agents: map[string]*config.Agent{"travel": {Approval: config.Approval{Exec: []string{"git push*"}}}}}
	g := &Gateway{approvals: newApprovals(cfg, slog.New(slog.DiscardHandler))}
	srv := httpapi.New(g, httpapi.Options{Host: "127.0.0.1", AuthToken: "tok"})
	do := func(method, path, body, token string) (int, string) {
		req := httptest.NewRequest(method, "http://127.0.0.1:7433"+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}

	rule, timeout, ok := g.approvals.Rule("travel", "exec", []string{"git push origin"})
	if !ok || timeout != 300*time.Second {
		t.Fatalf("rule %q %v %v", rule, timeout, ok)
	}
	done := make(chan approval.Outcome, 1)
	go func() {
		o, _ := g.approvals.Wait(context.Background(), approval.Request{Agent: "travel", Session: "s1", Tool: "exec", Args: []string{"git push origin"}, Rule: rule}, timeout)
		done <- o
	}()
	var list proto.ApprovalList
	for range 500 {
		code, body := do("GET", "/api/approvals", "", "tok")
		if code != 200 {
			t.Fatalf("GET: %d %s", code, body)
		}
		list = proto.ApprovalList{}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Approvals) > 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if len(list.Approvals) != 1 || list.Approvals[0].Tool != "exec" || list.Approvals[0].Args[0] != "git push origin" || list.Approvals[0].Rule != "exec:git push*" {
		t.Fatalf("list %+v", list)
	}
	id := list.Approvals[0].ID
	for _, tc := range []struct {
		body, token string
		status      int
		want        string
	}{
		{`{"decision":"approve"}`, "", http.StatusUnauthorized, ""},
		{`{"decision":"approve"}`, "wrong", http.StatusUnauthorized, ""},
		{`{"decision":"maybe"}`, "tok", http.StatusBadRequest, `unknown decision \"maybe\"`},
		{`{"decision":"approve","via":"telegram"}`, "tok", http.StatusBadRequest, `unknown via \"telegram\"`},
		{`{"decision":"approve","extra":1}`, "tok", http.StatusBadRequest, "unknown field"},
		{`{"decision":"approve","via":"webui","by":"ann\u0007"}`, "tok", http.StatusOK, `"decision":"approve"`},
		{`{"decision":"deny"}`, "tok", http.StatusNotFound, "no such pending approval request"},
	} {
		code, body := do("POST", "/api/approvals/"+id, tc.body, tc.token)
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s (token %q): %d %s", tc.body, tc.token, code, body)
		}
	}
	o := <-done
	if !o.Approved || o.Answer.Who() != "ann via webui" {
		t.Errorf("outcome %+v", o)
	}
	if code, _ := do("GET", "/api/approvals", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET without token: %d", code)
	}
}

// TestApprovalOutcomeText: what the channels are told when a request ends.
func TestApprovalOutcomeText(t *testing.T) {
	for _, tc := range []struct {
		o    approval.Outcome
		want string
	}{
		{approval.Outcome{TimedOut: true}, "denied: no answer in time"},
		{approval.Outcome{Approved: true, Answer: approval.Answer{Decision: approval.Approve, By: "ann", Via: "webui"}}, "approved by ann via webui"},
		{approval.Outcome{Approved: true, Answer: approval.Answer{Decision: approval.Always, By: "@bob", Via: "telegram"}}, "approved for this session by @bob via telegram"},
		{approval.Outcome{Answer: approval.Answer{Decision: approval.Deny, By: "@bob", Via: "telegram"}}, "denied by @bob via telegram"},
		{approval.Outcome{}, "no longer waiting (the call was cancelled)"},
	} {
		if got := outcomeText(tc.o); got != tc.want {
			t.Errorf("outcomeText(%+v) = %q, want %q", tc.o, got, tc.want)
		}
	}
	for in, want := range map[string]string{"": "def", "  ann\x1b[31m ": "ann[31m", strings.Repeat("é", 40): strings.Repeat("é", 32)} {
		if got := approverName(in, "def"); got != want {
			t.Errorf("approverName(%q) = %q, want %q", in, got, want)
		}
	}
}
