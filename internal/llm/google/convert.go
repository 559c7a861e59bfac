package google

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"

	"google.golang.org/genai"

	"github.com/beige-dev/beige/internal/llm"
)

// callIDPrefix marks tool call ids made up here, for the Gemini API
// replies that carry none; they are not sent back to the API.
const callIDPrefix = "gemini_call_"

func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return callIDPrefix + hex.EncodeToString(b[:])
}

// skipSignature is the value Google documents for a function call whose
// thought signature is unknown (written by another model), so that Gemini 3
// accepts the history.
const skipSignature = "skip_thought_signature_validator"

// buildRequest maps a request to the Gemini API's contents and config.
func buildRequest(req llm.Request) ([]*genai.Content, *genai.GenerateContentConfig) {
	m := req.Model
	maxTokens := req.Options.MaxTokensFor(m)
	config := &genai.GenerateContentConfig{}
	if level := req.Options.ThinkingLevel; m.Reasoning && level.Enabled() {
		budget := level.Budget()
		maxTokens += budget // Gemini counts thinking in maxOutputTokens
		if m.MaxTokens > 0 {
			maxTokens = min(maxTokens, m.MaxTokens)
		}
		config.ThinkingConfig = &genai.ThinkingConfig{IncludeThoughts: true, ThinkingBudget: genai.Ptr(int32(budget))}
	}
	config.MaxOutputTokens = int32(maxTokens)
	if t := req.Options.Temperature; t != nil {
		config.Temperature = genai.Ptr(float32(*t))
	}
	if sp := req.Context.SystemPrompt; strings.TrimSpace(sp) != "" {
		config.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: sp}}}
	}
	if len(req.Context.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Context.Tools))
		for _, t := range req.Context.Tools {
			decls = append(decls, convertTool(t))
		}
		config.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	return convertMessages(req.Context.Messages, m), config
}

func convertTool(t llm.Tool) *genai.FunctionDeclaration {
	var schema map[string]any
	_ = json.Unmarshal(t.Parameters, &schema)
	if schema == nil {
		schema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	delete(schema, "$schema")
	return &genai.FunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJsonSchema: schema}
}

func convertMessages(msgs []llm.Message, m llm.Model) []*genai.Content {
	msgs = llm.TransformMessages(msgs, m, nil)
	gemini3 := strings.Contains(strings.ToLower(m.ID), "gemini-3")
	sendID := map[string]bool{} // ids the API gave, to send back with their results
	var out []*genai.Content
	for i := 0; i < len(msgs); i++ {
		msg := msgs[i]
		switch {
		case msg.User != nil:
			if parts := userParts(msg.User.Content, m); len(parts) > 0 {
				out = append(out, &genai.Content{Role: genai.RoleUser, Parts: parts})
			}
		case msg.Assistant != nil:
			a := msg.Assistant
			same := a.Provider == m.Provider && a.API == m.API && a.Model == m.ID
			if parts := modelParts(a.Content, same, gemini3, sendID); len(parts) > 0 {
				out = append(out, &genai.Content{Role: genai.RoleModel, Parts: parts})
			}
		case msg.ToolResult != nil:
			// Consecutive results go into one turn, answering the calls
			// of the model turn before.
			var parts, images []*genai.Part
			for ; i < len(msgs) && msgs[i].ToolResult != nil; i++ {
				p, imgs := toolResultParts(msgs[i].ToolResult, m, sendID)
				parts = append(parts, p)
				images = append(images, imgs...)
			}
			i--
			out = append(out, &genai.Content{Role: genai.RoleUser, Parts: append(parts, images...)})
		}
	}
	return out
}

func imagePart(c llm.Content) *genai.Part {
	data, err := base64.StdEncoding.DecodeString(c.Data)
	if err != nil || c.MimeType == "" {
		return nil
	}
	return &genai.Part{InlineData: &genai.Blob{MIMEType: c.MimeType, Data: data}}
}

func userParts(cs []llm.Content, m llm.Model) []*genai.Part {
	var parts []*genai.Part
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) != "" {
				parts = append(parts, &genai.Part{Text: c.Text})
			}
		case llm.ContentImage:
			if m.AcceptsImages() {
				if p := imagePart(c); p != nil {
					parts = append(parts, p)
				}
			}
		}
	}
	return parts
}

// signature decodes a stored thought signature; "" or bad base64 is nil.
func signature(s string) []byte {
	if s == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

func modelParts(cs []llm.Content, same, gemini3 bool, sendID map[string]bool) []*genai.Part {
	var parts []*genai.Part
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) == "" {
				continue
			}
			p := &genai.Part{Text: c.Text}
			if same {
				p.ThoughtSignature = signature(c.TextSignature)
			}
			parts = append(parts, p)
		case llm.ContentThinking:
			// Another model's thinking arrives here as text already
			// (llm.TransformMessages); thinking goes back only with its
			// signature.
			if sig := signature(c.ThinkingSignature); same && sig != nil && !c.Redacted {
				parts = append(parts, &genai.Part{Text: c.Thinking, Thought: true, ThoughtSignature: sig})
			}
		case llm.ContentToolCall:
			var args map[string]any
			if err := json.Unmarshal(c.Arguments, &args); err != nil || args == nil {
				args = map[string]any{}
			}
			fc := &genai.FunctionCall{Name: c.Name, Args: args}
			if same && c.ID != "" && !strings.HasPrefix(c.ID, callIDPrefix) {
				fc.ID = c.ID
				sendID[c.ID] = true
			}
			p := &genai.Part{FunctionCall: fc}
			if same {
				p.ThoughtSignature = signature(c.ThoughtSignature)
			}
			if p.ThoughtSignature == nil && gemini3 {
				p.ThoughtSignature = []byte(skipSignature)
			}
			parts = append(parts, p)
		}
	}
	return parts
}

// toolResultParts is the functionResponse of a result ({"output": text} or
// {"error": text}), and its images as inline data parts of the same turn.
func toolResultParts(r *llm.ToolResultMessage, m llm.Model, sendID map[string]bool) (*genai.Part, []*genai.Part) {
	var texts []string
	var images []*genai.Part
	for _, c := range r.Content {
		switch c.Type {
		case llm.ContentText:
			if c.Text != "" {
				texts = append(texts, c.Text)
			}
		case llm.ContentImage:
			if m.AcceptsImages() {
				if p := imagePart(c); p != nil {
					images = append(images, p)
				}
			}
		}
	}
	text := strings.Join(texts, "\n")
	if text == "" && len(images) > 0 {
		text = "(see attached image)"
	}
	key := "output"
	if r.IsError {
		key = "error"
	}
	fr := &genai.FunctionResponse{Name: r.ToolName, Response: map[string]any{key: text}}
	if sendID[r.ToolCallID] {
		fr.ID = r.ToolCallID
	}
	return &genai.Part{FunctionResponse: fr}, images
}

// jsonObject encodes function call arguments as JSON text.
func jsonObject(args map[string]any) (string, error) {
	if args == nil {
		return "{}", nil
	}
	b, err := json.Marshal(args)
	return string(b), err
}
