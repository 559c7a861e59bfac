// Package openai implements the "openai-completions" API (OpenAI chat
// completions, and every server that speaks it: Ollama, vLLM, llama.cpp,
// z.ai, OpenRouter, …) on top of github.com/openai/openai-go/v3, streaming.
//
// The SDK's client constructor reads OPENAI_API_KEY, OPENAI_BASE_URL,
// OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_CUSTOM_HEADERS and more from the
// environment and offers no public way to stop it, so this package never
// calls it: it builds the services it needs directly with only the
// configured key, base URL and HTTP client, and with retries off (the
// gateway's fallback loop is the only retry loop).
//
// It also implements the Responses API ("openai-responses"); see
// ResponsesProvider.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/beige-dev/beige/internal/llm"
)

// API is the name this package registers.
const API = llm.APIOpenAICompletions

func init() { llm.RegisterAPI(API, New) }

// Provider talks to one configured OpenAI-compatible endpoint.
type Provider struct {
	name    string
	apiKey  string
	baseURL string
	chat    sdk.ChatCompletionService
}

var _ llm.Provider = (*Provider)(nil)

// New builds a chat completions provider from cfg. An empty BaseURL means
// OpenAI's API.
func New(cfg llm.ProviderConfig) (llm.Provider, error) {
	opts, base, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	// Not sdk.NewClient: it would read OPENAI_* from the environment.
	return &Provider{name: cfg.Name, apiKey: cfg.APIKey, baseURL: base, chat: sdk.NewChatCompletionService(opts...)}, nil
}

// clientOptions are the SDK options of a configured provider: its HTTP
// client, base URL and key, and no retries. Nothing comes from the
// environment.
func clientOptions(cfg llm.ProviderConfig) ([]option.RequestOption, string, error) {
	base := cfg.BaseURL
	if base == "" {
		base = llm.OpenAIBaseURL
	}
	if err := llm.CheckBaseURL(base); err != nil {
		return nil, "", err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = llm.DefaultHTTPClient()
	}
	hc = llm.NoRedirects(hc) // the key must not follow a redirect to another host
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return opts, base, nil
}

// requestOptions are the per-request options: the error capture, the
// model's own base URL when it differs, and extra headers.
func requestOptions(req llm.Request, defaultBase string, capture *llm.ResponseCapture) ([]option.RequestOption, string) {
	base := defaultBase
	if req.Model.BaseURL != "" {
		base = req.Model.BaseURL
	}
	opts := []option.RequestOption{option.WithMiddleware(capture.Middleware)}
	if base != defaultBase {
		opts = append(opts, option.WithBaseURL(base))
	}
	for k, v := range req.Options.Headers {
		if !reservedHeaders[strings.ToLower(k)] {
			opts = append(opts, option.WithHeader(k, v))
		}
	}
	return opts, base
}

// reservedHeaders cannot be set through Options.Headers.
var reservedHeaders = map[string]bool{
	"authorization": true, "content-type": true, "content-length": true, "host": true,
}

