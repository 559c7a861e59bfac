// Package google implements the "google-generative-ai" API (the Gemini API,
// generativelanguage.googleapis.com, and proxies that speak it) on top of
// Google's official SDK, google.golang.org/genai, streaming
// (models/{model}:streamGenerateContent?alt=sse).
//
// The SDK is tamed like the others: it never sees a key from the
// environment (GOOGLE_API_KEY, GEMINI_API_KEY) or Application Default
// Credentials — the client is always built for the Gemini API backend with
// a placeholder key, and the transport replaces the x-goog-api-key header
// with the configured key (or removes it) right before a request leaves —;
// the base URL is always given, so GOOGLE_GEMINI_BASE_URL is never read;
// and it never retries: no retry options, and automatic stream
// continuation (a reconnect) is off. The gateway's fallback loop is the
// only retry loop.
package google

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/beige-dev/beige/internal/llm"
)

// API is the name this package registers.
const API = llm.APIGoogleGenerativeAI

func init() { llm.RegisterAPI(API, New) }

// placeholderKey is the key the SDK is built with so that it never looks
// for one in the environment; the transport never lets it leave.
const placeholderKey = "beige-placeholder-key"

// Provider talks to one configured Gemini API endpoint.
type Provider struct {
	name    string
	apiKey  string
	baseURL string
	hc      *http.Client
	models  *genai.Models
}

var _ llm.Provider = (*Provider)(nil)

// New builds a provider from cfg. An empty BaseURL means Google's Gemini
// API (llm.GoogleBaseURL). A base URL ending in an API version segment
// ("/v1beta", "/v1") uses that version; otherwise v1beta is added.
func New(cfg llm.ProviderConfig) (llm.Provider, error) {
	base := cfg.BaseURL
	if base == "" {
		base = llm.GoogleBaseURL
	}
	if err := llm.CheckBaseURL(base); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = llm.DefaultHTTPClient()
	}
	p := &Provider{name: cfg.Name, apiKey: cfg.APIKey, baseURL: base, hc: hc}
	root, version := splitVersion(base)
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      placeholderKey, // never empty: the SDK would read GOOGLE_API_KEY/GEMINI_API_KEY
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{Transport: p, CheckRedirect: llm.RefuseRedirect},
		HTTPOptions: genai.HTTPOptions{BaseURL: root, APIVersion: version},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini client: %w", err)
	}
	p.models = client.Models
	return p, nil
}

