package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/openai"
)

// bodyTransport answers every request with one response, without a
// network: status, content type and body as the fuzzer chose them.
type bodyTransport struct {
	status int
	ctype  string
	body   []byte
}

func (t bodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: t.status, Status: http.StatusText(t.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {t.ctype}},
		Body:   io.NopCloser(bytes.NewReader(t.body)), ContentLength: int64(len(t.body)), Request: req,
	}, nil
}

// wireStreams is the conformance suite's copy of the recorded provider
// streams (see SOURCES.md there), shared with the fuzz seeds here.
var wireStreams = filepath.Join("..", "providers", "testdata", "wire-streams")

// addStreams seeds f with the real provider streams whose names start with
// prefix.
func addStreams(f *testing.F, prefix string) {
	files, _ := filepath.Glob(filepath.Join(wireStreams, prefix+"*.sse"))
	if len(files) == 0 {
		f.Fatalf("no seed streams %s/%s*.sse", wireStreams, prefix)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(0), data)
	}
}

// checkStream is the property every provider stream must have, whatever
// the server sent: Stream returns a message (and no panic); the events
// start with start and end with done (no error) or error (an error); they
// rebuild the returned message; their number is bounded by the input; and
// an error's text is bounded too.
func checkStream(t *testing.T, p llm.Provider, req llm.Request, body []byte) {
	t.Helper()
	var events []llm.Event
	var acc llm.Accumulator
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := p.Stream(ctx, req, func(e llm.Event) {
		events = append(events, e)
		acc.Apply(e)
	})
	if ctx.Err() != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("Stream hung on a finished body:\n%s", buf[:runtime.Stack(buf, true)])
	}
	if msg == nil {
		t.Fatalf("Stream returned no message (err %v)", err)
	}
	if len(events) < 2 || events[0].Type != llm.EventStart {
		t.Fatalf("events %d, first %v: want start ... done|error", len(events), events)
	}
	last := events[len(events)-1].Type
	if (err == nil) != (last == llm.EventDone) || (err != nil && last != llm.EventError) {
		t.Fatalf("err %v but the last event is %q", err, last)
	}
	if got := acc.Message(); !reflect.DeepEqual(got.Content, msg.Content) {
		t.Fatalf("the events rebuild %+v\nthe message is %+v", got.Content, msg.Content)
	}
	if len(events) > len(body)+8 {
		t.Fatalf("%d events from %d bytes", len(events), len(body))
	}
	if err != nil && len(err.Error()) > 2*len(body)+8<<10 {
		t.Fatalf("an error of %d bytes from %d bytes", len(err.Error()), len(body))
	}
	if err == nil && msg.StopReason == llm.StopReasonError {
		t.Fatalf("no error, stop reason error")
	}
}

// fuzzProvider runs one provider over the fuzzer's server answer.
func fuzzProvider(t *testing.T, api, name, base string, mode uint8, body []byte) {
	tr := bodyTransport{status: 200, ctype: "text/event-stream", body: body}
	switch mode % 4 {
	case 1:
		tr.ctype = "application/json"
	case 2:
		tr.status, tr.ctype = 429, "application/json"
	case 3:
		tr.status, tr.ctype = 502, "text/html"
	}
	p, err := llm.NewProvider(llm.ProviderConfig{
		Name: name, APIKey: "k", BaseURL: base, API: api,
		HTTPClient: &http.Client{Transport: tr},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{
		Model:   llm.Lookup(name, api, "gpt-4o", base),
		Context: llm.Context{Messages: []llm.Message{llm.UserText("hi")}},
	}
	checkStream(t, p, req, body)
}

// FuzzChatStream feeds the chat completions stream parser (chunks to llm
// events) arbitrary server answers, as the servers that speak it send
// them (OpenAI, Ollama, vLLM, DeepSeek, OpenRouter, Mistral).
func FuzzChatStream(f *testing.F) {
	addStreams(f, "o_")
	f.Add(uint8(1), []byte(`{"error":{"code":"1113","message":"Insufficient balance or no resource package. Please recharge."}}`))
	f.Add(uint8(0), []byte("data: {\"object\":\"error\",\"message\":\"bad\",\"code\":400}\n\n"))
	f.Add(uint8(0), []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, mode uint8, body []byte) {
		fuzzProvider(t, openai.API, "local", "http://fuzz.invalid/v1", mode, body)
	})
}

// FuzzResponsesStream feeds the Responses stream parser arbitrary server
// answers.
func FuzzResponsesStream(f *testing.F) {
	addStreams(f, "r_")
	f.Add(uint8(2), []byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
	f.Fuzz(func(t *testing.T, mode uint8, body []byte) {
		fuzzProvider(t, openai.ResponsesAPI, "openai", "http://fuzz.invalid/v1", mode, body)
	})
}

// captureTransport keeps the request body and answers an empty stream.
type captureTransport struct{ body *[]byte }

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	*t.body, _ = io.ReadAll(req.Body)
	req.Body.Close()
	return bodyTransport{status: 200, ctype: "text/event-stream", body: []byte("data: [DONE]\n\n")}.RoundTrip(req)
}

var contextSeeds = []string{
	`{"systemPrompt":"s","messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}]}]}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"sig"},{"type":"toolCall","id":"toolu_01","name":"exec","arguments":{"command":"ls"}}],"stopReason":"toolUse","provider":"anthropic","model":"claude"},{"role":"toolResult","toolCallId":"toolu_01","toolName":"exec","content":[{"type":"text","text":"out"},{"type":"image","data":"AA==","mimeType":"image/png"}],"isError":true}]}`,
	`{"messages":[{"role":"assistant","content":[{"type":"toolCall","id":"","name":"","arguments":{}}]},{"role":"toolResult","toolCallId":"","content":[]}]}`,
	`{"tools":[{"name":"exec","description":"d","parameters":{"type":"object"}}],"messages":[{"role":"user","content":"x"}]}`,
	`{"messages":[{"role":"assistant","content":[{"type":"redactedThinking","text":"abc"},{"type":"text","text":""}],"stopReason":"error"}]}`,
}

// fuzzRequest converts an arbitrary conversation (a stored session: model
// output and tool results, hostile) into a request of api: no panic, and
// the body sent is one JSON object.
func fuzzRequest(f *testing.F, api, name string) {
	for _, s := range contextSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c llm.Context
		if json.Unmarshal(data, &c) != nil {
			return
		}
		var sent []byte
		p, err := llm.NewProvider(llm.ProviderConfig{
			Name: name, APIKey: "k", BaseURL: "http://fuzz.invalid/v1", API: api,
			HTTPClient: &http.Client{Transport: captureTransport{&sent}},
		})
		if err != nil {
			t.Fatal(err)
		}
		req := llm.Request{Model: llm.Lookup(name, api, "gpt-4o", "http://fuzz.invalid/v1"), Context: c}
		p.Stream(context.Background(), req, func(llm.Event) {})
		if sent == nil {
			return // refused before sending
		}
		var body map[string]any
		if err := json.Unmarshal(sent, &body); err != nil {
			t.Fatalf("the request is not a JSON object: %v\n%s", err, sent)
		}
		if body["model"] != "gpt-4o" {
			t.Fatalf("model %v", body["model"])
		}
	})
}

// FuzzChatRequest converts conversations for chat completions (convert.go).
func FuzzChatRequest(f *testing.F) { fuzzRequest(f, openai.API, "local") }

// FuzzResponsesRequest converts conversations for the Responses API.
func FuzzResponsesRequest(f *testing.F) { fuzzRequest(f, openai.ResponsesAPI, "openai") }
