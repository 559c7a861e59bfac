package llm

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// ResponseCapture keeps the status, header and body of an error response
// seen by its Middleware, so that a provider builds the same APIError
// whatever its SDK made of the response (an SDK may fail to parse a body
// that is not JSON and lose the status). Use one per request.
type ResponseCapture struct {
	mu     sync.Mutex
	status int
	header http.Header
	body   []byte
}

// maxCapturedBody bounds how much of an error body is read.
const maxCapturedBody = 64 << 10

// Middleware is an HTTP middleware in the shape both SDKs accept
// (option.Middleware). For a response with status ≥ 400 it reads the body
// (up to 64 KiB), keeps a copy and hands the SDK an identical body.
func (c *ResponseCapture) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxCapturedBody))
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	c.mu.Lock()
	c.status, c.header, c.body = res.StatusCode, res.Header.Clone(), body
	c.mu.Unlock()
	return res, nil
}

// APIError returns the APIError of the captured error response, or nil if
// none was seen.
func (c *ResponseCapture) APIError(provider, model string) *APIError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == 0 {
		return nil
	}
	return NewHTTPError(provider, model, c.status, c.header, c.body, time.Now())
}

var (
	defaultClientOnce sync.Once
	defaultClient     *http.Client
)

// DefaultHTTPClient is the client providers use when the config gives
// none: a transport of its own (cloned from http.DefaultTransport) and no
// overall timeout, since a stream may last many minutes; requests end
// through their context.
func DefaultHTTPClient() *http.Client {
	defaultClientOnce.Do(func() {
		t, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			defaultClient = &http.Client{}
			return
		}
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		defaultClient = &http.Client{Transport: t}
	})
	return defaultClient
}
