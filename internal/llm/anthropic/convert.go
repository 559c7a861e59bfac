package anthropic

import (
	"encoding/json"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/beige-dev/beige/internal/llm"
)

// buildParams maps a request to the Messages API. It reports whether
// extended thinking is on (temperature must then be left out).
func buildParams(req llm.Request) (sdk.MessageNewParams, bool) {
	m := req.Model
	maxTokens := req.Options.MaxTokensFor(m)
	params := sdk.MessageNewParams{Model: m.ID}

	thinking := false
	if level := req.Options.ThinkingLevel; m.Reasoning && level.Enabled() {
		if adaptive(m.ID) {
			params.Thinking.OfAdaptive = &sdk.ThinkingConfigAdaptiveParam{}
			params.OutputConfig.Effort = sdk.OutputConfigEffort(llm.AnthropicEffort(level))
			thinking = true
		} else if mt, budget := llm.AnthropicThinking(level, maxTokens, m.MaxTokens); budget > 0 {
			maxTokens = mt
			params.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(budget))
			thinking = true
		}
	}
	params.MaxTokens = int64(maxTokens)

	if sp := strings.TrimSpace(req.Context.SystemPrompt); sp != "" {
		params.System = []sdk.TextBlockParam{{
			Text:         req.Context.SystemPrompt,
			CacheControl: sdk.NewCacheControlEphemeralParam(),
		}}
	}
	params.Messages = convertMessages(req.Context.Messages, m)
	for _, t := range req.Context.Tools {
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: convertTool(t)})
	}
	return params, thinking
}

// adaptive reports whether a model takes adaptive thinking with an effort
// rather than a token budget (Opus 4.6, where budgets are deprecated).
func adaptive(id string) bool {
	id = strings.ToLower(id)
	return strings.Contains(id, "opus-4-6") || strings.Contains(id, "opus-4.6")
}

// normalizeToolCallID makes another provider's tool call id acceptable to
// Anthropic (^[a-zA-Z0-9_-]{1,64}$).
func normalizeToolCallID(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if len(b) == 0 {
		return "tool_call"
	}
	return string(b)
}

func convertMessages(msgs []llm.Message, m llm.Model) []sdk.MessageParam {
	msgs = llm.TransformMessages(msgs, m, normalizeToolCallID)
	var out []sdk.MessageParam
	for i := 0; i < len(msgs); i++ {
		msg := msgs[i]
		switch {
		case msg.User != nil:
			blocks := userBlocks(msg.User.Content, m)
			if len(blocks) > 0 {
				out = append(out, sdk.NewUserMessage(blocks...))
			}
		case msg.Assistant != nil:
			blocks := assistantBlocks(msg.Assistant.Content)
			if len(blocks) > 0 {
				out = append(out, sdk.NewAssistantMessage(blocks...))
			}
		case msg.ToolResult != nil:
			// Consecutive tool results go into one user message (z.ai's
			// endpoint requires it; Anthropic accepts it).
			var blocks []sdk.ContentBlockParamUnion
			for ; i < len(msgs) && msgs[i].ToolResult != nil; i++ {
				blocks = append(blocks, toolResultBlock(msgs[i].ToolResult, m))
			}
			i--
			out = append(out, sdk.NewUserMessage(blocks...))
		}
	}
	markLastUserCached(out)
	return out
}

func userBlocks(cs []llm.Content, m llm.Model) []sdk.ContentBlockParamUnion {
	var blocks []sdk.ContentBlockParamUnion
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) != "" {
				blocks = append(blocks, sdk.NewTextBlock(c.Text))
			}
		case llm.ContentImage:
			if m.AcceptsImages() {
				blocks = append(blocks, sdk.NewImageBlockBase64(c.MimeType, c.Data))
			}
		}
	}
	return blocks
}