var versionRE = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]*)?$`)

// splitVersion cuts a trailing API version segment off a base URL:
// "https://host/v1beta" → "https://host/", "v1beta". Without one the
// version is v1beta.
func splitVersion(base string) (root, version string) {
	u, err := url.Parse(base)
	if err != nil {
		return base, "v1beta"
	}
	p := strings.TrimRight(u.Path, "/")
	i := strings.LastIndexByte(p, '/')
	if last := p[i+1:]; versionRE.MatchString(last) {
		u.Path = p[:i+1]
		return u.String(), last
	}
	return base, "v1beta"
}

// reservedHeaders cannot be set through Options.Headers.
var reservedHeaders = map[string]bool{
	"authorization": true, "x-goog-api-key": true, "x-goog-api-client": true,
	"content-type": true, "content-length": true, "host": true,
}

type stateKey struct{}

// RoundTrip is the last word on authentication, right before a request
// leaves: the configured key as x-goog-api-key, no Authorization header
// and no key in the query, whatever the SDK did. Redirects are not
// followed. It also feeds the request's error capture.
func (p *Provider) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Del("Authorization")
	r.Header.Del("X-Goog-Api-Key")
	if p.apiKey != "" {
		r.Header.Set("X-Goog-Api-Key", p.apiKey)
	}
	if q := r.URL.Query(); q.Has("key") {
		q.Del("key")
		r.URL.RawQuery = q.Encode()
	}
	// The configured client's transport, not the client: a redirect must
	// not carry the key to another host (net/http keeps custom headers
	// such as x-goog-api-key across hosts).
	t := p.hc.Transport
	if t == nil {
		t = http.DefaultTransport
	}
	st, ok := req.Context().Value(stateKey{}).(*reqState)
	if !ok {
		return t.RoundTrip(r)
	}
	res, err := st.capture.Middleware(r, t.RoundTrip)
	if err == nil && res != nil && res.StatusCode < 300 && res.Body != nil &&
		strings.HasPrefix(strings.ToLower(res.Header.Get("Content-Type")), "text/event-stream") {
		res.Body = newSSEReader(res.Body, st)
		res.ContentLength = -1
	}
	return res, err
}

// Stream sends one request and streams the reply; see llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	b := llm.NewBuilder(req.Model, emit)
	b.Start()

	st := new(reqState)
	ctx = context.WithValue(ctx, stateKey{}, st)
	contents, config := buildRequest(req)
	config.AutomaticContinuation = genai.Ptr(false) // a reconnect is a retry
	hopts := &genai.HTTPOptions{Headers: http.Header{}}
	if base := req.Model.BaseURL; base != "" && base != p.baseURL {
		if err := llm.CheckBaseURL(base); err != nil {
			return b.Fail(ctx, fmt.Errorf("%s %s: %w", p.name, req.Model.ID, err))
		}
		hopts.BaseURL, hopts.APIVersion = splitVersion(base)
	}
	for k, v := range req.Options.Headers {
		if !reservedHeaders[strings.ToLower(k)] {
			hopts.Headers.Set(k, v)
		}
	}
	config.HTTPOptions = hopts

	var (
		textIdx  = -1
		thinkIdx = -1
		calls    int
		finish   genai.FinishReason
		finMsg   string
		blocked  string
		usage    llm.Usage
		haveUse  bool
		err      error
	)
	endIfOpen := func(i int) {
		if b.IsOpen(i) {
			b.End(i)
		}
	}
	for resp, e := range p.models.GenerateContentStream(ctx, req.Model.ID, contents, config) {
		if e != nil {
			err = e
			break
		}
		if resp == nil {
			continue
		}
		if u := resp.UsageMetadata; u != nil {
			cached := int(u.CachedContentTokenCount)
			usage = llm.Usage{
				Input:     max(0, int(u.PromptTokenCount)-cached),
				Output:    int(u.CandidatesTokenCount) + int(u.ThoughtsTokenCount),
				CacheRead: cached,
			}
			haveUse = true
		}
		if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" {
			blocked = string(pf.BlockReason)
			if pf.BlockReasonMessage != "" {
				blocked += ": " + pf.BlockReasonMessage
			}
		}
		if len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
			continue
		}
		cand := resp.Candidates[0]
		if cand.Content != nil {
			for _, part := range cand.Content.Parts {
				if part == nil {
					continue
				}
				sig := ""
				if len(part.ThoughtSignature) > 0 {
					sig = base64.StdEncoding.EncodeToString(part.ThoughtSignature)
				}
				switch {
				case part.FunctionCall != nil:
					endIfOpen(textIdx)
					endIfOpen(thinkIdx)
					fc := part.FunctionCall
					id := fc.ID
					if id == "" {
						id = newCallID()
					}
					i := b.BeginToolCall(id, fc.Name)
					args, jerr := jsonObject(fc.Args)
					if jerr == nil {
						b.AppendToolCall(i, args)
					}
					b.SetToolCallSignature(i, sig)
					b.End(i)
					calls++
				case part.Thought:
					if !b.IsOpen(thinkIdx) {
						endIfOpen(textIdx)
						thinkIdx = b.BeginThinking()
					}
					if part.Text != "" {
						b.AppendThinking(thinkIdx, part.Text)
					}
					if sig != "" {
						b.SetThinkingSignature(thinkIdx, sig)
					}
				case part.Text != "" || sig != "":
					if !b.IsOpen(textIdx) {
						if part.Text == "" && b.IsOpen(thinkIdx) {
							// A signature alone, right after thinking, belongs to it.
							b.SetThinkingSignature(thinkIdx, sig)
							continue
						}
						endIfOpen(thinkIdx)
						textIdx = b.BeginText()
					}
					if part.Text != "" {
						b.AppendText(textIdx, part.Text)
					}
					if sig != "" {
						b.SetTextSignature(textIdx, sig)
					}
				}
			}
		}
		if cand.FinishReason != "" && cand.FinishReason != genai.FinishReasonUnspecified {
			finish, finMsg = cand.FinishReason, cand.FinishMessage
		}
	}
	if haveUse {
		b.SetUsage(usage)
	}
	var ge genai.APIError
	if ae := st.streamError(p.name, req.Model.ID); ae != nil && ctx.Err() == nil && !errors.As(err, &ge) {
		return b.Fail(ctx, ae) // an error object in the stream in a shape the SDK does not know
	}
	if err != nil || ctx.Err() != nil {
		return b.Fail(ctx, p.apiError(err, &st.capture, req.Model.ID))
	}
	if blocked != "" && finish == "" {
		return b.Fail(ctx, &llm.APIError{
			Provider: p.name, Model: req.Model.ID, Type: "prompt_blocked",
			Message: "the prompt was blocked by the provider: " + blocked,
		})
	}
	if finish == "" {
		if ae := st.capture.APIError(p.name, req.Model.ID); ae != nil {
			return b.Fail(ctx, ae) // an error object instead of a stream
		}
		return b.Fail(ctx, fmt.Errorf("%s %s: %w", p.name, req.Model.ID, llm.ErrIncompleteStream))
	}
	b.EndAll()
	switch finish {
	case genai.FinishReasonStop:
		if calls > 0 {
			b.SetStopReason(llm.StopReasonToolUse)
		} else {
			b.SetStopReason(llm.StopReasonStop)
		}
	case genai.FinishReasonMaxTokens:
		b.SetStopReason(llm.StopReasonLength)
	default:
		return b.Fail(ctx, &llm.APIError{
			Provider: p.name, Model: req.Model.ID, Type: string(finish),
			Message: finishMessage(finish, finMsg),
		})
	}
	return b.Finish()
}

// finishMessage explains a finish reason that is a failure.
func finishMessage(r genai.FinishReason, msg string) string {
	if msg != "" {
		return msg
	}
	switch r {
	case genai.FinishReasonMalformedFunctionCall:
		return "the model produced a malformed function call"
	case genai.FinishReasonSafety, genai.FinishReasonProhibitedContent, genai.FinishReasonBlocklist,
		genai.FinishReasonSPII, genai.FinishReasonImageSafety:
		return "the reply was stopped by the provider's safety filter"
	case genai.FinishReasonRecitation:
		return "the reply was stopped because it recited its training data"
	}
	return "the reply was stopped by the provider (" + string(r) + ")"
}

// apiError turns what the SDK returned into an *APIError where the server
// reported one: an HTTP error response (status and headers from the
// capture), or an error object in the stream, whose code is the status
// class the provider gave it.
func (p *Provider) apiError(err error, capture *llm.ResponseCapture, model string) error {
	if ae := capture.APIError(p.name, model); ae != nil {
		var ge genai.APIError
		if errors.As(err, &ge) {
			fillFromGenai(ae, ge)
		}
		return ae
	}
	var ge genai.APIError
	if errors.As(err, &ge) {
		ae := &llm.APIError{Provider: p.name, Model: model}
		if ge.Code >= 400 && ge.Code <= 599 {
			ae.StatusCode = ge.Code
		}
		fillFromGenai(ae, ge)
		if ae.Message == "" {
			ae.Message = ge.Error()
		}
		return ae
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", p.name, model, err)
}

// fillFromGenai takes the status name ("RESOURCE_EXHAUSTED"), the message
// and a RetryInfo delay from Google's error object.
func fillFromGenai(ae *llm.APIError, ge genai.APIError) {
	if ge.Status != "" && !strings.Contains(ge.Status, " ") { // not an HTTP status line
		ae.Type = ge.Status
	}
	if ge.Message != "" && (ae.Message == "" || strings.HasPrefix(strings.TrimSpace(ae.Message), "{")) {
		ae.Message = ge.Message
	}
	if ae.RetryAfter == 0 {
		ae.RetryAfter = retryDelay(ge.Details)
	}
}

// retryDelay reads google.rpc.RetryInfo's retryDelay ("23s", "1.5s").
func retryDelay(details []map[string]any) time.Duration {
	for _, d := range details {
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		s, _ := d["retryDelay"].(string)
		if s == "" {
			continue
		}
		dur, err := time.ParseDuration(s)
		if err != nil || dur <= 0 {
			continue
		}
		return min(dur, llm.MaxRetryAfter)
	}
	return 0
}
