package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/routing/routingtest"
)

// twoProviders starts a gateway whose agent uses provider pa's model first
// and pb's as its fallback, each served by its own scripted server.
func twoProviders(t *testing.T, extraProvider string) (*testGateway, *llmtest.Server, *llmtest.Server) {
	t.Helper()
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"router"},
		providers: fmt.Sprintf(`pa: { api: "anthropic-messages", baseUrl: %q, apiKey: "ka", %s }, pb: { api: "anthropic-messages", baseUrl: %q, apiKey: "kb" }`,
			a.URL(), extraProvider, b.URL()),
		model: "{ provider: 'pa', model: 'model-a' }",
		extra: map[string]string{"router": "fallbackModels: [{ provider: 'pb', model: 'model-b' }]"},
	})
	return g, a, b
}

func (g *testGateway) promptOK(t *testing.T, key, message string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"message": message, "sessionKey": key})
	code, out := g.post(t, "/api/agents/"+g.agents[0]+"/prompt", string(body))
	if code != 200 {
		t.Fatalf("prompt %q: %d %v", message, code, out)
	}
	return out["response"].(string)
}

func TestRateLimitCooldownSurvivesRestart(t *testing.T) {
	g, a, b := twoProviders(t, "")
	a.Enqueue(llmtest.Error(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, http.Header{"Retry-After": {"120"}}))
	b.SetDefault(llmtest.Text("from b"))
	a.SetDefault(llmtest.Text("from a"))
	if got := g.promptOK(t, "api:s1", "hello"); got != "from b" {
		t.Fatalf("first prompt: %q", got)
	}
	healthFile := filepath.Join(g.home.DataDir(), "provider-health.json")
	var health struct {
		Providers map[string]struct {
			RetryAfter string `json:"retryAfter"`
		} `json:"providers"`
	}
	data, err := os.ReadFile(healthFile)
	if err != nil || json.Unmarshal(data, &health) != nil {
		t.Fatalf("provider-health.json: %v %s", err, data)
	}
	until, err := time.Parse(time.RFC3339, health.Providers["pa/model-a"].RetryAfter)
	if err != nil || time.Until(until) < 100*time.Second || time.Until(until) > 121*time.Second {
		t.Fatalf("cooldown until %v (%v): %s", until, err, data)
	}
	// Another session goes straight to the fallback.
	if got := g.promptOK(t, "api:s2", "hi again"); got != "from b" || a.Count() != 1 {
		t.Fatalf("second session: %q, primary saw %d requests", got, a.Count())
	}
	// So does one after a restart.
	g.restart(t)
	if got := g.promptOK(t, "api:s3", "after restart"); got != "from b" || a.Count() != 1 {
		t.Fatalf("after restart: %q, primary saw %d requests", got, a.Count())
	}
	// Once the cooldown has passed, the primary is used again.
	g.Shutdown(context.Background())
	past := strings.Replace(string(mustRead(t, healthFile)), health.Providers["pa/model-a"].RetryAfter, time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano), 1)
	os.WriteFile(healthFile, []byte(past), 0o600)
	g.restart(t)
	if got := g.promptOK(t, "api:s4", "later"); got != "from a" || a.Count() != 2 {
		t.Fatalf("after the cooldown: %q, primary saw %d requests", got, a.Count())
	}
	recs, _ := audit.ReadFile(g.home.AuditLog())
	n := 0
	for _, r := range recs {
		if r.Type == audit.TypeLLM {
			n++
		}
	}
	if n != 5 { // a (429), then b, b, b, and a again
		t.Errorf("%d model attempts audited, want 5", n)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestTransientErrorsRetryOnTheNextPass(t *testing.T) {
	g, a, b := twoProviders(t, "")
	a.Enqueue(llmtest.Error(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, nil), llmtest.Text("from a"))
	b.Enqueue(llmtest.Status(500))
	if got := g.promptOK(t, "api:t", "hello"); got != "from a" {
		t.Fatalf("answer %q", got)
	}
	if a.Count() != 2 || b.Count() != 1 || a.Requests()[1].Time.Before(b.Requests()[0].Time) {
		t.Errorf("attempts: a %d, b %d, want A, B, A", a.Count(), b.Count())
	}
	data, _ := os.ReadFile(filepath.Join(g.home.DataDir(), "provider-health.json"))
	if strings.Contains(string(data), "retryAfter") {
		t.Errorf("a cooldown was recorded: %s", data)
	}
}

func TestProviderConcurrencyLimit(t *testing.T) {
	g, a, _ := twoProviders(t, "concurrency: 2")
	const n = 10
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
		a.Enqueue(llmtest.Text("ok").WithGate(gates[i]))
	}
	defer func() {
		for _, c := range gates {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	}()
	// waitFor polls a condition that only the gateway's progress makes
	// true: no sleep decides the order of events.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.promptOK(t, fmt.Sprintf("api:c%d", i), fmt.Sprintf("prompt-%02d", i))
		}()
		if i < 2 { // takes a slot: wait until its request is at the provider
			waitFor(fmt.Sprintf("request %d", i), func() bool { return len(a.Requests()) == i+1 })
		} else { // queues: wait until it waits
			waitFor(fmt.Sprintf("prompt %d to queue", i), func() bool { _, w := g.router.QueueStats("pa"); return w == i-1 && routingtest.Queued() == i-1 })
		}
	}
	// Release the answers one at a time: each frees a slot, which the
	// longest-waiting prompt must get (FIFO), and never more than 2 run.
	for k := range n - 2 {
		close(gates[k])
		waitFor(fmt.Sprintf("request %d", k+2), func() bool { return len(a.Requests()) == k+3 })
		if inUse, _ := g.router.QueueStats("pa"); inUse > 2 {
			t.Fatalf("%d requests in flight, want at most 2", inUse)
		}
	}
	for _, c := range gates[n-2:] {
		close(c)
	}
	wg.Wait()
	if m := a.MaxInFlight(); m != 2 {
		t.Errorf("max in flight %d, want 2", m)
	}
	for i, r := range a.Requests() {
		if want := fmt.Sprintf("prompt-%02d", i); !strings.Contains(r.AllText(), want) {
			t.Errorf("request %d is not %s: %.80s", i, want, r.AllText())
		}
	}
}

