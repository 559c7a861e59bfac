package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// gatewayAnswer answers every request with one response, without a
// network.
type gatewayAnswer struct {
	status int
	body   []byte
}

func (g gatewayAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: g.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-ndjson"}},
		Body:   io.NopCloser(bytes.NewReader(g.body)), Request: req,
	}, nil
}

// FuzzChatStream reads an arbitrary answer of the gateway to POST
// /api/chat/stream (the NDJSON event stream, or an error status): no
// panic; success only with a done event's message; every failure is one of
// the documented errors; no more events than lines; an error's text is
// bounded and valid UTF-8 when the body was.
func FuzzChatStream(f *testing.F) {
	for _, s := range []string{
		`{"type":"start","partial":{"role":"assistant","content":[],"provider":"p","model":"m"}}` + "\n" +
			`{"type":"text_start","contentIndex":0}` + "\n" + `{"type":"text_delta","contentIndex":0,"delta":"hi"}` + "\n" +
			`{"type":"text_end","contentIndex":0,"content":"hi"}` + "\n" +
			`{"type":"done","reason":"stop","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"stopReason":"stop"}}` + "\n",
		`{"type":"model_fallback","provider":"p","modelId":"m"}` + "\n" +
			`{"type":"error","reason":"error","error":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"all models failed"}}` + "\n",
		`{"type":"blocked","reason":"no"}` + "\n",
		`{"type":"done"}` + "\n",
		`{"type":"error"}` + "\n",
		`{"type":"start"}` + "\n" + `{"type":"text_delta","contentIndex":9,"delta":"x"}`,
		"\n\n   \n",
		`{"type":"text_delta","contentIndex":-1,"delta":"x"}` + "\n",
		"not json\n",
	} {
		f.Add(uint16(200), []byte(s))
	}
	f.Add(uint16(503), []byte(`{"error":"gateway is starting"}`))
	f.Add(uint16(400), []byte("bad request: "+string(bytes.Repeat([]byte("é"), 200))))
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		code := int(status)%500 + 100
		c := New("http://gateway.invalid", &Options{HTTPClient: &http.Client{Transport: gatewayAnswer{code, body}}})
		events := 0
		msg, err := c.ChatStream(context.Background(), llmproto.ChatStreamRequest{Provider: "p", ModelID: "m"}, func(llm.Event) { events++ })
		if lines := bytes.Count(body, []byte("\n")) + 1; events > lines {
			t.Fatalf("%d events from %d lines", events, lines)
		}
		if err == nil {
			if msg == nil {
				t.Fatal("no error and no message")
			}
			return
		}
		var me *ModelError
		var be *BlockedError
		var ce *Error
		switch {
		case errors.As(err, &me):
			if msg == nil || (msg.StopReason != llm.StopReasonError && msg.StopReason != llm.StopReasonAborted) {
				t.Fatalf("model error %v with message %+v", err, msg)
			}
		case errors.As(err, &be):
		case errors.As(err, &ce):
			if code/100 == 2 {
				t.Fatalf("an HTTP error for status %d", code)
			}
			if len(ce.Msg) > 64<<10 || (utf8.Valid(body) && !utf8.ValidString(ce.Msg)) {
				t.Fatalf("error message of %d bytes, valid UTF-8 %v", len(ce.Msg), utf8.ValidString(ce.Msg))
			}
		case errors.Is(err, ErrStreamCut):
		default:
			if !bytes.Contains([]byte(err.Error()), []byte("bad event line")) && !bytes.Contains([]byte(err.Error()), []byte("done event without a message")) {
				t.Fatalf("undocumented error %T %v", err, err)
			}
		}
	})
}
