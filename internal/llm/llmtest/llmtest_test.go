package llmtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	_ "github.com/beige-dev/beige/internal/llm/anthropic"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	_ "github.com/beige-dev/beige/internal/llm/openai"
)

// post sends a raw request and returns the status and the SSE events
// (name or data for nameless events) of the response.
func post(t *testing.T, url, body string) (int, []string, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, nil, string(b)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			events = append(events, strings.TrimPrefix(line, "event: "))
		case strings.HasPrefix(line, "data: [DONE]"):
			events = append(events, "[DONE]")
		}
	}
	return resp.StatusCode, events, ""
}

func TestAnthropicWireSequence(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Reply(llmtest.ThinkingBlock("hmm"), llmtest.TextBlock("hi"), llmtest.Call("exec", map[string]any{"command": "ls"})))
	_, events, _ := post(t, srv.URL()+"/v1/messages", `{"model":"claude-x","stream":true,"messages":[]}`)
	want := "message_start ping " +
		"content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_stop " +
		"message_delta message_stop"
	if got := strings.Join(events, " "); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	if r := srv.Last(); r.Model() != "claude-x" || r.Seq != 0 || r.Path != "/v1/messages" {
		t.Errorf("recorded %+v", r)
	}
}

func TestOpenAIWireSequence(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	srv.Enqueue(llmtest.Text("abcdefgh"))
	resp, err := http.Post(srv.URL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var chunks []map[string]any
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
	}
	// role chunk, 2 content chunks, finish chunk, usage chunk, [DONE]
	if len(chunks) != 5 || !done {
		t.Fatalf("%d chunks, done %v: %v", len(chunks), done, chunks)
	}
	if u, _ := chunks[4]["usage"].(map[string]any); u["prompt_tokens"] != float64(10) || u["completion_tokens"] != float64(5) {
		t.Errorf("usage chunk = %v", chunks[4])
	}
	fin := chunks[3]["choices"].([]any)[0].(map[string]any)
	if fin["finish_reason"] != "stop" {
		t.Errorf("finish = %v", fin)
	}
}

