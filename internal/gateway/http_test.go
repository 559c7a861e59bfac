package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestShutdownDoesNotWaitForSlowClient is #13.8 through the gateway: a
// request whose body never finishes must not stretch SIGTERM (on main it
// took the 10 s drain plus 2 s).
func TestShutdownDoesNotWaitForSlowClient(t *testing.T) {
	g := startGateway(t, "slow")
	c, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /api/agents/"+g.agents[0]+"/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"mess")
	time.Sleep(300 * time.Millisecond) // the handler is reading the body
	start := time.Now()
	g.Shutdown(context.Background())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v with a slow client connected", d)
	}
}

// TestCrossSiteRefusedByGateway: the gateway serves the API behind the
// browser guard (#10.2).
func TestCrossSiteRefusedByGateway(t *testing.T) {
	g := startGateway(t, "csrf")
	req, _ := http.NewRequest("POST", g.URL()+"/api/agents/"+g.agents[0]+"/exec", strings.NewReader(`{"tool":"exec","params":{"command":"touch /workspace/pwned"}}`))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("%s, want 403", resp.Status)
	}
}

// TestNoBaseURLSecretsInAPI is #10.10 through the gateway: /api/config and
// /models show scheme://host/path of a baseUrl, never its user:password or
// ?key=.
func TestNoBaseURLSecretsInAPI(t *testing.T) {
	g := startGatewayWith(t, gatewaySetup{names: []string{"leak"}, providers: "anthropic: { apiKey: 'k', baseUrl: 'https://alice:hunter2@proxy.example/v1?key=AIzaSECRET' }"})
	for _, path := range []string{"/api/config", "/api/agents/" + g.agents[0] + "/models"} {
		resp, err := http.Get(g.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, secret := range []string{"alice", "hunter2", "AIzaSECRET"} {
			if strings.Contains(string(body), secret) {
				t.Errorf("%s shows %q: %s", path, secret, body)
			}
		}
		if !strings.Contains(string(body), "https://proxy.example/v1") {
			t.Errorf("%s: no baseUrl: %s", path, body)
		}
	}
}