func TestChatStream(t *testing.T) {
	g, a, _ := twoProviders(t, "")
	a.Enqueue(llmtest.Text("Hello! How can I help?"))
	// The curl example of http-api.md, for this agent.
	body := fmt.Sprintf(`{
    "provider": "pa",
    "modelId": "model-a",
    "context": {"messages": [{"role": "user", "content": "Hello!"}]},
    "agentName": %q
  }`, g.agents[0])
	resp, err := http.Post(g.URL()+"/api/chat/stream", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var types []string
	var text string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev struct {
			Type  string
			Delta string
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, ev.Type)
		if ev.Type == "text_delta" {
			text += ev.Delta
		}
	}
	if text != "Hello! How can I help?" || types[0] != "start" || types[len(types)-1] != "done" {
		t.Errorf("events %v, text %q", types, text)
	}
	if a.Last().APIKey() != "ka" {
		t.Error("the gateway did not add the key")
	}

	// A model that is not the agent's is refused; bad requests are 4xx.
	for _, tc := range []struct {
		body string
		code int
	}{
		{fmt.Sprintf(`{"provider":"pa","modelId":"other","context":{"messages":[{"role":"user","content":"x"}]},"agentName":%q}`, g.agents[0]), 403},
		{`{"provider":"pa","modelId":"model-a","context":{"messages":[{"role":"user","content":"x"}]}}`, 400},
		{`{"provider":"pa","modelId":"model-a","context":{"messages":[]},"agentName":"nobody"}`, 404},
	} {
		if code, out := g.post(t, "/api/chat/stream", tc.body); code != tc.code {
			t.Errorf("%s: %d %v", tc.body, code, out)
		}
	}

	// A client that disconnects stops the upstream request within 100 ms.
	a.Enqueue(llmtest.Text("never ends").HangAfter(2))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL()+"/api/chat/stream", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(resp.Body).ReadString('\n') // the stream has begun
	if !a.WaitInFlight(1, time.Second) {
		t.Fatal("the upstream request did not start")
	}
	cancelled := a.Cancelled()
	start := time.Now()
	cancel()
	resp.Body.Close()
	if !a.WaitCancelled(cancelled+1, time.Second) {
		t.Fatalf("the upstream request was not cancelled: count %d cancelled %d (before %d) inflight %d", a.Count(), a.Cancelled(), cancelled, a.InFlight())
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("upstream cancelled after %v", d)
	}
}

func TestHookEndpoints(t *testing.T) {
	g := startGateway(t, "hooks")
	a := g.agents[0]
	cases := []struct {
		path, body string
		code       int
		want       string
	}{
		{"pre-prompt", `{"message":"hi","sessionKey":"tui:x:default","channel":"tui"}`, 200, `"message":"hi","block":false,"reason":null`},
		{"post-response", `{"response":"yo","sessionKey":"tui:x:default","channel":"tui"}`, 200, `"response":"yo","block":false`},
		{"session-created", `{"sessionKey":"tui:x:default","channel":"tui"}`, 200, `"ok":true`},
		{"session-disposed", `{"sessionKey":"tui:x:default","channel":"tui"}`, 200, `"ok":true`},
		{"session-created", `{}`, 400, `sessionKey`},
		{"nope", `{}`, 404, `no such hook`},
	}
	for _, tc := range cases {
		resp, err := http.Post(g.URL()+"/api/agents/"+a+"/hooks/"+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s: %d %s", tc.path, resp.StatusCode, b.String())
		}
	}
}
