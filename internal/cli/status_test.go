package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
)

// TestGatewayStatusHeadline: `beige gateway status` prints the headline
// figures the gateway's /api/health carries (from its metrics).
func TestGatewayStatusHeadline(t *testing.T) {
	withHome(t)
	if code, _, errOut := run(t, "setup"); code != 0 {
		t.Fatal(errOut)
	}
	startLockHolder(t)
	head := int64(41)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/health":
			json.NewEncoder(w).Encode(proto.Health{Status: "ok", Stats: &proto.HealthStats{ToolCalls: 12, ToolErrors: 3, Cooldowns: 1, AuditHead: &head}})
		case "/api/agents":
			json.NewEncoder(w).Encode(proto.AgentList{})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	code, out, errOut := run(t, "-g", srv.URL, "gateway", "status")
	if code != 0 {
		t.Fatalf("status: %d %s %s", code, out, errOut)
	}
	if want := "stats:   12 tool calls, 3 errors, 1 models cooling down, audit head 41\n"; !strings.Contains(out, want) {
		t.Errorf("status output lacks %q:\n%s", want, out)
	}
}

func TestHeadlineUnknownAuditHead(t *testing.T) {
	if got := headline(&proto.HealthStats{ToolCalls: 1}); got != "1 tool calls, 0 errors, 0 models cooling down, audit head unknown" {
		t.Errorf("headline = %q", got)
	}
}

// TestGatewayStatusNamesPluginsThatCannotRun: `beige gateway status` lists
// the plugins /api/health names, with why, and exits 1 (degraded).
func TestGatewayStatusNamesPluginsThatCannotRun(t *testing.T) {
	withHome(t)
	if code, _, errOut := run(t, "setup"); code != 0 {
		t.Fatal(errOut)
	}
	startLockHolder(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/health":
			json.NewEncoder(w).Encode(proto.Health{Status: "degraded", Plugins: map[string]string{"echo": "plugin echo is restarting: no plugin jail available: user namespaces disabled"}})
		case "/api/agents":
			json.NewEncoder(w).Encode(proto.AgentList{})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	code, out, _ := run(t, "-g", srv.URL, "gateway", "status")
	if code != ExitFailure || !strings.Contains(out, "health:  degraded\n") ||
		!strings.Contains(out, "plugins that cannot run:\n  echo             is restarting: no plugin jail available: user namespaces disabled\n") {
		t.Errorf("status: %d\n%s", code, out)
	}
}
