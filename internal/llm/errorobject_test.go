package llm

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestErrorObject(t *testing.T) {
	for _, tc := range []struct {
		data       string
		status     int
		typ, msg   string
		notAnError bool
	}{
		{data: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, typ: "requests", msg: "Rate limit reached"},
		{data: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, typ: "overloaded_error", msg: "Overloaded"},
		{data: `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}`, status: 429, typ: "RESOURCE_EXHAUSTED", msg: "Quota exceeded"},
		{data: `{"error":"model 'x' not found"}`, msg: "model 'x' not found"},
		{data: `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`,
			status: 400, typ: "BadRequestError", msg: "This model's maximum context length is 4096 tokens."},
		{data: `{"error":{"code":"1113","message":"Insufficient balance"}}`, typ: "1113", msg: "Insufficient balance"},
		{data: `{"error":{"code":"503","message":"busy"}}`, status: 503, msg: "busy"},
		{data: `{"type":"error","code":"ERR_SOMETHING","message":"Something went wrong","param":null,"sequence_number":2}`, typ: "ERR_SOMETHING", msg: "Something went wrong"},
		{data: `{"id":"c","object":"chat.completion.chunk","error":{"code":"server_error","message":"Provider disconnected"},"choices":[]}`, typ: "server_error", msg: "Provider disconnected"},
		{data: `{"error":{"code":700,"message":"odd"}}`, msg: "odd"}, // not an HTTP status: no class
		// Not errors.
		{data: `{"error":null,"choices":[{"delta":{"content":"error"}}]}`, notAnError: true},
		{data: `{"choices":[{"delta":{"content":"\"error\""}}]}`, notAnError: true},
		{data: `{"error":{}}`, notAnError: true},
		{data: `{"error":""}`, notAnError: true},
		{data: `{"object":"chat.completion.chunk","message":"hi"}`, notAnError: true},
		{data: `{"type":"response.output_text.delta","delta":"error"}`, notAnError: true},
		{data: `[DONE]`, notAnError: true},
		{data: `"error"`, notAnError: true},
		{data: `{"error":`, notAnError: true},
	} {
		ae := ErrorObject("p", "m", []byte(tc.data))
		if tc.notAnError {
			if ae != nil {
				t.Errorf("%s: read as an error %+v", tc.data, ae)
			}
			continue
		}
		if ae == nil || ae.StatusCode != tc.status || ae.Type != tc.typ || ae.Message != tc.msg || ae.Provider != "p" || ae.Model != "m" {
			t.Errorf("%s: %+v, want %d %q %q", tc.data, ae, tc.status, tc.typ, tc.msg)
		}
	}
}

func FuzzErrorObject(f *testing.F) {
	for _, s := range []string{
		`{"error":{"message":"m","type":"t","code":"c"}}`, `{"object":"error","message":"m","code":400}`,
		`{"error":"x"}`, `{"type":"error","code":429,"message":"m"}`, `{"error":{"code":"1113"}}`, `{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ae := ErrorObject("p", "m", data)
		if ae == nil {
			return
		}
		if ae.Message == "" && ae.Type == "" {
			t.Errorf("%q: an error without message or type", data)
		}
		if ae.StatusCode != 0 && (ae.StatusCode < 400 || ae.StatusCode > 599) {
			t.Errorf("%q: status %d", data, ae.StatusCode)
		}
		_ = ae.Error()
	})
}

// A 2xx JSON body reaches the SDK unchanged, however long; only an error
// object in it is kept.
func TestCapturePeeksJSONBodies(t *testing.T) {
	long := `{"id":"chatcmpl-1","choices":[{"message":{"content":"` + strings.Repeat("x", 100<<10) + `"}}]}`
	for _, tc := range []struct {
		ct, body string
		err      bool
	}{
		{"application/json", `{"error":{"code":"1113","message":"Insufficient balance"}}`, true},
		{"application/json; charset=utf-8", long, false},
		{"text/event-stream", `data: {"error":{"message":"x"}}` + "\n\n", false}, // the stream parser's business
		{"text/plain", `{"error":"x"}`, false},
		{"application/x-ndjson", `{"error":"x"}`, false},
		{"application/problem+json", "\n  " + `{"error":{"code":"1113","message":"Insufficient balance"}}`, true},
		{"application/json", `data: {"error":{"message":"x"}}` + "\n\n", false}, // a mislabelled stream: not read ahead
	} {
		c := new(ResponseCapture)
		res, err := c.Middleware(&http.Request{}, func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tc.ct}}, Body: io.NopCloser(strings.NewReader(tc.body))}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		if !bytes.Equal(got, []byte(tc.body)) {
			t.Errorf("%s: body changed (%d bytes, want %d)", tc.ct, len(got), len(tc.body))
		}
		ae := c.APIError("p", "m")
		if (ae != nil) != tc.err {
			t.Errorf("%s %.40s: error %v", tc.ct, tc.body, ae)
		}
		if ae != nil && (ae.Message != "Insufficient balance" || ae.Type != "1113" || ae.StatusCode != 0 || Classify(ae) != ClassOther) {
			t.Errorf("error %+v class %s", ae, Classify(ae))
		}
	}
}

// A stream mislabelled as JSON is handed on at once: the capture does not
// wait for 64 KiB or the end of the body.
func TestCaptureDoesNotHoldStreams(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = io.WriteString(pw, "data: {\"x\":1}\n\n") }() // then silence
	c := new(ResponseCapture)
	done := make(chan *http.Response, 1)
	go func() {
		res, _ := c.Middleware(&http.Request{}, func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: pr}, nil
		})
		done <- res
	}()
	select {
	case res := <-done:
		buf := make([]byte, 5)
		if _, err := io.ReadFull(res.Body, buf); err != nil || string(buf) != "data:" {
			t.Errorf("read %q %v", buf, err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the capture held the stream")
	}
}
