// Package anthropic implements the "anthropic-messages" API (Anthropic's
// Messages API and compatible endpoints such as z.ai or proxies) on top of
// github.com/anthropics/anthropic-sdk-go/v2, streaming.
//
// The SDK is tamed so that it behaves like the API the endpoints expect:
// it never reads ANTHROPIC_* variables or profile files (only the
// configured key and base URL are used), it sends "x-api-key" and
// "anthropic-version: 2023-06-01" (not the SDK's bearer token and newer
// version, which compatible endpoints may not know), and it never retries:
// the gateway's fallback loop is the only retry loop.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/beige-dev/beige/internal/llm"
)

// API is the name this package registers.
const API = llm.APIAnthropicMessages

// Version is the anthropic-version header sent on every request.
const Version = "2023-06-01"

// Beta is the anthropic-beta header sent on every request, as pi does:
// streamed tool arguments and thinking between tool calls.
const Beta = "fine-grained-tool-streaming-2025-05-14,interleaved-thinking-2025-05-14"

func init() { llm.RegisterAPI(API, New) }

// Provider talks to one configured Anthropic-compatible endpoint.
type Provider struct {
	name    string
	apiKey  string
	baseURL string
	client  sdk.Client
}

var _ llm.Provider = (*Provider)(nil)

// New builds a provider from cfg. An empty BaseURL means Anthropic's API.
func New(cfg llm.ProviderConfig) (llm.Provider, error) {
	base := cfg.BaseURL
	if base == "" {
		base = llm.AnthropicBaseURL
	}
	if err := llm.CheckBaseURL(base); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = llm.DefaultHTTPClient()
	}
	hc = llm.NoRedirects(hc) // the key must not follow a redirect to another host
	p := &Provider{name: cfg.Name, apiKey: cfg.APIKey, baseURL: base}
	p.client = sdk.NewClient(
		option.WithoutEnvironmentDefaults(), // no ANTHROPIC_* env, no profiles
		option.WithHTTPClient(hc),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithMiddleware(p.authenticate),
	)
	return p, nil
}

// authenticate is the last word on the auth headers, right before the
// request leaves: the configured key as x-api-key, the 2023-06-01 API
// version, and no Authorization header whatever any SDK default did.
func (p *Provider) authenticate(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	req.Header.Del("Authorization")
	req.Header.Del("X-Api-Key")
	if p.apiKey != "" {
		req.Header.Set("X-Api-Key", p.apiKey)
	}
	req.Header.Set("Anthropic-Version", Version)
	return next(req)
}

// reservedHeaders cannot be set through Options.Headers.
var reservedHeaders = map[string]bool{
	"authorization": true, "x-api-key": true, "anthropic-version": true,
	"content-type": true, "content-length": true, "host": true,
}

