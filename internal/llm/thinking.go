package llm

import (
	"fmt"
	"strings"
)

// ThinkingLevel is how hard a reasoning model should think.
type ThinkingLevel string

// Thinking levels, as pi names them. The zero value means off.
const (
	ThinkingOff     ThinkingLevel = "off"
	ThinkingMinimal ThinkingLevel = "minimal"
	ThinkingLow     ThinkingLevel = "low"
	ThinkingMedium  ThinkingLevel = "medium"
	ThinkingHigh    ThinkingLevel = "high"
	ThinkingXHigh   ThinkingLevel = "xhigh"
)

// ParseThinkingLevel reads a level; "" is off.
func ParseThinkingLevel(s string) (ThinkingLevel, error) {
	switch l := ThinkingLevel(strings.ToLower(strings.TrimSpace(s))); l {
	case "":
		return ThinkingOff, nil
	case ThinkingOff, ThinkingMinimal, ThinkingLow, ThinkingMedium, ThinkingHigh, ThinkingXHigh:
		return l, nil
	}
	return ThinkingOff, fmt.Errorf("unknown thinking level %q (want off, minimal, low, medium, high or xhigh)", s)
}

// Enabled reports whether l asks for thinking at all.
func (l ThinkingLevel) Enabled() bool { return l != "" && l != ThinkingOff }

// Budget returns the thinking token budget of a level: minimal 1024, low
// 2048, medium 8192, high 16384; xhigh is clamped to high; off (and unknown
// levels) 0.
func (l ThinkingLevel) Budget() int {
	switch l {
	case ThinkingMinimal:
		return 1024
	case ThinkingLow:
		return 2048
	case ThinkingMedium:
		return 8192
	case ThinkingHigh, ThinkingXHigh:
		return 16384
	}
	return 0
}

// MinAnthropicThinkingBudget is the smallest budget_tokens Anthropic accepts.
const MinAnthropicThinkingBudget = 1024

// minOutputTokens is what is kept for the answer when the budget must shrink.
const minOutputTokens = 1024

// AnthropicThinking returns max_tokens and budget_tokens for extended
// thinking: max_tokens is raised by the budget (capped at the model's
// maximum, when known) so the answer keeps its room; if the cap leaves no
// room above the budget, the budget shrinks to leave minOutputTokens. A
// budget of 0 means thinking must stay off (level off, or no room for the
// minimum budget).
func AnthropicThinking(level ThinkingLevel, maxTokens, modelMaxTokens int) (newMaxTokens, budget int) {
	budget = level.Budget()
	if budget == 0 {
		return maxTokens, 0
	}
	newMaxTokens = maxTokens + budget
	if modelMaxTokens > 0 && newMaxTokens > modelMaxTokens {
		newMaxTokens = modelMaxTokens
	}
	if newMaxTokens <= budget {
		budget = max(0, newMaxTokens-minOutputTokens)
	}
	if budget < MinAnthropicThinkingBudget {
		return maxTokens, 0
	}
	return newMaxTokens, budget
}

// AnthropicEffort maps a level to the effort of Anthropic's adaptive
// thinking (Opus 4.6 and later): minimal and low → low, medium, high,
// xhigh → max; "" for off.
func AnthropicEffort(level ThinkingLevel) string {
	switch level {
	case ThinkingMinimal, ThinkingLow:
		return "low"
	case ThinkingMedium:
		return "medium"
	case ThinkingHigh:
		return "high"
	case ThinkingXHigh:
		return "max"
	}
	return ""
}

// OpenAIReasoningEffort maps a level to OpenAI's reasoning_effort for
// modelID: minimal stays "minimal" for the GPT-5 family and becomes "low"
// for models without it (o-series and others); low, medium and high map to
// themselves; xhigh → high; off → "" (send no reasoning parameter).
func OpenAIReasoningEffort(level ThinkingLevel, modelID string) string {
	switch level {
	case ThinkingMinimal:
		if supportsMinimalEffort(modelID) {
			return "minimal"
		}
		return "low"
	case ThinkingLow, ThinkingMedium, ThinkingHigh:
		return string(level)
	case ThinkingXHigh:
		return "high"
	}
	return ""
}

func supportsMinimalEffort(modelID string) bool {
	id := strings.ToLower(modelID)
	if i := strings.LastIndexByte(id, '/'); i >= 0 { // "openai/gpt-5" on routers
		id = id[i+1:]
	}
	return strings.HasPrefix(id, "gpt-5")
}
