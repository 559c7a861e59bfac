package google_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/google"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

const testKey = "gemini-test-key"

func newProvider(t *testing.T, srv *llmtest.Server, key string) llm.Provider {
	t.Helper()
	p, err := llm.NewProvider(llm.ProviderConfig{Name: "google", APIKey: key, BaseURL: srv.URL(), API: google.API})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(srv *llmtest.Server, id, text string) llm.Request {
	return llm.Request{
		Model:   llm.Lookup("google", google.API, id, srv.URL()),
		Context: llm.Context{Messages: []llm.Message{llm.UserText(text)}},
	}
}

func run(t *testing.T, p llm.Provider, ctx context.Context, req llm.Request) ([]llm.Event, *llm.AssistantMessage, error) {
	t.Helper()
	var events []llm.Event
	var acc llm.Accumulator
	msg, err := p.Stream(ctx, req, func(e llm.Event) {
		events = append(events, e)
		acc.Apply(e)
	})
	if msg == nil {
		t.Fatalf("Stream returned nil message (err %v)", err)
	}
	if got := acc.Message(); !reflect.DeepEqual(got.Content, msg.Content) {
		t.Errorf("accumulated content %+v\nwant %+v", got.Content, msg.Content)
	}
	return events, msg, err
}

func TestStreamText(t *testing.T) {
	srv := llmtest.NewGemini(t)
	srv.Enqueue(llmtest.Text("Hello, world!").WithUsage(1000, 2000).WithCache(500, 0))
	p := newProvider(t, srv, testKey)
	req := request(srv, "gemini-2.5-flash", "hi")
	req.Context.SystemPrompt = "Be brief."
	req.Options.Headers = map[string]string{"X-Goog-Api-Key": "planted", "X-Extra": "yes"}

	_, msg, err := run(t, p, context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text() != "Hello, world!" || msg.StopReason != llm.StopReasonStop {
		t.Errorf("msg = %q %s", msg.Text(), msg.StopReason)
	}
	if u := msg.Usage; u.Input != 1000 || u.Output != 2000 || u.CacheRead != 500 || u.Cost.Total == 0 {
		t.Errorf("usage = %+v", u)
	}
	r := srv.Last()
	if r.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || r.APIKey() != testKey ||
		r.Header.Get("Authorization") != "" || r.Header.Get("X-Extra") != "yes" {
		t.Errorf("request %s key %q auth %q extra %q", r.Path, r.APIKey(), r.Header.Get("Authorization"), r.Header.Get("X-Extra"))
	}
	if r.System() != "Be brief." || !strings.Contains(r.AllText(), "hi") {
		t.Errorf("system %q text %q", r.System(), r.AllText())
	}
}

// The SDK reads GOOGLE_API_KEY, GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL and
// GOOGLE_GENAI_USE_VERTEXAI; none of them may matter.
func TestIgnoresEnvironment(t *testing.T) {
	srv := llmtest.NewGemini(t)
	t.Setenv("GOOGLE_API_KEY", "env-google-key")
	t.Setenv("GEMINI_API_KEY", "env-gemini-key")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:1/")
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "p")
	t.Setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
	for _, key := range []string{testKey, ""} {
		p := newProvider(t, srv, key)
		if _, _, err := run(t, p, context.Background(), request(srv, "gemini-2.5-flash", "hi")); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		r := srv.Last()
		if r.APIKey() != key || strings.Contains(string(r.Raw), "env-") {
			t.Errorf("key %q: sent key %q", key, r.APIKey())
		}
	}
}

func TestBaseURLVersion(t *testing.T) {
	srv := llmtest.NewGemini(t)
	// Without the version segment, v1beta is added.
	p, err := llm.NewProvider(llm.ProviderConfig{Name: "g", APIKey: testKey, BaseURL: strings.TrimSuffix(srv.URL(), "/v1beta"), API: google.API})
	if err != nil {
		t.Fatal(err)
	}
	req := request(srv, "gemini-2.5-pro", "hi")
	req.Model.BaseURL = ""
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := llm.NewProvider(llm.ProviderConfig{Name: "g", API: google.API, BaseURL: "generativelanguage.googleapis.com"}); err == nil {
		t.Error("bad base url accepted")
	}
}

func TestThinkingAndToolCall(t *testing.T) {
	srv := llmtest.NewGemini(t)
	srv.Enqueue(llmtest.Reply(
		llmtest.Block{Kind: "thinking", Text: "Let me run it.", Signature: "think-sig"},
		llmtest.TextBlock("Running."),
		llmtest.Call("exec", map[string]any{"command": "echo WIRE-OK"}),
	), llmtest.Text("done"))
	p := newProvider(t, srv, testKey)
	req := request(srv, "gemini-2.5-pro", "run it")
	req.Options.ThinkingLevel = llm.ThinkingMedium
	req.Context.Tools = []llm.Tool{{Name: "exec", Description: "run", Parameters: json.RawMessage(`{"$schema":"x","type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}

	_, msg, err := run(t, p, context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != llm.StopReasonToolUse || len(msg.Content) != 3 {
		t.Fatalf("msg = %+v", msg)
	}
	th, calls := msg.Content[0], msg.ToolCalls()
	if th.Type != llm.ContentThinking || th.Thinking != "Let me run it." || th.ThinkingSignature != base64.StdEncoding.EncodeToString([]byte("think-sig")) {
		t.Errorf("thinking = %+v", th)
	}
	if len(calls) != 1 || calls[0].Name != "exec" || string(calls[0].Arguments) != `{"command":"echo WIRE-OK"}` || calls[0].ID == "" || calls[0].ThoughtSignature == "" {
		t.Fatalf("calls = %+v", calls)
	}
	var body struct {
		GenerationConfig struct {
			MaxOutputTokens int `json:"maxOutputTokens"`
			ThinkingConfig  struct {
				IncludeThoughts bool `json:"includeThoughts"`
				ThinkingBudget  int  `json:"thinkingBudget"`
			} `json:"thinkingConfig"`
		} `json:"generationConfig"`
		Tools []struct {
			FunctionDeclarations []map[string]any `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := srv.Last().Decode(&body); err != nil {
		t.Fatal(err)
	}
	if tc := body.GenerationConfig.ThinkingConfig; !tc.IncludeThoughts || tc.ThinkingBudget != 8192 || body.GenerationConfig.MaxOutputTokens != 32000+8192 {
		t.Errorf("generationConfig = %+v", body.GenerationConfig)
	}
	if len(body.Tools) != 1 || body.Tools[0].FunctionDeclarations[0]["name"] != "exec" {
		t.Errorf("tools = %+v", body.Tools)
	}
	if s, _ := body.Tools[0].FunctionDeclarations[0]["parametersJsonSchema"].(map[string]any); s == nil || s["$schema"] != nil || s["required"] == nil {
		t.Errorf("schema = %+v", body.Tools[0].FunctionDeclarations[0])
	}

	// The call goes back with its signature, and the result as a functionResponse.
	req.Context.Messages = append(req.Context.Messages, llm.Message{Assistant: msg}, llm.Message{ToolResult: &llm.ToolResultMessage{
		ToolCallID: calls[0].ID, ToolName: "exec",
		Content: []llm.Content{llm.Text("WIRE-OK"), llm.Image(base64.StdEncoding.EncodeToString([]byte("png")), "image/png")},
	}})
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var next struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             string         `json:"text"`
				Thought          bool           `json:"thought"`
				ThoughtSignature string         `json:"thoughtSignature"`
				FunctionCall     map[string]any `json:"functionCall"`
				FunctionResponse map[string]any `json:"functionResponse"`
				InlineData       map[string]any `json:"inlineData"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := srv.Last().Decode(&next); err != nil {
		t.Fatal(err)
	}
	if len(next.Contents) != 3 || next.Contents[1].Role != "model" || next.Contents[2].Role != "user" {
		t.Fatalf("contents = %+v", next.Contents)
	}
	mp := next.Contents[1].Parts
	if len(mp) != 3 || !mp[0].Thought || mp[0].ThoughtSignature != th.ThinkingSignature || mp[2].FunctionCall["name"] != "exec" ||
		mp[2].ThoughtSignature != calls[0].ThoughtSignature || mp[2].FunctionCall["id"] != nil {
		t.Errorf("model turn = %+v", mp)
	}
	up := next.Contents[2].Parts
	if len(up) != 2 || up[0].FunctionResponse["name"] != "exec" || !reflect.DeepEqual(up[0].FunctionResponse["response"], map[string]any{"output": "WIRE-OK"}) ||
		up[1].InlineData["mimeType"] != "image/png" {
		t.Errorf("tool result turn = %+v", up)
	}
}

func TestUserImage(t *testing.T) {
	srv := llmtest.NewGemini(t)
	p := newProvider(t, srv, testKey)
	req := request(srv, "gemini-2.5-flash", "")
	data := base64.StdEncoding.EncodeToString([]byte{0x89, 'P', 'N', 'G'})
	req.Context.Messages = []llm.Message{{User: &llm.UserMessage{Content: []llm.Content{llm.Text("what is it?"), llm.Image(data, "image/png")}}}}
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if raw := string(srv.Last().Raw); !strings.Contains(raw, `"inlineData":{"data":"`+data+`","mimeType":"image/png"}`) {
		t.Errorf("body = %s", raw)
	}
}

func TestThinkingLevels(t *testing.T) {
	for _, tc := range []struct {
		level  llm.ThinkingLevel
		budget int
	}{{llm.ThinkingMinimal, 1024}, {llm.ThinkingLow, 2048}, {llm.ThinkingMedium, 8192}, {llm.ThinkingHigh, 16384}, {llm.ThinkingXHigh, 16384}, {llm.ThinkingOff, 0}} {
		srv := llmtest.NewGemini(t)
		p := newProvider(t, srv, testKey)
		req := request(srv, "gemini-2.5-flash", "hi")
		req.Options.ThinkingLevel = tc.level
		if _, _, err := run(t, p, context.Background(), req); err != nil {
			t.Fatal(err)
		}
		var body struct {
			GenerationConfig struct {
				ThinkingConfig *struct {
					ThinkingBudget int `json:"thinkingBudget"`
				} `json:"thinkingConfig"`
			} `json:"generationConfig"`
		}
		_ = srv.Last().Decode(&body)
		got := 0
		if tcfg := body.GenerationConfig.ThinkingConfig; tcfg != nil {
			got = tcfg.ThinkingBudget
		}
		if got != tc.budget {
			t.Errorf("%s: budget %d, want %d", tc.level, got, tc.budget)
		}
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		resp  llmtest.Response
		class llm.ErrorClass
		want  string
		retry time.Duration
	}{
		{llmtest.Status(429), llm.ClassRateLimit, "429 RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota).", 0},
		{llmtest.Error(429, `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"23s"}]}}`, nil),
			llm.ClassRateLimit, "429 RESOURCE_EXHAUSTED: Quota exceeded", 23 * time.Second},
		{llmtest.Status(503), llm.ClassTransient, "503 UNAVAILABLE: The model is overloaded. Please try again later.", 0},
		{llmtest.Status(400), llm.ClassFatal, "400 INVALID_ARGUMENT: Request contains an invalid argument.", 0},
		{llmtest.Status(401), llm.ClassFatal, "401 UNAUTHENTICATED: API key not valid. Please pass a valid API key.", 0},
		{llmtest.Status(500), llm.ClassOther, "500 INTERNAL: An internal error has occurred.", 0},
		{llmtest.Error(502, "<html>bad gateway</html>", nil), llm.ClassOther, "502 <html>bad gateway</html>", 0},
	} {
		srv := llmtest.NewGemini(t)
		srv.Enqueue(tc.resp)
		p := newProvider(t, srv, testKey)
		_, msg, err := run(t, p, context.Background(), request(srv, "gemini-2.5-flash", "hi"))
		var ae *llm.APIError
		if !errors.As(err, &ae) || msg.StopReason != llm.StopReasonError || msg.ErrorMessage != tc.want ||
			llm.Classify(err) != tc.class || ae.RetryAfter != tc.retry {
			t.Errorf("%d: err %v (%T) class %s, errorMessage %q, want %q", tc.resp.Status, err, err, llm.Classify(err), msg.ErrorMessage, tc.want)
		}
		if srv.Count() != 1 {
			t.Errorf("%d: %d requests: the SDK retried", tc.resp.Status, srv.Count())
		}
	}
}

func TestStreamErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		resp  llmtest.Response
		class llm.ErrorClass
		want  string
	}{
		"error object mid-stream": {llmtest.Text("partial answer").FailAfter(2, "UNAVAILABLE", "The model is overloaded."), llm.ClassTransient, "503 UNAVAILABLE: The model is overloaded."},
		"cut":                     {llmtest.Text("partial answer").CutAfter(2), llm.ClassOther, ""},
		"ends early":              {llmtest.Text("partial answer").EndAfter(2), llm.ClassOther, "stream ended before the reply was complete"},
		"safety":                  {llmtest.Text("no").WithStop("SAFETY"), llm.ClassOther, "SAFETY: the reply was stopped by the provider's safety filter"},
		"malformed call":          {llmtest.Text("").WithStop("MALFORMED_FUNCTION_CALL"), llm.ClassOther, "MALFORMED_FUNCTION_CALL: the model produced a malformed function call"},
	} {
		srv := llmtest.NewGemini(t)
		srv.Enqueue(tc.resp)
		p := newProvider(t, srv, testKey)
		_, msg, err := run(t, p, context.Background(), request(srv, "gemini-2.5-flash", "hi"))
		if err == nil || msg.StopReason != llm.StopReasonError || llm.Classify(err) != tc.class || !strings.Contains(msg.ErrorMessage, tc.want) {
			t.Errorf("%s: err %v class %s, errorMessage %q", name, err, llm.Classify(err), msg.ErrorMessage)
		}
		if srv.Count() != 1 {
			t.Errorf("%s: %d requests: the SDK retried or continued", name, srv.Count())
		}
	}
}

func TestCancel(t *testing.T) {
	srv := llmtest.NewGemini(t)
	srv.Enqueue(llmtest.Hang())
	p := newProvider(t, srv, testKey)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		srv.WaitCount(1, 5*time.Second)
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	_, msg, err := run(t, p, ctx, request(srv, "gemini-2.5-flash", "hi"))
	if !errors.Is(err, context.Canceled) || msg.StopReason != llm.StopReasonAborted || llm.Classify(err) != llm.ClassAborted {
		t.Errorf("err %v, stop %s", err, msg.StopReason)
	}
}

// Another model's history: its thinking becomes text, its tool call ids
// and signatures stay home, and Gemini 3 gets the documented placeholder
// signature on calls it did not sign.
func TestCrossModelHistory(t *testing.T) {
	srv := llmtest.NewGemini(t)
	p := newProvider(t, srv, testKey)
	req := request(srv, "gemini-3-pro-preview", "go")
	req.Context.Messages = append(req.Context.Messages,
		llm.Message{Assistant: &llm.AssistantMessage{
			API: llm.APIAnthropicMessages, Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: llm.StopReasonToolUse,
			Content: []llm.Content{
				{Type: llm.ContentThinking, Thinking: "pondering", ThinkingSignature: "anthropic-sig"},
				llm.ToolCallContent("toolu_01", "exec", json.RawMessage(`{"command":"ls"}`)),
			},
		}},
		llm.Message{ToolResult: &llm.ToolResultMessage{ToolCallID: "toolu_01", ToolName: "exec", Content: []llm.Content{llm.Text("a b")}, IsError: true}},
	)
	if _, _, err := run(t, p, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	raw := string(srv.Last().Raw)
	for _, want := range []string{`{"text":"pondering"}`, `"thoughtSignature":"` + base64.StdEncoding.EncodeToString([]byte("skip_thought_signature_validator")) + `"`, `"response":{"error":"a b"}`} {
		if !strings.Contains(raw, want) {
			t.Errorf("body lacks %s: %s", want, raw)
		}
	}
	if strings.Contains(raw, "toolu_01") || strings.Contains(raw, "anthropic-sig") {
		t.Errorf("another provider's id or signature sent: %s", raw)
	}
}

// A 200 application/json body holding an error object instead of a stream
// is the error the user sees, in the provider's words.
func TestJSONErrorBody(t *testing.T) {
	for _, tc := range []struct {
		body, want string
		class      llm.ErrorClass
	}{
		{`{"error":{"code":"1113","message":"Insufficient balance or no resource package. Please recharge."}}`,
			"1113: Insufficient balance or no resource package. Please recharge.", llm.ClassOther},
		{`{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}`, "429 RESOURCE_EXHAUSTED: Quota exceeded", llm.ClassRateLimit},
	} {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(tc.body))
		}))
		defer hs.Close()
		p, err := llm.NewProvider(llm.ProviderConfig{Name: "google", APIKey: testKey, BaseURL: hs.URL + "/v1beta", API: google.API})
		if err != nil {
			t.Fatal(err)
		}
		req := llm.Request{Model: llm.Lookup("google", google.API, "gemini-2.5-flash", hs.URL+"/v1beta"), Context: llm.Context{Messages: []llm.Message{llm.UserText("hi")}}}
		_, msg, err := run(t, p, context.Background(), req)
		if err == nil || msg.ErrorMessage != tc.want || llm.Classify(err) != tc.class {
			t.Errorf("%s: err %v class %s, errorMessage %q, want %q", tc.body, err, llm.Classify(err), msg.ErrorMessage, tc.want)
		}
	}
}

// A redirect is not followed: the key must not travel to another host.
func TestNoRedirect(t *testing.T) {
	other := llmtest.NewGemini(t)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL()+"/models/gemini-2.5-flash:streamGenerateContent?alt=sse", http.StatusTemporaryRedirect)
	}))
	defer hs.Close()
	p, err := llm.NewProvider(llm.ProviderConfig{Name: "google", APIKey: testKey, BaseURL: hs.URL + "/v1beta", API: google.API})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Model: llm.Lookup("google", google.API, "gemini-2.5-flash", hs.URL+"/v1beta"), Context: llm.Context{Messages: []llm.Message{llm.UserText("hi")}}}
	if _, _, err := run(t, p, context.Background(), req); err == nil {
		t.Error("a redirect answered the request")
	}
	if other.Count() != 0 {
		t.Errorf("the redirect was followed, key %q sent to another host", other.Last().APIKey())
	}
}

// serveRaw answers with body as an event stream, in 13-byte writes.
func serveRaw(t *testing.T, body string) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := 0; i < len(body); i += 13 {
			_, _ = io.WriteString(w, body[i:min(i+13, len(body))])
			f.Flush()
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/v1beta"
}

// Server-sent events the SDK alone would refuse ("invalid stream chunk"):
// comments from proxies, event and id lines, data over several lines,
// CRLF and CR line ends; and error objects in other servers' shapes.
func TestStreamDialects(t *testing.T) {
	text := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello"}]}}]}`
	last := `{"candidates":[{"content":{"role":"model","parts":[{"text":" there"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2}}`
	for name, tc := range map[string]struct {
		body, text, errText string
		class               llm.ErrorClass
	}{
		"comments and fields": {body: ": keep-alive\n\nevent: message\nid: 1\ndata: " + text + "\n\n: ping\n\ndata: " + last + "\n\n", text: "Hello there"},
		"multi-line data":     {body: "data: {\"candidates\":[{\"content\":\ndata: {\"role\":\"model\",\"parts\":[{\"text\":\"Hello\"}]}}]}\n\ndata: " + last + "\n\n", text: "Hello there"},
		"crlf":                {body: "data: " + text + "\r\n\r\n: c\r\n\r\ndata: " + last + "\r\n\r\n", text: "Hello there"},
		"cr":                  {body: "data: " + text + "\r\rdata: " + last + "\r\r", text: "Hello there"},
		"vllm error object": {body: "data: " + text + "\n\ndata: {\"object\":\"error\",\"message\":\"This model's maximum context length is 4096 tokens.\",\"type\":\"BadRequestError\",\"code\":400}\n\n",
			errText: "400 BadRequestError: This model's maximum context length is 4096 tokens.", class: llm.ClassFatal},
		"ollama error": {body: "data: " + text + "\n\ndata: {\"error\":\"model requires more system memory\"}\n\n",
			errText: "model requires more system memory", class: llm.ClassOther},
		"bare json error line": {body: `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}` + "\n",
			errText: "429 RESOURCE_EXHAUSTED: Quota exceeded", class: llm.ClassRateLimit},
	} {
		base := serveRaw(t, tc.body)
		p, err := llm.NewProvider(llm.ProviderConfig{Name: "google", APIKey: testKey, BaseURL: base, API: google.API})
		if err != nil {
			t.Fatal(err)
		}
		req := llm.Request{Model: llm.Lookup("google", google.API, "gemini-2.5-flash", base), Context: llm.Context{Messages: []llm.Message{llm.UserText("hi")}}}
		_, msg, err := run(t, p, context.Background(), req)
		if tc.errText == "" {
			if err != nil || msg.Text() != tc.text || msg.Usage.Input != 7 {
				t.Errorf("%s: err %v, text %q, usage %+v", name, err, msg.Text(), msg.Usage)
			}
			continue
		}
		if err == nil || msg.ErrorMessage != tc.errText || llm.Classify(err) != tc.class {
			t.Errorf("%s: err %v class %s, errorMessage %q, want %q", name, err, llm.Classify(err), msg.ErrorMessage, tc.errText)
		}
	}
}
