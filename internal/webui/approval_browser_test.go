package webui_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestBrowserApproval: an ask rule on exec "git push*". The call waits and
// the console shows a banner; Approve lets it run, Deny refuses it with
// the reason, and the audit log names the console as the approver.
func TestBrowserApproval(t *testing.T) {
	pa := llmtest.NewAnthropic(t)
	g := startGateway(t,
		fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka" }`, pa.URL()),
		map[string]string{"worker": `model: { provider: 'pa', model: 'model-a' }, approval: { exec: ["git push*"] }`},
		[]string{"worker"})
	// The browser after the gateway: its cleanups (the console check,
	// closing the tab) run before the gateway shuts down under the page.
	b := newBrowser(t)
	worker := g.agents[0]
	b.login(g.URL())

	for _, tc := range []struct {
		button, want string
	}{
		{"approve", "pushed"},
		{"deny", "Permission denied: tool 'exec' blocked for agent '" + worker + "': denied by console via webui"},
	} {
		type res struct {
			code int
			body string
		}
		done := make(chan res, 1)
		go func() {
			code, body := g.api(t, "POST", "/api/agents/"+worker+"/exec", `{"tool":"exec","params":{"command":"git push || echo pushed"}}`)
			done <- res{code, body}
		}()
		b.waitFor("the approval banner", `document.querySelector('#approvals:not([hidden]) .approval-call')?.textContent === "exec git push || echo pushed"`, 30*time.Second)
		select {
		case r := <-done:
			t.Fatalf("the call did not wait: %d %s", r.code, r.body)
		default:
		}
		b.screenshot("approval-" + tc.button)
		b.eval(`(document.querySelector('#approvals .approval-`+tc.button+`').click(), 1)`, nil)
		var r res
		select {
		case r = <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the call still waits after the answer")
		}
		if r.code != 200 || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s, want %q", tc.button, r.code, r.body, tc.want)
		}
		b.waitFor("the banner gone", `document.getElementById("approvals").hidden`, 5*time.Second)
	}

	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Tool == "exec" {
			got = append(got, r.Phase+"/"+r.Decision+"/"+r.Approval+"/"+r.ApprovedBy)
		}
	}
	want := "pending/pending// started/allowed/approve/console via webui finished/allowed/approve/console via webui pending/pending// finished/denied/deny/console via webui"
	if strings.Join(got, " ") != want {
		t.Errorf("audit records\n%v\nwant\n%s", got, want)
	}
}