func assistantBlocks(cs []llm.Content) []sdk.ContentBlockParamUnion {
	var blocks []sdk.ContentBlockParamUnion
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) != "" {
				blocks = append(blocks, sdk.NewTextBlock(c.Text))
			}
		case llm.ContentThinking:
			switch {
			case c.Redacted:
				if c.ThinkingSignature != "" {
					blocks = append(blocks, sdk.NewRedactedThinkingBlock(c.ThinkingSignature))
				}
			case strings.TrimSpace(c.Thinking) == "":
			case strings.TrimSpace(c.ThinkingSignature) == "":
				// No signature (an aborted stream): the API would reject
				// the block, so it goes back as plain text.
				blocks = append(blocks, sdk.NewTextBlock(c.Thinking))
			default:
				blocks = append(blocks, sdk.NewThinkingBlock(c.ThinkingSignature, c.Thinking))
			}
		case llm.ContentToolCall:
			blocks = append(blocks, sdk.NewToolUseBlock(c.ID, argsObject(c.Arguments), c.Name))
		}
	}
	return blocks
}

// argsObject decodes tool call arguments for the SDK; anything but an
// object becomes {}.
func argsObject(raw json.RawMessage) map[string]any {
	args := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			args = map[string]any{}
		}
	}
	return args
}

func toolResultBlock(r *llm.ToolResultMessage, m llm.Model) sdk.ContentBlockParamUnion {
	tr := sdk.ToolResultBlockParam{ToolUseID: r.ToolCallID, IsError: sdk.Bool(r.IsError)}
	hasText, hasImage := false, false
	for _, c := range r.Content {
		switch c.Type {
		case llm.ContentText:
			if c.Text == "" {
				continue
			}
			hasText = true
			tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: c.Text}})
		case llm.ContentImage:
			if !m.AcceptsImages() {
				continue
			}
			hasImage = true
			img := sdk.NewImageBlockBase64(c.MimeType, c.Data)
			tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfImage: img.OfImage})
		}
	}
	if hasImage && !hasText {
		tr.Content = append([]sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: "(see attached image)"}}}, tr.Content...)
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &tr}
}

// markLastUserCached sets a cache breakpoint on the last block of the last
// message when it is the user's, so the conversation so far is cached (as
// pi does).
func markLastUserCached(msgs []sdk.MessageParam) {
	if len(msgs) == 0 || msgs[len(msgs)-1].OfUser == nil {
		return
	}
	blocks := msgs[len(msgs)-1].OfUser.Content
	if len(blocks) == 0 {
		return
	}
	cc := sdk.NewCacheControlEphemeralParam()
	switch last := blocks[len(blocks)-1]; {
	case last.OfText != nil:
		last.OfText.CacheControl = cc
	case last.OfImage != nil:
		last.OfImage.CacheControl = cc
	case last.OfToolResult != nil:
		last.OfToolResult.CacheControl = cc
	}
}

// convertTool maps a tool's JSON schema to input_schema: properties and
// required in their fields, other keywords kept as extra fields ($schema
// and type are dropped: type is always "object").
func convertTool(t llm.Tool) *sdk.ToolParam {
	var schema map[string]any
	_ = json.Unmarshal(t.Parameters, &schema)
	in := sdk.ToolInputSchemaParam{Properties: map[string]any{}}
	extra := map[string]any{}
	for k, v := range schema {
		switch k {
		case "properties":
			if v != nil {
				in.Properties = v
			}
		case "required":
			if arr, ok := v.([]any); ok {
				for _, r := range arr {
					if s, ok := r.(string); ok {
						in.Required = append(in.Required, s)
					}
				}
			}
		case "type", "$schema":
		default:
			extra[k] = v
		}
	}
	if len(extra) > 0 {
		in.ExtraFields = extra
	}
	tp := &sdk.ToolParam{Name: t.Name, InputSchema: in}
	if t.Description != "" {
		tp.Description = sdk.String(t.Description)
	}
	return tp
}
