package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// APIError is a failure reported by a provider: an HTTP error response, or
// an error event in the middle of a stream.
type APIError struct {
	Provider string // provider name from the config, e.g. "anthropic"
	Model    string // model id
	// StatusCode is the HTTP status of an error response. For an error
	// object in a stream or in a 200 body it is the object's code when that
	// is an HTTP error status (vLLM's "code":400, Google's "code":429), as
	// the provider's word on how to treat it; else 0, as when no response
	// arrived.
	StatusCode int
	// Type is the provider's error type when it gives one, e.g.
	// "rate_limit_error", "overloaded_error" (Anthropic) or
	// "insufficient_quota" (OpenAI).
	Type string
	// Message is the provider's own error message.
	Message string
	// RetryAfter is the wait the provider asked for (retry-after-ms or
	// retry-after header); 0 if none.
	RetryAfter time.Duration
	// Header is the response header of an error response; nil otherwise.
	Header http.Header
}

func (e *APIError) Error() string {
	name := e.Provider
	if e.Model != "" {
		name += " " + e.Model
	}
	return name + ": " + e.detail()
}

// detail is "<status> <type>: <message>", leaving out what is missing.
func (e *APIError) detail() string {
	var b strings.Builder
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "%d ", e.StatusCode)
	}
	if e.Type != "" {
		b.WriteString(e.Type + ": ")
	}
	msg := e.Message
	if msg == "" && e.StatusCode != 0 {
		msg = http.StatusText(e.StatusCode)
	}
	if msg == "" {
		msg = "error"
	}
	b.WriteString(msg)
	return b.String()
}

// ErrorMessage is the text put in an assistant message's errorMessage:
// "<status> <type>: <message>" for an APIError (without the provider and
// model, which the message names already), err.Error() otherwise.
func ErrorMessage(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.detail()
	}
	return err.Error()
}

// ErrorClass says how the fallback loop should treat a failure.
type ErrorClass int

const (
	// ClassOther is any other failure (5xx, network, cut stream): count it
	// and try the next model.
	ClassOther ErrorClass = iota
	// ClassRateLimit is a hard rate limit (HTTP 429): cool the model down
	// for everyone (retry-after, else 5 minutes).
	ClassRateLimit
	// ClassSoftRateLimit is a rate limit recognised by its message only
	// ("rate limit", "too many requests"): cool down (retry-after, else 60 s).
	ClassSoftRateLimit
	// ClassTransient is a capacity problem (529, "overloaded", "capacity",
	// "temporarily unavailable"): no global cooldown; try again later.
	ClassTransient
	// ClassFatal is a request the provider will never accept (400, 401,
	// 403): fail at once.
	ClassFatal
	// ClassAborted is a cancelled request: stop, do not fall back.
	ClassAborted
)

func (c ErrorClass) String() string {
	switch c {
	case ClassRateLimit:
		return "rate_limit"
	case ClassSoftRateLimit:
		return "soft_rate_limit"
	case ClassTransient:
		return "transient"
	case ClassFatal:
		return "fatal"
	case ClassAborted:
		return "aborted"
	}
	return "other"
}

// IsRateLimit reports whether c is a hard or soft rate limit.
func (c ErrorClass) IsRateLimit() bool { return c == ClassRateLimit || c == ClassSoftRateLimit }

var (
	rateLimitPatterns = []string{"rate_limit", "rate limit", "ratelimit", "too many requests"}
	transientPatterns = []string{"overloaded", "capacity", "temporarily unavailable"}
)

func containsAny(s string, pats []string) bool {
	for _, p := range pats {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// Classify sorts an error returned by a Provider. The status code decides
// first (429 rate limit; 400, 401, 403 fatal; 529 transient); otherwise the
// provider's error type and message (or, for other errors, the error text)
// are matched, case-insensitively: "rate_limit", "rate limit", "too many
// requests" → soft rate limit; "overloaded", "capacity", "temporarily
// unavailable" → transient. A context error is ClassAborted.
func Classify(err error) ErrorClass {
	if err == nil {
		return ClassOther
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ClassAborted
	}
	text := err.Error()
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.StatusCode {
		case http.StatusTooManyRequests:
			return ClassRateLimit
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
			return ClassFatal
		case 529:
			return ClassTransient
		}
		text = ae.Type + " " + ae.Message
	}
	text = strings.ToLower(text)
	switch {
	case containsAny(text, rateLimitPatterns):
		return ClassSoftRateLimit
	case containsAny(text, transientPatterns):
		return ClassTransient
	}
	return ClassOther
}

// Default cooldowns when a rate limit gives no retry-after.
const (
	HardRateLimitCooldown = 5 * time.Minute
	SoftRateLimitCooldown = 60 * time.Second
)

// Cooldown returns how long a model should rest after err: the provider's
// retry-after if it gave one, else the default for a hard or soft rate
// limit; 0 for errors that are not rate limits.
func Cooldown(err error) time.Duration {
	c := Classify(err)
	if !c.IsRateLimit() {
		return 0
	}
	var ae *APIError
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		return ae.RetryAfter
	}
	if c == ClassRateLimit {
		return HardRateLimitCooldown
	}
	return SoftRateLimitCooldown
}

// MaxRetryAfter caps a parsed retry-after, so a hostile or broken header
// cannot park a model for ever (or overflow).
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a retry-after header value: a number of seconds
// (fractions allowed) or an HTTP date, relative to now. It returns 0 for
// an empty, malformed, negative or past value, and at most MaxRetryAfter.
func ParseRetryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(h, 64); err == nil {
		return clampSeconds(secs)
	}
	t, err := http.ParseTime(h)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return min(d, MaxRetryAfter)
}

