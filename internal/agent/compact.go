package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/beige-dev/beige/internal/llm"
)

// Compaction defaults, as pi has them.
const (
	// DefaultReserveTokens is kept free below the context window (for the
	// reply) when no threshold is configured; small windows keep a quarter.
	DefaultReserveTokens = 16384
	// DefaultKeepRecentTokens is how much of the latest conversation is
	// kept word for word; small thresholds keep half of the threshold.
	DefaultKeepRecentTokens = 20000
	// defaultContextWindow is assumed for a model that does not say.
	defaultContextWindow = 128000
)

// SummaryPrefix starts the user message that stands for the summarised
// part of a conversation.
const SummaryPrefix = "Summary of the earlier conversation:\n\n"

// Compaction is what one compaction did.
type Compaction struct {
	// Summary is the model's summary of the messages it replaced.
	Summary string
	// Cut is how many messages, from the start, the summary replaced.
	Cut int
	// TokensBefore is the estimated context size before.
	TokensBefore int
	// Usage is that of the summarisation call.
	Usage llm.Usage
}

// Compactor decides when a conversation is too long for its model and
// summarises its older part with the model. Its zero thresholds mean
// defaults derived from the model's context window.
type Compactor struct {
	Model Model
	// Threshold is the context size, in tokens, above which older turns
	// are summarised (the agent's compactionThreshold); 0 means the context
	// window less ReserveTokens.
	Threshold int
	// ReserveTokens is kept free below the window; 0 means
	// min(DefaultReserveTokens, window/4).
	ReserveTokens int
	// KeepRecentTokens is how much of the end of the conversation is kept
	// as it is; 0 means min(DefaultKeepRecentTokens, threshold/2).
	KeepRecentTokens int
}

func (c *Compactor) window() int {
	if w := c.Model.Info().ContextWindow; w > 0 {
		return w
	}
	return defaultContextWindow
}

// Limit returns the threshold in tokens.
func (c *Compactor) Limit() int {
	if c.Threshold > 0 {
		return c.Threshold
	}
	w := c.window()
	reserve := c.ReserveTokens
	if reserve <= 0 {
		reserve = min(DefaultReserveTokens, w/4)
	}
	return max(w-reserve, 1)
}

func (c *Compactor) keepRecent() int {
	if c.KeepRecentTokens > 0 {
		return c.KeepRecentTokens
	}
	return max(min(DefaultKeepRecentTokens, c.Limit()/2), 1)
}

// EstimateTokens estimates the size of a context in tokens. It takes the
// usage the model reported for its last reply (input, output and cache
// tokens: what the model saw and wrote) and adds about a token per four
// characters of the messages after it. Replies older than since (Unix
// milliseconds: the last compaction) are not trusted, since they measured a
// longer context; without a trusted reply every message, the system prompt
// and the tools are estimated from their characters.
func EstimateTokens(system string, tools []llm.Tool, msgs []llm.Message, since int64) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		a := msgs[i].Assistant
		if a == nil || a.StopReason == llm.StopReasonError || a.StopReason == llm.StopReasonAborted || a.Timestamp < since {
			continue
		}
		u := a.Usage
		used := u.Input + u.Output + u.CacheRead + u.CacheWrite
		if used <= 0 {
			continue
		}
		for _, m := range msgs[i+1:] {
			used += messageTokens(m)
		}
		return used
	}
	chars := len(system)
	for _, t := range tools {
		chars += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	n := (chars + 3) / 4
	for _, m := range msgs {
		n += messageTokens(m)
	}
	return n
}

// imageChars is what an image counts for, in characters (about 1200 tokens).
const imageChars = 4800

// messageTokens estimates a message at a token per four characters.
func messageTokens(m llm.Message) int {
	var cs []llm.Content
	switch {
	case m.User != nil:
		cs = m.User.Content
	case m.Assistant != nil:
		cs = m.Assistant.Content
	case m.ToolResult != nil:
		cs = m.ToolResult.Content
	}
	chars := 0
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			chars += len(c.Text)
		case llm.ContentThinking:
			chars += len(c.Thinking)
		case llm.ContentToolCall:
			chars += len(c.Name) + len(c.Arguments) + len(c.InvalidArguments)
		case llm.ContentImage:
			chars += imageChars
		}
	}
	return (chars + 3) / 4
}

// Plan returns how many messages, from the start, to summarise: 0 when the
// context (tokens, see EstimateTokens) is within the threshold — unless
// force — or when there is nothing worth summarising. The cut keeps at
// least KeepRecentTokens of the latest messages and never falls between a
// tool call and its result: the first kept message is a user message or an
// assistant reply.
func (c *Compactor) Plan(msgs []llm.Message, tokens int, force bool) int {
	if len(msgs) < 2 || (!force && tokens <= c.Limit()) {
		return 0
	}
	keep := c.keepRecent()
	cut, acc := 0, 0
	for i := len(msgs) - 1; i >= 1; i-- {
		acc += messageTokens(msgs[i])
		if acc >= keep {
			cut = i
			break
		}
	}
	if cut == 0 {
		// Everything is recent: summarise all but the latest turn.
		cut = len(msgs) - 1
	}
	start := cut
	for cut < len(msgs) && msgs[cut].ToolResult != nil {
		cut++
	}
	if cut == len(msgs) {
		for cut = start; cut >= 1 && msgs[cut].ToolResult != nil; cut-- {
		}
	}
	if cut < 1 || (cut == 1 && isSummary(msgs[0])) {
		return 0
	}
	return cut
}

