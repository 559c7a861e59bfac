package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/testutil"
)

// TestEgressApprovalThroughGateway: a connection of the sandbox that
// approval.egress matches waits until it is answered through the HTTP
// approvals API: approved it goes through, denied the sandbox gets the 403
// that names the approver; both in audit.jsonl with their pending record.
func TestEgressApprovalThroughGateway(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from the host") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	g := startGatewayWith(t, gatewaySetup{
		docker:  true, // the sandbox's connection is the subject
		names:   []string{"ea"},
		sandbox: map[string]string{"ea": `egress: { allow: ["svc.test", "127.0.0.1"] }`},
		extra:   map[string]string{"ea": `approval: { egress: ["svc.test"], timeoutSeconds: 60 },`},
		options: func(o *Options) {
			o.Egress = &egress.Options{Resolver: testutil.Resolver{"svc.test": {netip.MustParseAddr("127.0.0.1")}}}
		},
	})
	ea := g.agents[0]
	// answer answers the first request that waits, as by, through the API.
	answer := func(decision, by string) <-chan string {
		done := make(chan string, 1)
		go func() {
			defer close(done)
			for range 600 {
				resp, err := http.Get(g.URL() + "/api/approvals")
				if err != nil {
					t.Errorf("GET /api/approvals: %v", err)
					return
				}
				var list proto.ApprovalList
				err = json.NewDecoder(resp.Body).Decode(&list)
				resp.Body.Close()
				if err != nil {
					t.Errorf("GET /api/approvals: %v", err)
					return
				}
				if len(list.Approvals) > 0 {
					r := list.Approvals[0]
					resp, err := http.Post(g.URL()+"/api/approvals/"+r.ID, "application/json", strings.NewReader(fmt.Sprintf(`{"decision":%q,"by":%q}`, decision, by)))
					if err != nil {
						t.Errorf("POST: %v", err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Errorf("POST: %d %s", resp.StatusCode, b)
					}
					done <- fmt.Sprintf("%s %s %s %s", r.Agent, r.Tool, strings.Join(r.Args, " "), r.Rule)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Error("no approval request within 30 s")
		}()
		return done
	}
	asked := answer("approve", "ann")
	text, isErr := g.tool(t, ea, "exec", map[string]any{"command": "wget -qO- http://svc.test:" + port + "/"})
	if isErr || !strings.Contains(text, "hello from the host") {
		t.Errorf("approved: %q", text)
	}
	if got, want := <-asked, ea+" egress svc.test:"+port+" GET egress:svc.test"; got != want {
		t.Errorf("request %q, want %q", got, want)
	}
	asked = answer("deny", "bob")
	text, isErr = g.tool(t, ea, "exec", map[string]any{"command": "wget -O- http://svc.test:" + port + "/ 2>&1"})
	if !isErr || !strings.Contains(text, "403") || strings.Contains(text, "hello from the host") {
		t.Errorf("denied: %q", text)
	}
	<-asked

	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Type == audit.TypeNet {
			got = append(got, fmt.Sprintf("%s %s %s %s %s|%s", r.Phase, r.Decision, r.Method, r.Approval, r.ApprovedBy, r.Error))
		}
	}
	want := []string{
		"pending pending GET  |",
		"finished allowed GET approve ann via api|",
		"pending pending GET  |",
		"finished denied GET deny bob via api|svc.test:" + port + " waited for approval (rule egress:svc.test) and was denied by bob via api",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("net records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