func clampSeconds(secs float64) time.Duration {
	if math.IsNaN(secs) || secs <= 0 {
		return 0
	}
	if secs >= MaxRetryAfter.Seconds() {
		return MaxRetryAfter
	}
	return time.Duration(secs * float64(time.Second))
}

// RetryAfterFromHeader reads retry-after-ms (milliseconds, sent by OpenAI
// and Anthropic) or else retry-after from a response header.
func RetryAfterFromHeader(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if ms := strings.TrimSpace(h.Get("Retry-After-Ms")); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil {
			if d := clampSeconds(v / 1000); d > 0 {
				return d
			}
		}
	}
	return ParseRetryAfter(h.Get("Retry-After"), now)
}

// ErrIncompleteStream reports a stream that ended (cleanly or not) before
// the provider said the reply was complete.
var ErrIncompleteStream = errors.New("llm: stream ended before the reply was complete")

// maxErrorBody is how much of an error body is kept as its message when
// the body is not a known JSON shape.
const maxErrorBody = 1000

// NewHTTPError builds the APIError of an HTTP error response from its
// status, header and body. It understands the JSON error bodies of
// Anthropic ({"type":"error","error":{"type","message"}}), OpenAI
// ({"error":{"message","type","code"}}) and simpler servers ({"error":"…"}
// or {"message":"…"}); any other body becomes the message as text.
func NewHTTPError(provider, model string, status int, header http.Header, body []byte, now time.Time) *APIError {
	e := &APIError{
		Provider: provider, Model: model, StatusCode: status,
		Header: header.Clone(), RetryAfter: RetryAfterFromHeader(header, now),
	}
	e.Type, e.Message = parseErrorBody(body)
	return e
}

// parseErrorBody finds the error type and message in an error body.
func parseErrorBody(body []byte) (typ, msg string) {
	if o, ok := findErrorObject(body); ok {
		return o.typ, o.msg
	}
	var v struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	if json.Unmarshal(body, &v) == nil && v.Message != "" {
		if v.Type == "error" {
			v.Type = ""
		}
		return v.Type, v.Message
	}
	text := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
	if len(text) > maxErrorBody {
		text = strings.ToValidUTF8(text[:maxErrorBody], "") + "…"
	}
	return "", text
}

// errorObject is what findErrorObject read.
type errorObject struct {
	typ, msg string
	status   int // an HTTP status class the object gives in its code, else 0
}

// ErrorObject reads data (one stream event's data, or a whole response
// body) as a provider's error object, in any of the shapes providers
// document:
//
//	{"error":{"message","type","code"}}             OpenAI, OpenRouter, z.ai, DeepSeek, Mistral
//	{"type":"error","error":{"type","message"}}     Anthropic
//	{"error":{"code":429,"message","status"}}       Google
//	{"error":"…"}                                   Ollama, simple servers
//	{"object":"error","message","type","code":400}  vLLM (older)
//	{"type":"error","code","message"}               OpenAI Responses error event
//
// It returns nil for anything else, including {"error":null} and objects
// without a message or type. A code that is an HTTP error status (400–599)
// becomes StatusCode, so that routing treats it as the provider meant (a
// context-length 400 is not retried; a 429 is a rate limit); any other
// code (z.ai's "1113") is the type when there is none.
func ErrorObject(provider, model string, data []byte) *APIError {
	o, ok := findErrorObject(data)
	if !ok {
		return nil
	}
	return &APIError{Provider: provider, Model: model, StatusCode: o.status, Type: o.typ, Message: o.msg}
}

// mayHoldError is a cheap test done before decoding: every shape has the
// word error in quotes.
func mayHoldError(data []byte) bool { return bytes.Contains(data, []byte(`"error"`)) }

func findErrorObject(data []byte) (errorObject, bool) {
	if !mayHoldError(data) {
		return errorObject{}, false
	}
	var top struct {
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Type    json.RawMessage `json:"type"`
		Message json.RawMessage `json:"message"`
		Code    json.RawMessage `json:"code"`
		Status  json.RawMessage `json:"status"`
	}
	if json.Unmarshal(data, &top) != nil {
		return errorObject{}, false
	}
	if e := bytes.TrimSpace(top.Error); len(e) > 0 && string(e) != "null" {
		var s string
		if json.Unmarshal(e, &s) == nil {
			return errorObject{msg: s}, s != ""
		}
		var inner struct {
			Type    json.RawMessage `json:"type"`
			Message json.RawMessage `json:"message"`
			Code    json.RawMessage `json:"code"`
			Status  json.RawMessage `json:"status"`
		}
		if json.Unmarshal(e, &inner) != nil {
			return errorObject{}, false
		}
		return fromFields(inner.Type, inner.Message, inner.Code, inner.Status)
	}
	if top.Object == "error" || jsonString(top.Type) == "error" {
		typ := top.Type
		if jsonString(typ) == "error" {
			typ = nil
		}
		return fromFields(typ, top.Message, top.Code, top.Status)
	}
	return errorObject{}, false
}

// fromFields builds an error object from its type, message, code and
// (Google's) status fields; it needs a message or a type.
func fromFields(typ, msg, code, status json.RawMessage) (errorObject, bool) {
	o := errorObject{typ: jsonString(typ), msg: jsonString(msg)}
	if o.typ == "" {
		o.typ = jsonString(status)
	}
	c := strings.TrimSpace(string(code))
	if s := jsonString(code); s != "" {
		c = s
	}
	if n, err := strconv.Atoi(c); err == nil && n >= 400 && n <= 599 {
		o.status = n
	} else if o.typ == "" && c != "null" && jsonString(code) != "" {
		o.typ = c
	}
	return o, o.msg != "" || o.typ != ""
}

// jsonString is the value of a JSON string, "" for anything else.
func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