// Stream sends one request and streams the reply; see llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	b := llm.NewBuilder(req.Model, emit)
	b.Start()

	capture := new(llm.ResponseCapture)
	opts, base := requestOptions(req, p.baseURL, capture)
	params := buildParams(req, isOfficial(base))
	stream := p.chat.NewStreaming(ctx, params, opts...)
	defer func() { _ = stream.Close() }()

	var (
		tools     = map[int64]int{} // OpenAI tool call index → content index
		toolIDs   = map[int64]string{}
		calls     int
		textIdx   = -1
		thinkIdx  = -1
		finish    string
		usage     llm.Usage
		haveUsage bool
	)
	endIfOpen := func(i int) {
		if b.IsOpen(i) {
			b.End(i)
		}
	}
	var failure error
	for stream.Next() {
		chunk := stream.Current()
		// An error object without an "error" key (older vLLM's
		// {"object":"error",…}), which the SDK takes for a chunk.
		if ae := llm.ErrorObject(p.name, req.Model.ID, []byte(chunk.RawJSON())); ae != nil {
			failure = ae
			break
		}
		if chunk.JSON.Usage.Valid() {
			u := chunk.Usage
			cached := int(u.PromptTokensDetails.CachedTokens)
			usage = llm.Usage{
				Input:      max(0, int(u.PromptTokens)-cached),
				Output:     int(u.CompletionTokens),
				CacheRead:  cached,
				CacheWrite: int(u.PromptTokensDetails.CacheWriteTokens),
			}
			haveUsage = true
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		ch := chunk.Choices[0]
		d := ch.Delta

		// Reasoning, as llama.cpp, vLLM, DeepSeek (reasoning_content) or
		// OpenRouter and others (reasoning) send it.
		for _, field := range reasoningFields {
			s := extraString(d.JSON.ExtraFields, field)
			if s == "" {
				continue
			}
			if !b.IsOpen(thinkIdx) {
				endIfOpen(textIdx)
				thinkIdx = b.BeginThinking()
				b.SetThinkingSignature(thinkIdx, field)
			}
			b.AppendThinking(thinkIdx, s)
		}
		// A refusal is shown as the reply's text.
		for _, s := range [...]string{d.Content, d.Refusal} {
			if s == "" {
				continue
			}
			if !b.IsOpen(textIdx) {
				endIfOpen(thinkIdx)
				textIdx = b.BeginText()
			}
			b.AppendText(textIdx, s)
		}
		for _, tc := range d.ToolCalls {
			// A call is new when its index is new, or when a different id
			// arrives at a known index (some servers put every call at 0).
			i, ok := tools[tc.Index]
			if !ok || (tc.ID != "" && toolIDs[tc.Index] != "" && tc.ID != toolIDs[tc.Index]) {
				endIfOpen(textIdx)
				endIfOpen(thinkIdx)
				i = b.BeginToolCall(tc.ID, tc.Function.Name)
				tools[tc.Index] = i
				calls++
			} else {
				b.SetToolCallID(i, tc.ID)
				b.SetToolCallName(i, tc.Function.Name)
			}
			if tc.ID != "" {
				toolIDs[tc.Index] = tc.ID
			}
			if tc.Function.Arguments != "" {
				b.AppendToolCall(i, tc.Function.Arguments)
			}
		}
		if ch.FinishReason != "" {
			finish = ch.FinishReason
		}
	}
	if haveUsage {
		b.SetUsage(usage)
	}

	if err := stream.Err(); err != nil || ctx.Err() != nil {
		return b.Fail(ctx, p.apiError(err, capture, req.Model.ID))
	}
	if failure != nil {
		return b.Fail(ctx, failure)
	}
	if finish == "" {
		return b.Fail(ctx, incomplete(p.name, capture, req.Model.ID))
	}
	b.EndAll()
	reason := mapFinishReason(finish)
	if reason == llm.StopReasonStop && calls > 0 {
		reason = llm.StopReasonToolUse // some servers say "stop" after tool calls
	}
	if reason == llm.StopReasonError {
		return b.Fail(ctx, &llm.APIError{
			Provider: p.name, Model: req.Model.ID, Type: finish,
			Message: "the reply was stopped by the provider's content filter",
		})
	}
	b.SetStopReason(reason)
	return b.Finish()
}

var reasoningFields = []string{"reasoning_content", "reasoning"}

// extraString reads a string field the SDK does not know. (The SDK marks
// such fields as not Valid, so only the raw JSON is looked at.)
func extraString[F interface{ Raw() string }](fields map[string]F, name string) string {
	f, ok := fields[name]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal([]byte(f.Raw()), &s) != nil {
		return ""
	}
	return s
}

// apiError turns what the SDK returned into an *APIError where the server
// reported one: an HTTP error response (from the capture, which keeps the
// status and headers whatever the body), or an error object in the stream
// (status 0).
func (p *Provider) apiError(err error, capture *llm.ResponseCapture, model string) error {
	return apiError(p.name, err, capture, model)
}

func apiError(name string, err error, capture *llm.ResponseCapture, model string) error {
	if ae := capture.APIError(name, model); ae != nil {
		return ae
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		if ae := llm.ErrorObject(name, model, se.Event.Data); ae != nil {
			return ae // with the status class of its code
		}
		ae := llm.NewHTTPError(name, model, 0, nil, se.Event.Data, time.Now())
		ae.Header = nil
		if ae.Message == "" {
			ae.Message = se.Message
		}
		return ae
	}
	var oe *sdk.Error
	if errors.As(err, &oe) {
		ae := &llm.APIError{Provider: name, Model: model, StatusCode: oe.StatusCode, Type: oe.Type, Message: oe.Message}
		if oe.Response != nil {
			ae.Header = oe.Response.Header.Clone()
			ae.RetryAfter = llm.RetryAfterFromHeader(oe.Response.Header, time.Now())
		}
		return ae
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", name, model, err)
}

// incomplete is the error of a stream that ended before the reply was
// complete: the error object the server sent instead of a stream (an HTTP
// 200 JSON body) if there was one, else llm.ErrIncompleteStream.
func incomplete(name string, capture *llm.ResponseCapture, model string) error {
	if ae := capture.APIError(name, model); ae != nil {
		return ae
	}
	return fmt.Errorf("%s %s: %w", name, model, llm.ErrIncompleteStream)
}

// mapFinishReason maps finish_reason; unknown values count as a stop.
func mapFinishReason(r string) llm.StopReason {
	switch r {
	case "length":
		return llm.StopReasonLength
	case "tool_calls", "function_call":
		return llm.StopReasonToolUse
	case "content_filter":
		return llm.StopReasonError
	}
	return llm.StopReasonStop
}

// isOfficial reports whether base is OpenAI's own API, which takes
// max_completion_tokens, the developer role and store; compatible servers
// get the older, more widely understood fields.
func isOfficial(base string) bool {
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}
