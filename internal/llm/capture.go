package llm

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ResponseCapture keeps the status, header and body of an error response
// seen by its Middleware, so that a provider builds the same APIError
// whatever its SDK made of the response (an SDK may fail to parse a body
// that is not JSON and lose the status). It also keeps the error object of
// a successful (2xx) response that is JSON rather than a stream — some
// servers (z.ai) answer a stream request with HTTP 200 and
// {"error":{"code":"1113","message":"Insufficient balance…"}}, which SDKs
// read as an empty stream. Use one per request.
type ResponseCapture struct {
	mu      sync.Mutex
	status  int
	header  http.Header
	body    []byte
	bodyErr *APIError // error object of a 2xx JSON body
}

// maxCapturedBody bounds how much of an error body is read.
const maxCapturedBody = 64 << 10

// Middleware is an HTTP middleware in the shape both SDKs accept
// (option.Middleware). For a response with status ≥ 400 it reads the body
// (up to 64 KiB), keeps a copy and hands the SDK an identical body.
func (c *ResponseCapture) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil {
		return res, err
	}
	if res.StatusCode < 400 {
		c.peekJSON(res)
		return res, nil
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

// peekJSON reads the start of a 2xx body that is not an event stream (up
// to 64 KiB) and keeps its error object, if it is one; the SDK still gets
// the whole body, unchanged.
func (c *ResponseCapture) peekJSON(res *http.Response) {
	ct := strings.ToLower(res.Header.Get("Content-Type"))
	if res.Body == nil || strings.HasPrefix(ct, "text/event-stream") || !strings.Contains(ct, "json") {
		return
	}
	head, _ := io.ReadAll(io.LimitReader(res.Body, maxCapturedBody))
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), res.Body), res.Body}
	if ae := ErrorObject("", "", head); ae != nil {
		ae.Header = res.Header.Clone()
		c.mu.Lock()
		c.bodyErr = ae
		c.mu.Unlock()
	}
}

// APIError returns the APIError of the captured error response (or of the
// error object of a 2xx JSON body), or nil if none was seen.
func (c *ResponseCapture) APIError(provider, model string) *APIError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == 0 {
		if c.bodyErr == nil {
			return nil
		}
		ae := *c.bodyErr
		ae.Provider, ae.Model = provider, model
		ae.Header = ae.Header.Clone()
		return &ae
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
