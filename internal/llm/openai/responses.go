package openai

import (
	"context"
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/beige-dev/beige/internal/llm"
)

// ResponsesAPI is the name of the Responses API implementation.
const ResponsesAPI = llm.APIOpenAIResponses

func init() { llm.RegisterAPI(ResponsesAPI, NewResponses) }

// ResponsesProvider talks to OpenAI's Responses API (POST /responses),
// streaming, with store off: every request carries the whole history.
//
// Reasoning is shown (as thinking blocks, from the reasoning summaries) but
// not sent back on later turns: replaying reasoning items needs their
// encrypted content and exact item ids, and a history that went through
// another model (after a fallback) has neither. Function calls are
// replayed without item ids for the same reason.
type ResponsesProvider struct {
	name    string
	baseURL string
	svc     responses.ResponseService
}

var _ llm.Provider = (*ResponsesProvider)(nil)

// NewResponses builds a Responses API provider from cfg. An empty BaseURL
// means OpenAI's API.
func NewResponses(cfg llm.ProviderConfig) (llm.Provider, error) {
	opts, base, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	return &ResponsesProvider{name: cfg.Name, baseURL: base, svc: responses.NewResponseService(opts...)}, nil
}

// Stream sends one request and streams the reply; see llm.Provider.
func (p *ResponsesProvider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	b := llm.NewBuilder(req.Model, emit)
	b.Start()

	capture := new(llm.ResponseCapture)
	opts, base := requestOptions(req, p.baseURL, capture)
	stream := p.svc.NewStreaming(ctx, buildResponsesParams(req, isOfficial(base)), opts...)
	defer func() { _ = stream.Close() }()

	var (
		items   = map[int64]int{} // output_index → content index
		hasArgs = map[int64]bool{}
		calls   int
		done    bool
		failure error
	)
	block := func(outputIndex int64) int {
		if i, ok := items[outputIndex]; ok {
			return i
		}
		return -1
	}
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_item.added":
			switch it := ev.Item; it.Type {
			case "reasoning":
				items[ev.OutputIndex] = b.BeginThinking()
			case "message":
				i := b.BeginText()
				b.SetTextSignature(i, it.ID)
				items[ev.OutputIndex] = i
			case "function_call":
				items[ev.OutputIndex] = b.BeginToolCall(it.CallID, it.Name)
				calls++
				if a := it.Arguments.OfString; a != "" {
					b.AppendToolCall(items[ev.OutputIndex], a)
					hasArgs[ev.OutputIndex] = true
				}
			}
		case "response.reasoning_summary_part.added":
			if ev.SummaryIndex > 0 {
				b.AppendThinking(block(ev.OutputIndex), "\n\n")
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			b.AppendThinking(block(ev.OutputIndex), ev.Delta)
		case "response.output_text.delta", "response.refusal.delta":
			b.AppendText(block(ev.OutputIndex), ev.Delta)
		case "response.function_call_arguments.delta":
			hasArgs[ev.OutputIndex] = true
			b.AppendToolCall(block(ev.OutputIndex), ev.Delta)
		case "response.function_call_arguments.done":
			if !hasArgs[ev.OutputIndex] && ev.Arguments != "" {
				hasArgs[ev.OutputIndex] = true
				b.AppendToolCall(block(ev.OutputIndex), ev.Arguments)
			}
		case "response.output_item.done":
			i := block(ev.OutputIndex)
			if ev.Item.Type == "function_call" && !hasArgs[ev.OutputIndex] && ev.Item.Arguments.OfString != "" {
				b.AppendToolCall(i, ev.Item.Arguments.OfString)
			}
			b.End(i)
		case "response.completed", "response.incomplete":
			done = true
			r := ev.Response
			u := r.Usage
			cached := int(u.InputTokensDetails.CachedTokens)
			b.SetUsage(llm.Usage{
				Input:      max(0, int(u.InputTokens)-cached),
				Output:     int(u.OutputTokens),
				CacheRead:  cached,
				CacheWrite: int(u.InputTokensDetails.CacheWriteTokens),
			})
			switch reason := r.IncompleteDetails.Reason; {
			case ev.Type == "response.completed" && calls > 0:
				b.SetStopReason(llm.StopReasonToolUse)
			case ev.Type == "response.completed":
				b.SetStopReason(llm.StopReasonStop)
			case reason == "content_filter":
				failure = &llm.APIError{Provider: p.name, Model: req.Model.ID, Type: reason,
					Message: "the reply was stopped by the provider's content filter"}
			default: // max_output_tokens
				b.SetStopReason(llm.StopReasonLength)
			}
		case "response.failed":
			done = true
			e := ev.Response.Error
			msg := e.Message
			if msg == "" {
				msg = "the response failed"
			}
			failure = &llm.APIError{Provider: p.name, Model: req.Model.ID, Type: string(e.Code), Message: msg}
		case "error":
			failure = &llm.APIError{Provider: p.name, Model: req.Model.ID, Type: ev.Code, Message: ev.Message}
			if o := llm.ErrorObject(p.name, req.Model.ID, []byte(ev.RawJSON())); o != nil {
				failure = o // with the status class of its code
			}
		default:
			// An error object in a shape of another server.
			if o := llm.ErrorObject(p.name, req.Model.ID, []byte(ev.RawJSON())); o != nil {
				failure = o
			}
		}
		if failure != nil {
			break
		}
	}

	if err := stream.Err(); err != nil || ctx.Err() != nil {
		return b.Fail(ctx, apiError(p.name, err, capture, req.Model.ID))
	}
	if failure != nil {
		return b.Fail(ctx, failure)
	}
	if !done {
		return b.Fail(ctx, incomplete(p.name, capture, req.Model.ID))
	}
	return b.Finish()
}

