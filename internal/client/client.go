// Package client is the Go client of the gateway's HTTP API (http-api.md)
// that the terminal client uses: health, agents, models, sessions, core tool
// calls, the streaming LLM proxy and the session hooks. It also holds
// RemoteModel and RemoteTools, the agent.Model and agent.Tools that run the
// agent loop in another process through that API, so that the process
// holds no API key and reaches no sandbox itself. It takes the wire types
// from internal/proto and internal/proto/llmproto, never from the server
// (internal/deptest checks it).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// DefaultURL is the gateway's default address.
const DefaultURL = "http://127.0.0.1:7433"

// Channel is the channel the terminal client names in hook calls.
const Channel = "tui"

// maxBody bounds a JSON answer read into memory.
const maxBody = 32 << 20

// Client talks to one gateway. Its zero value is not usable: use New. It is
// safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// Options configures a Client; nil means the defaults.
type Options struct {
	// Token is sent as "Authorization: Bearer <token>" (gateway.authToken).
	Token string
	// HTTPClient makes the requests; default a client without an overall
	// timeout (model streams and tool calls may take long: bound them with
	// the context).
	HTTPClient *http.Client
}

// New returns a client of the gateway at baseURL (such as DefaultURL).
func New(baseURL string, opts *Options) *Client {
	if opts == nil {
		opts = &Options{}
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: opts.Token, http: opts.HTTPClient}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport}
	}
	return c
}

// BaseURL returns the gateway's address.
func (c *Client) BaseURL() string { return c.base }

// Error is an error answer of the gateway: its HTTP status and the text of
// its {"error": …} body.
type Error struct {
	Method, Path string
	Status       int
	Msg          string
	body         []byte // the raw answer, for Health
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %s (HTTP %d)", e.Method, e.Path, e.Msg, e.Status)
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// UnreachableError says no gateway answers at the address.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the gateway at %s: is it running? beige gateway start", e.URL)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// IsUnreachable reports whether err says the gateway does not answer.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}

// do sends a request and returns the response when its status is 2xx; any
// other status becomes an *Error. The caller closes the body.
func (c *Client) do(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		if isDialError(err) {
			return nil, &UnreachableError{URL: c.base, Err: err}
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Method: method, Path: path, Status: resp.StatusCode, body: data}
	var eb proto.ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		e.Msg = eb.Error
	} else {
		e.Msg = strings.TrimSpace(string(data))
		if e.Msg == "" {
			e.Msg = http.StatusText(resp.StatusCode)
		}
		if len(e.Msg) > 300 {
			cut := 300 // on a rune boundary: the text is shown to a user
			for cut > 0 && !utf8.RuneStart(e.Msg[cut]) {
				cut--
			}
			e.Msg = e.Msg[:cut] + "…"
		}
	}
	return nil, e
}

// isDialError reports whether err happened while connecting: nothing
// listens, or the host is unknown or unreachable.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// getJSON decodes the JSON answer of a request into out.
func (c *Client) getJSON(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: bad answer: %w", method, path, err)
	}
	return nil
}

func agentPath(agentName, rest string) string {
	return "/api/agents/" + url.PathEscape(agentName) + rest
}

// Health returns GET /api/health. A gateway that is not ready answers 503
// with its health; that is returned without an error.
func (c *Client) Health(ctx context.Context) (proto.Health, error) {
	var h proto.Health
	err := c.getJSON(ctx, http.MethodGet, "/api/health", nil, &h)
	if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusServiceUnavailable {
		var h2 proto.Health
		if json.Unmarshal(e.body, &h2) == nil && h2.Status != "" {
			return h2, nil
		}
	}
	return h, err
}

// Agents returns GET /api/agents.
func (c *Client) Agents(ctx context.Context) ([]proto.AgentInfo, error) {
	var l proto.AgentList
	if err := c.getJSON(ctx, http.MethodGet, "/api/agents", nil, &l); err != nil {
		return nil, err
	}
	return l.Agents, nil
}

// Models returns GET /api/agents/:name/models: the agent's primary model
// first, then its fallbacks.
func (c *Client) Models(ctx context.Context, agentName string) ([]llmproto.AgentModel, error) {
	var out struct {
		Models []llmproto.AgentModel `json:"models"`
	}
	if err := c.getJSON(ctx, http.MethodGet, agentPath(agentName, "/models"), nil, &out); err != nil {
		return nil, err
	}
	return out.Models, nil
}

// Sessions returns GET /api/agents/:name/sessions: the gateway's sessions
// of the agent.
func (c *Client) Sessions(ctx context.Context, agentName string) ([]proto.SessionInfo, error) {
	var out struct {
		Sessions []proto.SessionInfo `json:"sessions"`
	}
	if err := c.getJSON(ctx, http.MethodGet, agentPath(agentName, "/sessions"), nil, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// Exec runs a core tool with POST /api/agents/:name/exec. Bad parameters
// give an *Error with status 400, an unknown agent one with 404.
func (c *Client) Exec(ctx context.Context, agentName string, req proto.ExecRequest) (proto.ToolResult, error) {
	var res proto.ToolResult
	err := c.getJSON(ctx, http.MethodPost, agentPath(agentName, "/exec"), req, &res)
	return res, err
}

// Session hook names of SessionHook.
const (
	HookSessionCreated  = proto.HookSessionCreated
	HookSessionDisposed = proto.HookSessionDisposed
)

// SessionHook fires a session hook (HookSessionCreated or
// HookSessionDisposed) with POST /api/agents/:name/hooks/<hook>, for the
// session key on the tui channel.
func (c *Client) SessionHook(ctx context.Context, agentName, hook, sessionKey string) error {
	if hook != HookSessionCreated && hook != HookSessionDisposed {
		return fmt.Errorf("client: unknown session hook %q", hook)
	}
	body := proto.SessionHookRequest{SessionKey: sessionKey, Channel: Channel}
	return c.getJSON(ctx, http.MethodPost, agentPath(agentName, "/hooks/"+hook), body, nil)
}

// defaultTimeout bounds the short calls of a caller that gives no deadline.
const defaultTimeout = 30 * time.Second

// WithTimeout returns ctx bounded by the default timeout of short calls
// unless it has a deadline already.
func WithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, defaultTimeout)
}

// Approvals returns GET /api/approvals: the tool calls that wait for a
// human's answer.
func (c *Client) Approvals(ctx context.Context) ([]proto.ApprovalRequest, error) {
	var l proto.ApprovalList
	if err := c.getJSON(ctx, "GET", "/api/approvals", nil, &l); err != nil {
		return nil, err
	}
	return l.Approvals, nil
}

// AnswerApproval answers one (POST /api/approvals/:id): decision is
// "approve", "deny" or "always"; via names the client ("tui").
func (c *Client) AnswerApproval(ctx context.Context, id, decision, via string) error {
	return c.getJSON(ctx, "POST", "/api/approvals/"+url.PathEscape(id), proto.ApprovalAnswer{Decision: decision, Via: via}, nil)
}
