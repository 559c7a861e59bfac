package nodehost

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
)

// Bounds on what a plugin sends to ctx.llmPrompt (it is not trusted; the
// frame itself is at most 8 MiB).
const (
	maxLLMMessages  = 100
	maxLLMBlocks    = 200     // content blocks over all messages
	maxLLMText      = 1 << 20 // bytes of text over all messages and the system prompt
	maxLLMImages    = 20
	maxLLMImage     = 5 << 20 // decoded bytes of one image
	maxLLMMaxTokens = 128000  // when the model's own maximum is not known
)

// llmImageTypes are the image types every provider API takes.
var llmImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// llmThinkingLevels are the original's LlmPromptOpts.thinkingLevel values.
var llmThinkingLevels = []llm.ThinkingLevel{llm.ThinkingOff, llm.ThinkingMinimal, llm.ThinkingLow, llm.ThinkingMedium, llm.ThinkingHigh}

// llmBlock is a content block of an LlmMessage.
type llmBlock struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	Data     *string `json:"data"`
	MimeType *string `json:"mimeType"`
}

// serveLLMPrompt answers ctx.llmPrompt(provider, modelId, messages, opts):
// a one-shot model call through the gateway (plugin.LLMPrompter), with no
// session. The messages are checked and bounded here; the gateway checks
// the provider, the model and its credentials. The call ends when ctx
// does (the host stopped, the ctx call's time ran out).
func (p *Plugin) serveLLMPrompt(ctx context.Context, pc plugin.PluginContext, raw json.RawMessage, need func() error) (any, error) {
	req, err := parseLLMPrompt(raw)
	if err != nil {
		return nil, err
	}
	if err := need(); err != nil {
		return nil, err
	}
	lp, ok := pc.(plugin.LLMPrompter)
	if !ok {
		return nil, errors.New("ctx.llmPrompt: this gateway cannot call models for plugins")
	}
	req.Plugin = p.env.Name
	res, err := lp.LLMPrompt(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("ctx.llmPrompt: %w", err)
	}
	return res.Text, nil
}

// parseLLMPrompt decodes and checks the arguments of ctx.llmPrompt (they
// come from the plugin): the original's LlmMessage and LlmPromptOpts
// shapes, within the bounds above.
func parseLLMPrompt(raw json.RawMessage) (plugin.LLMPromptRequest, error) {
	var req plugin.LLMPromptRequest
	var a struct {
		Provider string `json:"provider"`
		ModelID  string `json:"modelId"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Opts *struct {
			SystemPrompt  *string  `json:"systemPrompt"`
			MaxTokens     *float64 `json:"maxTokens"`
			ThinkingLevel *string  `json:"thinkingLevel"`
		} `json:"opts"`
	}
	if err := decodeNamed("llmPrompt", raw, &a, nil); err != nil {
		return req, err
	}
	if err := checkNames("llmPrompt", a.Provider, a.ModelID); err != nil {
		return req, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("ctx.llmPrompt: bad arguments: "+format, args...)
	}
	req.Provider, req.Model = a.Provider, a.ModelID
	text, images, blocks := 0, 0, 0
	if o := a.Opts; o != nil {
		if o.SystemPrompt != nil {
			req.SystemPrompt = *o.SystemPrompt
			text += len(req.SystemPrompt)
		}
		if o.MaxTokens != nil {
			n := *o.MaxTokens
			if n != math.Trunc(n) || n < 1 || n > maxLLMMaxTokens {
				return req, bad("maxTokens must be a whole number from 1 to %d", maxLLMMaxTokens)
			}
			req.MaxTokens = int(n)
		}
		if o.ThinkingLevel != nil {
			l := llm.ThinkingLevel(*o.ThinkingLevel)
			if !slices.Contains(llmThinkingLevels, l) {
				return req, bad("thinkingLevel must be off, minimal, low, medium or high")
			}
			req.ThinkingLevel = l
		}
	}
	if len(a.Messages) == 0 {
		return req, bad("no messages")
	}
	if len(a.Messages) > maxLLMMessages {
		return req, bad("more than %d messages", maxLLMMessages)
	}
	for i, m := range a.Messages {
		if m.Role != "user" {
			return req, bad(`messages[%d]: role must be "user"`, i)
		}
		var content []llm.Content
		var s string
		if err := json.Unmarshal(m.Content, &s); err == nil {
			content = []llm.Content{llm.Text(s)}
			text += len(s)
			blocks++
		} else {
			var bs []llmBlock
			if err := strictDecode(m.Content, &bs); err != nil || len(bs) == 0 {
				return req, bad("messages[%d]: content must be a string or an array of text and image blocks", i)
			}
			for j, b := range bs {
				blocks++
				switch {
				case b.Type == "text" && b.Text != nil && b.Data == nil && b.MimeType == nil:
					content = append(content, llm.Text(*b.Text))
					text += len(*b.Text)
				case b.Type == "image" && b.Data != nil && b.MimeType != nil && b.Text == nil:
					if !slices.Contains(llmImageTypes, *b.MimeType) {
						return req, bad("messages[%d].content[%d]: mimeType must be one of %v", i, j, llmImageTypes)
					}
					if base64.StdEncoding.DecodedLen(len(*b.Data)) > maxLLMImage+2 {
						return req, bad("messages[%d].content[%d]: an image over %d MiB", i, j, maxLLMImage>>20)
					}
					data, err := base64.StdEncoding.DecodeString(*b.Data)
					if err != nil || len(data) == 0 {
						return req, bad("messages[%d].content[%d]: data is not base64 image data", i, j)
					}
					if len(data) > maxLLMImage {
						return req, bad("messages[%d].content[%d]: an image over %d MiB", i, j, maxLLMImage>>20)
					}
					if images++; images > maxLLMImages {
						return req, bad("more than %d images", maxLLMImages)
					}
					// Sent as decoded, re-encoded: no line breaks or padding quirks.
					content = append(content, llm.Image(base64.StdEncoding.EncodeToString(data), *b.MimeType))
				default:
					return req, bad(`messages[%d].content[%d]: want {type: "text", text} or {type: "image", data, mimeType}`, i, j)
				}
			}
		}
		if blocks > maxLLMBlocks {
			return req, bad("more than %d content blocks", maxLLMBlocks)
		}
		if text > maxLLMText {
			return req, bad("more than %d KiB of text", maxLLMText>>10)
		}
		req.Messages = append(req.Messages, llm.Message{User: &llm.UserMessage{Content: content, Timestamp: llm.Now()}})
	}
	return req, nil
}