func buildResponsesParams(req llm.Request, official bool) responses.ResponseNewParams {
	m := req.Model
	params := responses.ResponseNewParams{
		Model:           m.ID,
		Input:           responses.ResponseNewParamsInputUnion{OfInputItemList: responsesInput(req.Context, m)},
		Store:           sdk.Bool(false),
		MaxOutputTokens: sdk.Int(int64(req.Options.MaxTokensFor(m))),
	}
	if strings.TrimSpace(req.Context.SystemPrompt) != "" {
		params.Instructions = sdk.String(req.Context.SystemPrompt)
	}
	if t := req.Options.Temperature; t != nil && !(official && m.Reasoning) {
		params.Temperature = sdk.Float(*t)
	}
	if m.Reasoning {
		if effort := llm.OpenAIReasoningEffort(req.Options.ThinkingLevel, m.ID); effort != "" {
			params.Reasoning = shared.ReasoningParam{
				Effort:  shared.ReasoningEffort(effort),
				Summary: shared.ReasoningSummaryAuto,
			}
		}
	}
	for _, t := range req.Context.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil || schema == nil {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		fn := &responses.FunctionToolParam{Name: t.Name, Parameters: schema, Strict: sdk.Bool(false)}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, responses.ToolUnionParam{OfFunction: fn})
	}
	return params
}

func responsesInput(c llm.Context, m llm.Model) responses.ResponseInputParam {
	var in responses.ResponseInputParam
	for _, msg := range llm.TransformMessages(c.Messages, m, nil) {
		switch {
		case msg.User != nil:
			if item, ok := responsesUser(msg.User.Content, m); ok {
				in = append(in, item)
			}
		case msg.Assistant != nil:
			var texts []string
			flush := func() {
				if len(texts) > 0 {
					in = append(in, responses.ResponseInputItemParamOfMessage(strings.Join(texts, "\n"), responses.EasyInputMessageRoleAssistant))
					texts = nil
				}
			}
			for _, b := range msg.Assistant.Content {
				switch b.Type {
				case llm.ContentText:
					if strings.TrimSpace(b.Text) != "" {
						texts = append(texts, b.Text)
					}
				case llm.ContentToolCall:
					flush()
					args := string(b.Arguments)
					if args == "" {
						args = "{}"
					}
					in = append(in, responses.ResponseInputItemParamOfFunctionCall(args, b.ID, b.Name))
				}
			}
			flush()
		case msg.ToolResult != nil:
			r := msg.ToolResult
			text := r.Text()
			var images responses.ResponseInputMessageContentListParam
			for _, c := range r.Content {
				if c.Type == llm.ContentImage && m.AcceptsImages() {
					images = append(images, responsesImage(c))
				}
			}
			if text == "" && len(images) > 0 {
				text = "(see attached image)"
			}
			out := responses.ResponseInputItemParamOfFunctionCallOutput(text)
			out.OfFunctionCallOutput.CallID = sdk.String(r.ToolCallID)
			in = append(in, out)
			if len(images) > 0 {
				parts := append(responses.ResponseInputMessageContentListParam{
					responses.ResponseInputContentParamOfInputText("Attached image(s) from tool result:"),
				}, images...)
				in = append(in, responses.ResponseInputItemParamOfMessage(parts, responses.EasyInputMessageRoleUser))
			}
		}
	}
	return in
}

func responsesUser(cs []llm.Content, m llm.Model) (responses.ResponseInputItemUnionParam, bool) {
	var texts []string
	var parts responses.ResponseInputMessageContentListParam
	images := false
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			texts = append(texts, c.Text)
			parts = append(parts, responses.ResponseInputContentParamOfInputText(c.Text))
		case llm.ContentImage:
			if m.AcceptsImages() {
				images = true
				parts = append(parts, responsesImage(c))
			}
		}
	}
	switch {
	case images:
		return responses.ResponseInputItemParamOfMessage(parts, responses.EasyInputMessageRoleUser), true
	case len(texts) > 0:
		return responses.ResponseInputItemParamOfMessage(strings.Join(texts, "\n"), responses.EasyInputMessageRoleUser), true
	}
	return responses.ResponseInputItemUnionParam{}, false
}

func responsesImage(c llm.Content) responses.ResponseInputContentUnionParam {
	return responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
		Detail:   responses.ResponseInputImageDetailAuto,
		ImageURL: sdk.String("data:" + c.MimeType + ";base64," + c.Data),
	}}
}
