package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	api := func(status int, typ, msg string) error {
		return &APIError{Provider: "p", Model: "m", StatusCode: status, Type: typ, Message: msg}
	}
	tests := []struct {
		name string
		err  error
		want ErrorClass
	}{
		{"nil", nil, ClassOther},
		{"429", api(429, "", ""), ClassRateLimit},
		{"429 wrapped", fmt.Errorf("attempt 2: %w", api(429, "rate_limit_error", "slow down")), ClassRateLimit},
		{"529", api(529, "", ""), ClassTransient},
		{"401", api(401, "authentication_error", "invalid x-api-key"), ClassFatal},
		{"403", api(403, "", ""), ClassFatal},
		{"400", api(400, "invalid_request_error", "prompt is too long"), ClassFatal},
		{"400 wins over message", api(400, "", "exceeds capacity"), ClassFatal},
		{"500", api(500, "api_error", "Internal server error"), ClassOther},
		{"502 no body", api(502, "", ""), ClassOther},
		{"503 overloaded text", api(503, "server_error", "The engine is currently overloaded"), ClassTransient},
		{"mid-stream overloaded type", api(0, "overloaded_error", "Overloaded"), ClassTransient},
		{"mid-stream rate_limit type", api(0, "rate_limit_error", "x"), ClassSoftRateLimit},
		{"rate limit text", api(500, "", "Rate limit reached for requests"), ClassSoftRateLimit},
		{"too many requests text", api(0, "", "Too Many Requests"), ClassSoftRateLimit},
		{"capacity", api(500, "", "model at capacity, try later"), ClassTransient},
		{"temporarily unavailable", api(0, "", "Service Temporarily Unavailable"), ClassTransient},
		{"plain error with pattern", errors.New("upstream said: rate limit exceeded"), ClassSoftRateLimit},
		{"plain overloaded", errors.New("Overloaded"), ClassTransient},
		{"network", io.ErrUnexpectedEOF, ClassOther},
		{"incomplete", fmt.Errorf("x: %w", ErrIncompleteStream), ClassOther},
		{"canceled", fmt.Errorf("llm: request aborted: %w", context.Canceled), ClassAborted},
		{"deadline", context.DeadlineExceeded, ClassAborted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestCooldown(t *testing.T) {
	tests := []struct {
		err  error
		want time.Duration
	}{
		{&APIError{StatusCode: 429}, 5 * time.Minute},
		{&APIError{StatusCode: 429, RetryAfter: 30 * time.Second}, 30 * time.Second},
		{&APIError{Message: "rate limit"}, 60 * time.Second},
		{&APIError{Message: "rate limit", RetryAfter: time.Second}, time.Second},
		{&APIError{StatusCode: 529}, 0},
		{&APIError{StatusCode: 500}, 0},
		{context.Canceled, 0},
	}
	for _, tt := range tests {
		if got := Cooldown(tt.err); got != tt.want {
			t.Errorf("Cooldown(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 5, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"  ", 0},
		{"0", 0},
		{"7", 7 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"1.5", 1500 * time.Millisecond},
		{"-3", 0},
		{"abc", 0},
		{"NaN", 0},
		{"Inf", MaxRetryAfter},
		{"1e300", MaxRetryAfter},
		{"99999999999999999999", MaxRetryAfter},
		{"Thu, 05 Mar 2026 12:00:30 GMT", 30 * time.Second},
		{"Thursday, 05-Mar-26 12:01:00 GMT", time.Minute}, // RFC 850
		{"Thu Mar  5 12:00:10 2026", 10 * time.Second},    // ANSI C
		{"Thu, 05 Mar 2026 11:00:00 GMT", 0},              // past
		{"Thu, 05 Mar 2099 11:00:00 GMT", MaxRetryAfter},
		{"Thu, 35 Mar 2026 11:00:00 GMT", 0},
	}
	for _, tt := range tests {
		if got := ParseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRetryAfterFromHeader(t *testing.T) {
	now := time.Now()
	h := http.Header{}
	if RetryAfterFromHeader(nil, now) != 0 || RetryAfterFromHeader(h, now) != 0 {
		t.Error("empty header")
	}
	h.Set("Retry-After", "10")
	if got := RetryAfterFromHeader(h, now); got != 10*time.Second {
		t.Errorf("got %v", got)
	}
	h.Set("Retry-After-Ms", "250")
	if got := RetryAfterFromHeader(h, now); got != 250*time.Millisecond {
		t.Errorf("ms wins: got %v", got)
	}
	h.Set("Retry-After-Ms", "junk")
	if got := RetryAfterFromHeader(h, now); got != 10*time.Second {
		t.Errorf("bad ms falls back: got %v", got)
	}
}

func TestNewHTTPError(t *testing.T) {
	tests := []struct {
		name, body, typ, msg string
	}{
		{"anthropic", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error", "Overloaded"},
		{"openai", `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "requests", "Rate limit reached"},
		{"openai code only", `{"error":{"message":"quota","type":null,"code":"insufficient_quota"}}`, "insufficient_quota", "quota"},
		{"ollama", `{"error":"model not found"}`, "", "model not found"},
		{"message only", `{"message":"bad gateway","type":"error"}`, "", "bad gateway"},
		{"html", "<html><body>502 Bad Gateway</body></html>", "", "<html><body>502 Bad Gateway</body></html>"},
		{"empty", "", "", ""},
		{"json without message", `{"foo":1}`, "", `{"foo":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Retry-After": {"3"}}
			e := NewHTTPError("prov", "mod", 502, h, []byte(tt.body), time.Now())
			if e.Type != tt.typ || e.Message != tt.msg || e.StatusCode != 502 || e.RetryAfter != 3*time.Second || e.Provider != "prov" || e.Model != "mod" {
				t.Errorf("got %+v", e)
			}
		})
	}
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'x'
	}
	if e := NewHTTPError("p", "m", 500, nil, long, time.Now()); len(e.Message) > maxErrorBody+4 {
		t.Errorf("message not truncated: %d bytes", len(e.Message))
	}
}

func TestAPIErrorText(t *testing.T) {
	e := &APIError{Provider: "anthropic", Model: "claude", StatusCode: 429, Type: "rate_limit_error", Message: "slow down"}
	if got := e.Error(); got != "anthropic claude: 429 rate_limit_error: slow down" {
		t.Errorf("Error() = %q", got)
	}
	if got := ErrorMessage(fmt.Errorf("wrapped: %w", e)); got != "429 rate_limit_error: slow down" {
		t.Errorf("ErrorMessage = %q", got)
	}
	if got := (&APIError{Provider: "p", StatusCode: 502}).Error(); got != "p: 502 Bad Gateway" {
		t.Errorf("Error() = %q", got)
	}
	if got := ErrorMessage(io.ErrUnexpectedEOF); got != "unexpected EOF" {
		t.Errorf("ErrorMessage = %q", got)
	}
}

func TestAbortError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := AbortError(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	cause := errors.New("watchdog")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(cause)
	if err := AbortError(ctx); !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Errorf("err = %v", err)
	}
}
