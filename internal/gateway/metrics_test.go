package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/metrics/metricstest"
	"github.com/beige-dev/beige/internal/proto"
)

// getMetrics fetches url (a /metrics endpoint) with token, if any.
func getMetrics(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsAfterScriptedRun: after a scripted run (one prompt whose
// model asks for one exec, then answers; two exec calls over the API; one
// request with a wrong token), GET /metrics, on the API and on
// gateway.metrics.listen, shows exactly that run's counts, and promtool
// accepts the exposition.
func TestMetricsAfterScriptedRun(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": "true"}).WithUsage(100, 20), llmtest.Text("done").WithUsage(130, 7))
	const token = "metrics-test-token-0123"
	g := startGatewayWith(t, gatewaySetup{
		names:     []string{"metrics"},
		providers: fmt.Sprintf("scripted: { api: 'anthropic-messages', baseUrl: %q, apiKey: 'k' }", srv.URL()),
		model:     "{ provider: 'scripted', model: 'test-model' }",
		options: func(o *Options) {
			o.Config.Gateway.AuthToken = token
			o.Config.Gateway.Metrics.Listen = "127.0.0.1:0"
		},
	})
	a := g.agents[0]
	do := func(path, body string) int {
		req, _ := http.NewRequest("POST", g.URL()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do("/api/agents/"+a+"/prompt", `{"message":"run true"}`); code != 200 {
		t.Fatalf("prompt: %d", code)
	}
	for range 2 {
		if code := do("/api/agents/"+a+"/exec", `{"tool":"exec","params":{"command":"true"}}`); code != 200 {
			t.Fatalf("exec: %d", code)
		}
	}
	if code, _ := getMetrics(t, g.URL()+"/metrics", "wrong"); code != 401 {
		t.Fatalf("/metrics with a wrong token: %d, want 401", code)
	}
	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{g.URL() + "/metrics", "http://" + g.MetricsAddr() + "/metrics"} {
		code, text := getMetrics(t, url, token)
		if code != 200 {
			t.Fatalf("%s: %d %s", url, code, text)
		}
		metricstest.Expect(t, text, map[string]string{
			`beige_llm_attempts_total{model="test-model",outcome="ok",provider="scripted"}`:       "2",
			`beige_llm_time_to_first_token_seconds_count{model="test-model",provider="scripted"}`: "2",
			`beige_llm_attempt_duration_seconds_count{model="test-model",provider="scripted"}`:    "2",
			`beige_llm_tokens_total{direction="input",model="test-model",provider="scripted"}`:    "230",
			`beige_llm_tokens_total{direction="output",model="test-model",provider="scripted"}`:   "27",
			`beige_llm_queue_wait_seconds_count{provider="scripted"}`:                             "2",
			`beige_llm_queue_depth{provider="scripted"}`:                                          "0",
			`beige_llm_cooldowns_active`: "0",
			`beige_http_requests_total{route="POST /api/agents/{name}/prompt",status="200"}`: "1",
			`beige_http_requests_total{route="POST /api/agents/{name}/exec",status="200"}`:   "2",
			`beige_http_requests_total{route="none",status="401"}`:                           "1",
			`beige_audit_records_total`: strconv.Itoa(len(recs)),
			`beige_sessions_active`:     "1",
			`beige_prompts_active`:      "0",
		})
		metricstest.CheckPromtool(t, text)
	}
	if len(recs) < 3 {
		t.Errorf("%d audit records, want at least the 3 exec calls", len(recs))
	}
	// The metrics listener serves /metrics only, with the same token.
	if code, _ := getMetrics(t, "http://"+g.MetricsAddr()+"/metrics", ""); code != 401 {
		t.Errorf("metrics listener without the token: %d, want 401", code)
	}
	if code, _ := getMetrics(t, "http://"+g.MetricsAddr()+"/api/agents", token); code != 404 {
		t.Errorf("metrics listener GET /api/agents: %d, want 404", code)
	}
	// /api/health carries the headline figures.
	req, _ := http.NewRequest("GET", g.URL()+"/api/health", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h proto.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Stats == nil {
		t.Fatalf("health: %v %+v", err, h)
	}
}

// TestMetricsSurviveRestart: a graceful restart keeps the counters (they
// count since the process started), and they go on counting after it.
func TestMetricsSurviveRestart(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	rg := runGatewayWith(t, scriptedSetup(srv, "mrestart"), nil)
	exec := func() {
		resp, err := http.Post(rg.url+"/api/agents/"+rg.agents[0]+"/exec", "application/json", strings.NewReader(`{"tool":"exec","params":{"command":"true"}}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("exec: %d", resp.StatusCode)
		}
	}
	exec()
	exec()
	rg.restart(t)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(rg.log.String(), "msg=restarted") {
		if time.Now().After(deadline) {
			t.Fatalf("no restart within 60 s:\n%s", rg.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !rg.waitHealthy(t, 60*time.Second) {
		t.Fatal("not healthy after the restart")
	}
	exec()
	_, text := getMetrics(t, rg.url+"/metrics", "")
	metricstest.Expect(t, text, map[string]string{
		`beige_http_requests_total{route="POST /api/agents/{name}/exec",status="200"}`: "3",
		`beige_http_requests_total{route="POST /api/gateway/restart",status="202"}`:    "1",
	})
}
