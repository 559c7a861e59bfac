package llm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// Decoding outside input (a client's context, a stored session, an
// event stream) must never panic, and what decodes must encode, and then
// stay the same through another round (the encoding is canonical).

func FuzzContextJSON(f *testing.F) {
	for _, s := range []string{
		`{"systemPrompt":"s","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}],"timestamp":1}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"toolCall","id":"1","name":"x","arguments":{"a":[1,{"b":null}]}}],"usage":{"input":1},"stopReason":"toolUse"}]}`,
		`{"messages":[{"role":"toolResult","toolCallId":"1","toolName":"x","content":[],"details":{"k":1},"isError":true}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"toolCall","arguments":"{bad"}]}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"weird","arguments":[1]}]}]}`,
		`{"tools":[{"name":"t","parameters":{"type":"object"}}],"messages":null}`,
		`{"messages":[{"role":"user","content":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Context
		if json.Unmarshal(data, &c) != nil {
			return
		}
		b1, err := json.Marshal(c)
		if err != nil {
			// Only a message without a role cannot be written.
			for _, m := range c.Messages {
				if m.Role() == "" {
					return
				}
			}
			t.Fatalf("marshal %q: %v", data, err)
		}
		var c2 Context
		if err := json.Unmarshal(b1, &c2); err != nil {
			t.Fatalf("re-decode %s: %v", b1, err)
		}
		b2, err := json.Marshal(c2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("not stable:\n%s\n%s (%v)", b1, b2, err)
		}
	})
}

func FuzzEventJSON(f *testing.F) {
	for _, s := range []string{
		`{"type":"text_delta","contentIndex":0,"delta":"hi"}`,
		`{"type":"toolcall_end","contentIndex":1,"toolCall":{"type":"toolCall","id":"a","name":"b","arguments":{}}}`,
		`{"type":"done","reason":"stop","message":{"role":"assistant","content":[],"stopReason":"stop"}}`,
		`{"type":"error","reason":"error","error":{"role":"assistant","content":[{"type":"text","text":""}],"errorMessage":"x"}}`,
		`{"type":"model_fallback","provider":"p","modelId":"m"}`,
		`{"type":"text_delta","contentIndex":-5,"delta":"x","partial":{"content":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Event
		if json.Unmarshal(data, &e) != nil {
			return
		}
		var acc Accumulator
		acc.Apply(e) // must not panic, whatever the index
		acc.Apply(Event{Type: EventTextDelta, ContentIndex: e.ContentIndex, Delta: "x"})
		_ = acc.Message()
		b1, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var e2 Event
		if err := json.Unmarshal(b1, &e2); err != nil {
			t.Fatalf("re-decode %s: %v", b1, err)
		}
		if b2, _ := json.Marshal(e2); !bytes.Equal(b1, b2) {
			t.Fatalf("not stable:\n%s\n%s", b1, b2)
		}
	})
}

func FuzzParseArguments(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":1}`, `{"a":`, "[]", `{"a":"\ud800"}`, "{}{}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		args, ok := ParseArguments(raw)
		if !json.Valid(args) || args[0] != '{' {
			t.Fatalf("ParseArguments(%q) = %s: not an object", raw, args)
		}
		if !ok && string(args) != "{}" {
			t.Fatalf("failure must give {}, got %s", args)
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "7", "1.5", "-1", "1e400", "NaN", "+Inf",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Sun Nov  6 08:49:37 1994", "Sunday, 06-Nov-94 08:49:37 GMT"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, h string) {
		d := ParseRetryAfter(h, now)
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v", h, d)
		}
		hdr := http.Header{}
		hdr.Set("Retry-After-Ms", h)
		if d := RetryAfterFromHeader(hdr, now); d < 0 || d > MaxRetryAfter {
			t.Fatalf("RetryAfterFromHeader(ms %q) = %v", h, d)
		}
	})
}

func FuzzNewHTTPError(f *testing.F) {
	for _, s := range []string{
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"error":{"message":"m","type":null,"code":"c"}}`,
		`{"error":"x"}`, `{"message":"m"}`, "<html>", "\xff\xfe", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := NewHTTPError("p", "m", 500, http.Header{"Retry-After": {string(body)}}, body, time.Now())
		_ = e.Error()
		if len(e.Message) > len(body)+maxErrorBody+8 {
			t.Fatalf("message grew: %d", len(e.Message))
		}
		_ = Classify(e)
	})
}
