package openai

import (
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/beige-dev/beige/internal/llm"
)

// buildParams maps a request to chat completions. official selects the
// fields only OpenAI's own API takes (max_completion_tokens, developer role,
// store).
func buildParams(req llm.Request, official bool) sdk.ChatCompletionNewParams {
	m := req.Model
	params := sdk.ChatCompletionNewParams{
		Model:         m.ID,
		Messages:      convertMessages(req.Context, m, official),
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	maxTokens := int64(req.Options.MaxTokensFor(m))
	if official {
		params.MaxCompletionTokens = sdk.Int(maxTokens)
		params.Store = sdk.Bool(false)
	} else {
		params.MaxTokens = sdk.Int(maxTokens)
	}
	// OpenAI's reasoning models reject temperature.
	if t := req.Options.Temperature; t != nil && !(official && m.Reasoning) {
		params.Temperature = sdk.Float(*t)
	}
	if m.Reasoning {
		if effort := llm.OpenAIReasoningEffort(req.Options.ThinkingLevel, m.ID); effort != "" {
			params.ReasoningEffort = shared.ReasoningEffort(effort)
		}
	}
	for _, t := range req.Context.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil || schema == nil {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	return params
}

func convertMessages(c llm.Context, m llm.Model, official bool) []sdk.ChatCompletionMessageParamUnion {
	var out []sdk.ChatCompletionMessageParamUnion
	if strings.TrimSpace(c.SystemPrompt) != "" {
		if official && m.Reasoning {
			out = append(out, sdk.DeveloperMessage(c.SystemPrompt))
		} else {
			out = append(out, sdk.SystemMessage(c.SystemPrompt))
		}
	}
	for _, msg := range llm.TransformMessages(c.Messages, m, nil) {
		switch {
		case msg.User != nil:
			if u, ok := userMessage(msg.User.Content, m); ok {
				out = append(out, u)
			}
		case msg.Assistant != nil:
			if a, ok := assistantMessage(msg.Assistant.Content); ok {
				out = append(out, a)
			}
		case msg.ToolResult != nil:
			out = append(out, toolResultMessages(msg.ToolResult, m)...)
		}
	}
	return out
}

// userMessage sends plain text as a string (every compatible server takes
// it) and switches to content parts only for images.
func userMessage(cs []llm.Content, m llm.Model) (sdk.ChatCompletionMessageParamUnion, bool) {
	var texts []string
	var parts []sdk.ChatCompletionContentPartUnionParam
	images := false
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			texts = append(texts, c.Text)
			parts = append(parts, sdk.TextContentPart(c.Text))
		case llm.ContentImage:
			if m.AcceptsImages() {
				images = true
				parts = append(parts, imagePart(c))
			}
		}
	}
	switch {
	case images:
		return sdk.UserMessage(parts), true
	case len(texts) > 0:
		return sdk.UserMessage(strings.Join(texts, "\n")), true
	}
	return sdk.ChatCompletionMessageParamUnion{}, false
}

func imagePart(c llm.Content) sdk.ChatCompletionContentPartUnionParam {
	return sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{
		URL: "data:" + c.MimeType + ";base64," + c.Data,
	})
}

// assistantMessage replays a reply: text as a string, tool calls, and the
// reasoning of this same server in the field it came in (the thinking
// signature names it), as llama.cpp and others expect.
func assistantMessage(cs []llm.Content) (sdk.ChatCompletionMessageParamUnion, bool) {
	var a sdk.ChatCompletionAssistantMessageParam
	var texts, thoughts []string
	field := ""
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) != "" {
				texts = append(texts, c.Text)
			}
		case llm.ContentThinking:
			if (c.ThinkingSignature == "reasoning_content" || c.ThinkingSignature == "reasoning") && c.Thinking != "" {
				field = c.ThinkingSignature
				thoughts = append(thoughts, c.Thinking)
			}
		case llm.ContentToolCall:
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
				},
			})
		}
	}
	if len(texts) == 0 && len(a.ToolCalls) == 0 {
		return sdk.ChatCompletionMessageParamUnion{}, false
	}
	if len(texts) > 0 {
		a.Content.OfString = sdk.String(strings.Join(texts, "\n"))
	}
	if field != "" {
		a.SetExtraFields(map[string]any{field: strings.Join(thoughts, "\n")})
	}
	return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, true
}

// toolResultMessages sends a result as a "tool" message with its text; its
// images, when the model sees images, follow in a user message, since tool
// messages only carry text.
func toolResultMessages(r *llm.ToolResultMessage, m llm.Model) []sdk.ChatCompletionMessageParamUnion {
	text := r.Text()
	var images []sdk.ChatCompletionContentPartUnionParam
	for _, c := range r.Content {
		if c.Type == llm.ContentImage && m.AcceptsImages() {
			images = append(images, imagePart(c))
		}
	}
	if text == "" && len(images) > 0 {
		text = "(see attached image)"
	}
	out := []sdk.ChatCompletionMessageParamUnion{sdk.ToolMessage(text, r.ToolCallID)}
	if len(images) > 0 {
		parts := append([]sdk.ChatCompletionContentPartUnionParam{
			sdk.TextContentPart("Attached image(s) from tool result:"),
		}, images...)
		out = append(out, sdk.UserMessage(parts))
	}
	return out
}