// isSummary reports whether m is the message a compaction put in.
func isSummary(m llm.Message) bool {
	return m.User != nil && len(m.User.Content) > 0 && strings.HasPrefix(m.User.Content[0].Text, SummaryPrefix)
}

// SummaryMessage returns the user message that stands for summarised turns.
func SummaryMessage(summary string, timestamp int64) llm.Message {
	return llm.Message{User: &llm.UserMessage{
		Content: []llm.Content{llm.Text(SummaryPrefix + summary)}, Timestamp: timestamp,
	}}
}

const summarySystem = `You are a context summarisation assistant. You read a conversation between a user and an AI agent that works in a sandbox with tools, and you write a summary that lets the agent continue the work without the original conversation. Do not continue the conversation and do not answer questions asked in it: only summarise.`

const summaryInstructions = `Summarise the conversation above; the summary will replace it in the agent's context. Use this structure:

## Goal
What the user wants, in their words where it matters.

## Progress
What has been done, and what is in progress.

## Key decisions
Decisions taken and why.

## Important details
Exact file paths, commands, names, values, errors and results the agent will need again.

## Next steps
What remains to be done.

Be concise, but keep every detail the agent cannot find again. If the conversation begins with an earlier summary, carry its content over.`

// maxToolResultChars bounds each tool result in the transcript to summarise.
const maxToolResultChars = 2000

// Summarize asks the model to summarise msgs (the older part of a
// conversation). The messages are sent as a transcript inside one user
// message, so that tool calls need no tools; a transcript too long for the
// model loses its oldest turns (an earlier summary at its start is kept).
func (c *Compactor) Summarize(ctx context.Context, msgs []llm.Message) (string, llm.Usage, error) {
	pieces := transcript(msgs)
	// The request must fit the window with room for the summary and the
	// instructions; the older part fitted in the context, so this only
	// bites when a tool result or an earlier summary is huge.
	w := c.window()
	budget := max(w-min(4096, w/4)-512, w/2) * 4 // in characters
	total := 0
	for _, p := range pieces {
		total += len(p)
	}
	first := 0
	if len(msgs) > 0 && isSummary(msgs[0]) {
		first = 1
	}
	dropped := 0
	for total > budget && first+dropped < len(pieces)-1 {
		total -= len(pieces[first+dropped])
		dropped++
	}
	var b strings.Builder
	b.WriteString("<conversation>\n")
	for i, p := range pieces {
		if i >= first && i < first+dropped {
			if i == first {
				b.WriteString("[… the oldest part of the conversation was left out …]\n\n")
			}
			continue
		}
		b.WriteString(p)
	}
	b.WriteString("</conversation>\n\n")
	b.WriteString(summaryInstructions)

	req := llm.Context{
		SystemPrompt: summarySystem,
		Messages:     []llm.Message{llm.UserText(b.String())},
	}
	msg, err := c.Model.Stream(ctx, req, nil)
	var usage llm.Usage
	if msg != nil {
		usage = msg.Usage
	}
	if err != nil {
		return "", usage, fmt.Errorf("summarise: %w", err)
	}
	if msg == nil {
		return "", usage, errors.New("summarise: the model returned no message")
	}
	summary := strings.TrimSpace(msg.Text())
	if summary == "" {
		return "", usage, fmt.Errorf("summarise: empty summary (stop reason %s)", msg.StopReason)
	}
	return summary, usage, nil
}

// transcript writes each message as text, one piece per message.
func transcript(msgs []llm.Message) []string {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		var b strings.Builder
		switch {
		case m.User != nil:
			b.WriteString("[User]: ")
			writeBlocks(&b, m.User.Content, 0)
		case m.Assistant != nil:
			a := m.Assistant
			if a.StopReason == llm.StopReasonError || a.StopReason == llm.StopReasonAborted {
				continue
			}
			for _, c := range a.Content {
				switch c.Type {
				case llm.ContentText:
					if strings.TrimSpace(c.Text) != "" {
						b.WriteString("[Assistant]: " + c.Text + "\n")
					}
				case llm.ContentToolCall:
					args := string(c.Arguments)
					if c.InvalidArguments != "" {
						args = c.InvalidArguments
					}
					b.WriteString("[Assistant calls tool " + c.Name + "]: " + clipText(args, maxToolResultChars) + "\n")
				}
			}
		case m.ToolResult != nil:
			r := m.ToolResult
			label := "[Tool result " + r.ToolName
			if r.IsError {
				label += " (error)"
			}
			b.WriteString(label + "]: ")
			writeBlocks(&b, r.Content, maxToolResultChars)
		}
		if b.Len() > 0 {
			b.WriteString("\n")
			out = append(out, b.String())
		}
	}
	return out
}

func writeBlocks(b *strings.Builder, cs []llm.Content, limit int) {
	var parts []string
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			parts = append(parts, c.Text)
		case llm.ContentImage:
			parts = append(parts, "(an image)")
		}
	}
	s := strings.Join(parts, "\n")
	if limit > 0 {
		s = clipText(s, limit)
	}
	b.WriteString(s + "\n")
}
