package llm

import "testing"

func TestParseThinkingLevel(t *testing.T) {
	for in, want := range map[string]ThinkingLevel{
		"": ThinkingOff, "off": ThinkingOff, "minimal": ThinkingMinimal, "low": ThinkingLow,
		"medium": ThinkingMedium, " High ": ThinkingHigh, "xhigh": ThinkingXHigh,
	} {
		got, err := ParseThinkingLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseThinkingLevel(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseThinkingLevel("max"); err == nil {
		t.Error("max accepted")
	}
}

func TestBudget(t *testing.T) {
	for l, want := range map[ThinkingLevel]int{
		"": 0, ThinkingOff: 0, ThinkingMinimal: 1024, ThinkingLow: 2048,
		ThinkingMedium: 8192, ThinkingHigh: 16384, ThinkingXHigh: 16384, "bogus": 0,
	} {
		if got := l.Budget(); got != want {
			t.Errorf("%q.Budget() = %d, want %d", l, got, want)
		}
	}
}

func TestAnthropicThinking(t *testing.T) {
	tests := []struct {
		level              ThinkingLevel
		maxTokens, modelMx int
		wantMax, wantBudg  int
	}{
		{ThinkingOff, 4096, 64000, 4096, 0},
		{ThinkingMinimal, 4096, 64000, 5120, 1024},
		{ThinkingLow, 4096, 64000, 6144, 2048},
		{ThinkingMedium, 32000, 64000, 40192, 8192},
		{ThinkingHigh, 32000, 64000, 48384, 16384},
		{ThinkingXHigh, 32000, 64000, 48384, 16384},
		{ThinkingHigh, 60000, 64000, 64000, 16384}, // capped at the model max
		{ThinkingHigh, 8192, 8192, 8192, 7168},     // no room: budget shrinks
		{ThinkingMinimal, 1000, 1000, 1000, 0},     // budget would drop under 1024: off
		{ThinkingMinimal, 1500, 1500, 1500, 1024},
		{ThinkingMedium, 4096, 0, 12288, 8192},       // unknown model max
		{ThinkingMedium, 100000, 16000, 16000, 8192}, // capped, still room
	}
	for _, tt := range tests {
		mx, b := AnthropicThinking(tt.level, tt.maxTokens, tt.modelMx)
		if mx != tt.wantMax || b != tt.wantBudg {
			t.Errorf("AnthropicThinking(%s, %d, %d) = %d, %d; want %d, %d",
				tt.level, tt.maxTokens, tt.modelMx, mx, b, tt.wantMax, tt.wantBudg)
		}
		if b > 0 && b >= mx {
			t.Errorf("budget %d not below max_tokens %d", b, mx)
		}
	}
}

func TestOpenAIReasoningEffort(t *testing.T) {
	tests := []struct {
		level ThinkingLevel
		model string
		want  string
	}{
		{ThinkingOff, "gpt-5", ""},
		{"", "gpt-5", ""},
		{ThinkingMinimal, "gpt-5", "minimal"},
		{ThinkingMinimal, "gpt-5-mini", "minimal"},
		{ThinkingMinimal, "openai/gpt-5", "minimal"},
		{ThinkingMinimal, "o3", "low"},
		{ThinkingMinimal, "o4-mini", "low"},
		{ThinkingMinimal, "qwen3", "low"},
		{ThinkingLow, "o3", "low"},
		{ThinkingMedium, "o3", "medium"},
		{ThinkingHigh, "gpt-5", "high"},
		{ThinkingXHigh, "gpt-5", "high"},
	}
	for _, tt := range tests {
		if got := OpenAIReasoningEffort(tt.level, tt.model); got != tt.want {
			t.Errorf("OpenAIReasoningEffort(%q, %q) = %q, want %q", tt.level, tt.model, got, tt.want)
		}
	}
}

func TestAnthropicEffort(t *testing.T) {
	for l, want := range map[ThinkingLevel]string{
		ThinkingOff: "", ThinkingMinimal: "low", ThinkingLow: "low", ThinkingMedium: "medium",
		ThinkingHigh: "high", ThinkingXHigh: "max",
	} {
		if got := AnthropicEffort(l); got != want {
			t.Errorf("AnthropicEffort(%q) = %q, want %q", l, got, want)
		}
	}
}

func TestMaxTokensFor(t *testing.T) {
	for _, tt := range []struct {
		opt, model, want int
	}{
		{0, 64000, 32000}, {0, 8192, 8192}, {1000, 64000, 1000}, {0, 0, DefaultMaxTokens},
	} {
		if got := (Options{MaxTokens: tt.opt}).MaxTokensFor(Model{MaxTokens: tt.model}); got != tt.want {
			t.Errorf("MaxTokensFor(%d, %d) = %d, want %d", tt.opt, tt.model, got, tt.want)
		}
	}
}
