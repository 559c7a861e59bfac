package llm

import (
	"bufio"
	"bytes"
	"io"
	"mime"
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

// peekJSON keeps the error object of a 2xx JSON body (application/json or
// +json; not an event stream, not NDJSON). It reads a body only when its
// first non-blank byte opens an object — so a stream mislabelled as JSON
// is handed on at once — and then at most 64 KiB of it; the SDK still gets
// the whole body, unchanged.
func (c *ResponseCapture) peekJSON(res *http.Response) {
	mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if res.Body == nil || err != nil || mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return
	}
	br := bufio.NewReader(res.Body)
	res.Body = struct {
		io.Reader
		io.Closer
	}{br, res.Body}
	if first := firstNonSpace(br, 512); first != '{' {
		return
	}
	head, _ := io.ReadAll(io.LimitReader(br, maxCapturedBody))
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), br), res.Body}
	if ae := ErrorObject("", "", head); ae != nil {
		ae.Header = res.Header.Clone()
		c.mu.Lock()
		c.bodyErr = ae
		c.mu.Unlock()
	}
}

// firstNonSpace peeks at the first byte of br that is not JSON white
// space, among the first limit bytes; 0 if none.
func firstNonSpace(br *bufio.Reader, limit int) byte {
	for i := 1; i <= limit; i++ {
		b, err := br.Peek(i)
		if len(b) < i {
			return 0
		}
		switch ch := b[i-1]; ch {
		case ' ', '\t', '\r', '\n':
		default:
			return ch
		}
		if err != nil {
			return 0
		}
	}
	return 0
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