func TestErrorsAndRouting(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Error(429, "", http.Header{"Retry-After": {"3"}}))
	resp, err := http.Post(srv.URL()+"/v1/messages", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || !strings.Contains(string(body), `"rate_limit_error"`) {
		t.Errorf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	status, _, body2 := post(t, srv.URL()+"/v1/other", `{}`)
	if status != 404 || !strings.Contains(body2, "no route") {
		t.Errorf("unknown path: %d %s", status, body2)
	}
	if srv.Count() != 2 {
		t.Errorf("count = %d", srv.Count())
	}
}

func TestDefaultAndHandle(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	p, _ := llm.NewProvider(llm.ProviderConfig{Name: "anthropic", API: llm.APIAnthropicMessages, BaseURL: srv.URL(), APIKey: "k"})
	ask := func(text string) string {
		t.Helper()
		req := llm.Request{Model: llm.Lookup("anthropic", "", "claude-haiku-4-5", srv.URL()),
			Context: llm.Context{Messages: []llm.Message{llm.UserText(text)}}}
		msg, err := p.Stream(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		return msg.Text()
	}
	if got := ask("a"); got != "ok" {
		t.Errorf("default reply = %q", got)
	}
	srv.SetDefault(llmtest.Text("fallback"))
	srv.Enqueue(llmtest.Text("queued"))
	if a, b := ask("b"), ask("c"); a != "queued" || b != "fallback" {
		t.Errorf("replies = %q, %q", a, b)
	}
	srv.Handle(func(r llmtest.Recorded) llmtest.Response {
		return llmtest.Text("echo: " + r.AllText())
	})
	if got := ask("ping"); got != "echo: ping" {
		t.Errorf("hook reply = %q", got)
	}
	if srv.Request(3).AllText() != "ping" || srv.Request(0).APIKey() != "k" {
		t.Errorf("recorded %+v", srv.Request(3))
	}
}

func TestGateAndConcurrency(t *testing.T) {
	srv := llmtest.NewOpenAI(t)
	gate := make(chan struct{})
	srv.SetDefault(llmtest.Text("done").WithGate(gate))
	p, _ := llm.NewProvider(llm.ProviderConfig{Name: "local", API: llm.APIOpenAICompletions, BaseURL: srv.URL()})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := llm.Request{Model: llm.Lookup("local", llm.APIOpenAICompletions, "m", srv.URL()),
				Context: llm.Context{Messages: []llm.Message{llm.UserText(string(rune('a' + i)))}}}
			if _, err := p.Stream(context.Background(), req, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	if !srv.WaitInFlight(3, 5*time.Second) {
		t.Fatalf("in flight = %d", srv.InFlight())
	}
	close(gate)
	wg.Wait()
	// The clients have their answers; the handlers may not have returned yet.
	if !srv.WaitFinished(3, 5*time.Second) {
		t.Fatalf("finished = %d", srv.Finished())
	}
	if srv.MaxInFlight() != 3 || srv.InFlight() != 0 || srv.Finished() != 3 || srv.Cancelled() != 0 {
		t.Errorf("max %d now %d finished %d cancelled %d", srv.MaxInFlight(), srv.InFlight(), srv.Finished(), srv.Cancelled())
	}
	seen := map[int]bool{}
	for _, r := range srv.Requests() {
		seen[r.Seq] = true
	}
	if len(seen) != 3 {
		t.Errorf("seqs = %v", seen)
	}
}

func TestSlowStream(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Text("slow").WithDelay(20 * time.Millisecond))
	p, _ := llm.NewProvider(llm.ProviderConfig{Name: "a", API: llm.APIAnthropicMessages, BaseURL: srv.URL()})
	start := time.Now()
	_, err := p.Stream(context.Background(), llm.Request{Model: llm.Lookup("a", llm.APIAnthropicMessages, "claude-x", srv.URL()),
		Context: llm.Context{Messages: []llm.Message{llm.UserText("x")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 7 events at 20 ms each.
	if d := time.Since(start); d < 140*time.Millisecond {
		t.Errorf("took %v", d)
	}
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Hang())
	p, _ := llm.NewProvider(llm.ProviderConfig{Name: "a", API: llm.APIAnthropicMessages, BaseURL: srv.URL()})
	errc := make(chan error, 1)
	go func() {
		_, err := p.Stream(context.Background(), llm.Request{Model: llm.Lookup("a", llm.APIAnthropicMessages, "claude-x", srv.URL()),
			Context: llm.Context{Messages: []llm.Message{llm.UserText("x")}}}, nil)
		errc <- err
	}()
	srv.WaitCount(1, 5*time.Second)
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on a hanging request")
	}
	if err := <-errc; err == nil {
		t.Error("no error from a closed server")
	}
}

func TestGeminiWireSequence(t *testing.T) {
	srv := llmtest.NewGemini(t)
	srv.Enqueue(llmtest.Reply(llmtest.ThinkingBlock("hmm"), llmtest.TextBlock("hi"), llmtest.Call("exec", map[string]any{"command": "ls"})).WithCache(3, 0))
	resp, err := http.Post(srv.URL()+"/models/gemini-x:streamGenerateContent?alt=sse", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"yo"}]}],"systemInstruction":{"parts":[{"text":"sys"}]},"tools":[{"functionDeclarations":[{"name":"exec"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var parts []map[string]any
	var last map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		cand := c["candidates"].([]any)[0].(map[string]any)
		for _, p := range cand["content"].(map[string]any)["parts"].([]any) {
			parts = append(parts, p.(map[string]any))
		}
		last = c
	}
	// thought "hmm", text "hi", functionCall, the final empty text
	if len(parts) != 4 || parts[0]["thought"] != true || parts[0]["thoughtSignature"] == nil || parts[1]["text"] != "hi" ||
		parts[2]["functionCall"].(map[string]any)["name"] != "exec" || parts[2]["thoughtSignature"] == nil {
		t.Fatalf("parts = %v", parts)
	}
	cand := last["candidates"].([]any)[0].(map[string]any)
	if u := last["usageMetadata"].(map[string]any); cand["finishReason"] != "STOP" || u["promptTokenCount"] != float64(13) || u["cachedContentTokenCount"] != float64(3) {
		t.Errorf("last chunk = %v", last)
	}
	r := srv.Last()
	if r.Model() != "gemini-x" || r.System() != "sys" || r.AllText() != "yo" || strings.Join(r.Tools(), ",") != "exec" {
		t.Errorf("recorded model %q system %q text %q tools %v", r.Model(), r.System(), r.AllText(), r.Tools())
	}
	for _, path := range []string{"/models/gemini-x:streamGenerateContent", "/models/gemini-x:generateContent?alt=sse", "/models/a/b:streamGenerateContent?alt=sse"} {
		if status, _, body := post(t, srv.URL()+path, `{}`); status != 404 || !strings.Contains(body, `"code":404`) {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
}