// Stream sends one request and streams the reply; see llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	b := llm.NewBuilder(req.Model, emit)
	b.Start()

	params, thinking := buildParams(req)
	capture := new(llm.ResponseCapture)
	opts := []option.RequestOption{
		option.WithHeader("Anthropic-Beta", Beta),
		option.WithMiddleware(capture.Middleware),
	}
	if req.Model.BaseURL != "" && req.Model.BaseURL != p.baseURL {
		opts = append(opts, option.WithBaseURL(req.Model.BaseURL))
	}
	if t := req.Options.Temperature; t != nil && !thinking {
		opts = append(opts, option.WithJSONSet("temperature", *t))
	}
	for k, v := range req.Options.Headers {
		if !reservedHeaders[strings.ToLower(k)] {
			opts = append(opts, option.WithHeader(k, v))
		}
	}

	stream := p.client.Messages.NewStreaming(ctx, params, opts...)
	defer func() { _ = stream.Close() }()

	var (
		blocks  = map[int64]int{} // Anthropic block index → content index
		partial = map[int64]bool{}
		initial = map[int64]string{} // tool input given whole at block start
		sawStop bool
		stopRaw string
		failure error
	)
	usage := llm.Usage{}
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			u := ev.Message.Usage
			usage.Input = int(u.InputTokens)
			usage.Output = int(u.OutputTokens)
			usage.CacheRead = int(u.CacheReadInputTokens)
			usage.CacheWrite = int(u.CacheCreationInputTokens)
			b.SetUsage(usage)
		case "content_block_start":
			cb := ev.ContentBlock
			switch cb.Type {
			case "text":
				i := b.BeginText()
				blocks[ev.Index] = i
				b.AppendText(i, cb.Text)
			case "thinking":
				i := b.BeginThinking()
				blocks[ev.Index] = i
				b.AppendThinking(i, cb.Thinking)
				b.AppendSignature(i, cb.Signature)
			case "redacted_thinking":
				b.AddRedactedThinking(cb.Data)
			case "tool_use":
				i := b.BeginToolCall(cb.ID, cb.Name)
				blocks[ev.Index] = i
				if raw := cb.JSON.Input.Raw(); raw != "" && raw != "{}" && raw != "null" {
					initial[ev.Index] = raw
				}
			}
		case "content_block_delta":
			i, ok := blocks[ev.Index]
			if !ok {
				continue
			}
			switch d := ev.Delta; d.Type {
			case "text_delta":
				b.AppendText(i, d.Text)
			case "thinking_delta":
				b.AppendThinking(i, d.Thinking)
			case "signature_delta":
				b.AppendSignature(i, d.Signature)
			case "input_json_delta":
				if d.PartialJSON != "" {
					partial[ev.Index] = true
				}
				b.AppendToolCall(i, d.PartialJSON)
			}
		case "content_block_stop":
			i, ok := blocks[ev.Index]
			if !ok {
				continue
			}
			if raw, ok := initial[ev.Index]; ok && !partial[ev.Index] {
				b.AppendToolCall(i, raw)
			}
			b.End(i)
			delete(blocks, ev.Index)
		case "message_delta":
			if r := string(ev.Delta.StopReason); r != "" {
				sawStop, stopRaw = true, r
				b.SetStopReason(mapStopReason(r))
			}
			u := ev.Usage
			if u.JSON.InputTokens.Valid() {
				usage.Input = int(u.InputTokens)
			}
			if u.JSON.OutputTokens.Valid() {
				usage.Output = int(u.OutputTokens)
			}
			if u.JSON.CacheReadInputTokens.Valid() {
				usage.CacheRead = int(u.CacheReadInputTokens)
			}
			if u.JSON.CacheCreationInputTokens.Valid() {
				usage.CacheWrite = int(u.CacheCreationInputTokens)
			}
			b.SetUsage(usage)
		case "message_stop":
			sawStop = true
		case "ping":
		default:
			// An error object in another server's shape (the SDK handles
			// "event: error" itself).
			if ae := llm.ErrorObject(p.name, req.Model.ID, []byte(ev.RawJSON())); ae != nil {
				failure = ae
			}
		}
		if failure != nil {
			break
		}
	}

	if err := stream.Err(); err != nil || ctx.Err() != nil {
		return b.Fail(ctx, p.apiError(err, capture, req.Model.ID))
	}
	if failure != nil {
		return b.Fail(ctx, failure)
	}
	if !sawStop {
		// The error object a server sent instead of a stream (an HTTP 200
		// JSON body), if any.
		if ae := capture.APIError(p.name, req.Model.ID); ae != nil {
			return b.Fail(ctx, ae)
		}
		return b.Fail(ctx, fmt.Errorf("%s %s: %w", p.name, req.Model.ID, llm.ErrIncompleteStream))
	}
	if b.StopReason() == llm.StopReasonError {
		return b.Fail(ctx, &llm.APIError{
			Provider: p.name, Model: req.Model.ID, Type: stopRaw,
			Message: "the model declined to answer (stop_reason " + stopRaw + ")",
		})
	}
	return b.Finish()
}

// apiError turns what the SDK returned into an *APIError where the provider
// reported one: an HTTP error response (from the capture, which keeps the
// status and headers), or an "error" event in the stream (status 0).
func (p *Provider) apiError(err error, capture *llm.ResponseCapture, model string) error {
	if ae := capture.APIError(p.name, model); ae != nil {
		return ae
	}
	var se *sdk.Error
	if errors.As(err, &se) {
		ae := &llm.APIError{Provider: p.name, Model: model, Type: string(se.Type()), Message: se.Message}
		if se.StatusCode >= 400 {
			ae.StatusCode = se.StatusCode
		}
		if ae.Message == "" {
			ae.Message = strings.TrimSpace(se.RawJSON())
		}
		return ae
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", p.name, model, err)
}

// mapStopReason maps Anthropic's stop_reason. Unknown reasons count as a
// normal stop rather than failing a reply that arrived.
func mapStopReason(r string) llm.StopReason {
	switch r {
	case "max_tokens", "model_context_window_exceeded":
		return llm.StopReasonLength
	case "tool_use":
		return llm.StopReasonToolUse
	case "refusal", "sensitive":
		return llm.StopReasonError
	}
	return llm.StopReasonStop // end_turn, stop_sequence, pause_turn, …
}
