package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/metrics/metricstest"
)

// Scrape returns what Handler serves.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// CheckPromtool is metricstest.CheckPromtool.
func CheckPromtool(t *testing.T, text string) { metricstest.CheckPromtool(t, text) }

func hasLine(t *testing.T, text, line string) {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("missing %q in the exposition", line)
}

func TestCountsAndPromtool(t *testing.T) {
	m := New()
	m.SetBounds([]string{"alice"}, []string{"read", "exec"}, []string{"anthropic"}, []string{"anthropic/claude"})
	m.SetCooldowns(func() int { return 2 })
	m.SetSessions(func() int { return 3 })
	m.SetPrompts(func() int { return 1 })
	m.ToolCall("alice", "read", DecisionAllow, OutcomeOK, 10*time.Millisecond)
	m.ToolCall("alice", "read", DecisionAllow, OutcomeOK, 20*time.Millisecond)
	m.ToolCall("alice", "exec", DecisionAllow, OutcomeError, time.Second)
	m.ToolCall("alice", "write", DecisionDeny, OutcomeDenied, time.Millisecond)
	m.HelperRestart("alice")
	m.ExecFallback("alice")
	m.ExecFallback("alice")
	m.LLM(LLMAttempt{Provider: "anthropic", Model: "claude", Outcome: OutcomeOK, FirstToken: 300 * time.Millisecond, Duration: 2 * time.Second, InputTokens: 120, OutputTokens: 40})
	m.LLM(LLMAttempt{Provider: "anthropic", Model: "claude", Outcome: OutcomeError, Duration: time.Second})
	done := m.QueueEnter("anthropic")
	m.HTTPRequest("POST /api/agents/{name}/exec", 200, time.Millisecond)
	m.HTTPRequest("", 403, time.Millisecond)
	m.AuditRecord()
	m.AuditRecord()
	m.AuditHead(41)
	m.EgressConnection("alice", DecisionAllow)
	m.EgressConnection("alice", DecisionDeny)

	text := scrape(t, m)
	for _, l := range []string{
		`beige_tool_calls_total{agent="alice",decision="allow",outcome="ok",tool="read"} 2`,
		`beige_tool_calls_total{agent="alice",decision="allow",outcome="error",tool="exec"} 1`,
		`beige_tool_calls_total{agent="alice",decision="deny",outcome="denied",tool="_other"} 1`,
		`beige_tool_call_duration_seconds_count{agent="alice",tool="read"} 2`,
		`beige_sandbox_helper_restarts_total{agent="alice"} 1`,
		`beige_sandbox_exec_fallbacks_total{agent="alice"} 2`,
		`beige_llm_attempts_total{model="claude",outcome="ok",provider="anthropic"} 1`,
		`beige_llm_attempts_total{model="claude",outcome="error",provider="anthropic"} 1`,
		`beige_llm_time_to_first_token_seconds_count{model="claude",provider="anthropic"} 1`,
		`beige_llm_attempt_duration_seconds_count{model="claude",provider="anthropic"} 2`,
		`beige_llm_tokens_total{direction="input",model="claude",provider="anthropic"} 120`,
		`beige_llm_tokens_total{direction="output",model="claude",provider="anthropic"} 40`,
		`beige_llm_queue_depth{provider="anthropic"} 1`,
		`beige_llm_cooldowns_active 2`,
		`beige_sessions_active 3`,
		`beige_prompts_active 1`,
		`beige_http_requests_total{route="POST /api/agents/{name}/exec",status="200"} 1`,
		`beige_http_requests_total{route="none",status="403"} 1`,
		`beige_audit_records_total 2`,
		`beige_audit_head_sequence 41`,
		`beige_egress_connections_total{agent="alice",decision="allow"} 1`,
		`beige_egress_connections_total{agent="alice",decision="deny"} 1`,
	} {
		hasLine(t, text, l)
	}
	done()
	done() // once only
	text = scrape(t, m)
	hasLine(t, text, `beige_llm_queue_depth{provider="anthropic"} 0`)
	hasLine(t, text, `beige_llm_queue_wait_seconds_count{provider="anthropic"} 1`)
	CheckPromtool(t, text)

	st := m.Stats()
	if st.ToolCalls != 4 || st.ToolErrors != 2 || st.Cooldowns != 2 || st.AuditHead == nil || *st.AuditHead != 41 {
		t.Errorf("Stats = %+v (head %v), want 4 calls, 2 errors, 2 cooldowns, head 41", st, st.AuditHead)
	}
}

// TestLabelsBounded: names a client or an agent chooses (an unknown agent,
// tool, provider or model, an outcome string) never become label values,
// whatever they are, so the number of series stays bounded.
func TestLabelsBounded(t *testing.T) {
	m := New()
	m.SetBounds([]string{"alice"}, []string{"read"}, []string{"anthropic"}, []string{"anthropic/claude"})
	for i := range 50 {
		s := "-" + strings.Repeat("x", i)
		m.ToolCall("alice"+s, "tool"+s, "maybe"+s, "weird"+s, time.Millisecond)
		m.LLM(LLMAttempt{Provider: "anthropic", Model: "claude" + s, Outcome: "o" + s})
		m.LLM(LLMAttempt{Provider: "p" + s, Model: "claude"})
		m.EgressConnection("bob"+s, "x"+s)
		m.HTTPRequest("GET /api/health", 1000+i, 0)
	}
	text := scrape(t, m)
	hasLine(t, text, `beige_tool_calls_total{agent="_other",decision="deny",outcome="error",tool="_other"} 50`)
	hasLine(t, text, `beige_llm_attempts_total{model="_other",outcome="error",provider="anthropic"} 50`)
	hasLine(t, text, `beige_llm_attempts_total{model="_other",outcome="error",provider="_other"} 50`)
	hasLine(t, text, `beige_egress_connections_total{agent="_other",decision="deny"} 50`)
	hasLine(t, text, `beige_http_requests_total{route="GET /api/health",status="0"} 50`)
	if strings.Contains(text, "xxx") {
		t.Errorf("a chosen name became a label value:\n%s", text)
	}
	CheckPromtool(t, text)
}

func TestNilSafe(t *testing.T) {
	var m *Metrics
	m.ToolCall("a", "b", DecisionAllow, OutcomeOK, 0)
	m.LLM(LLMAttempt{})
	m.QueueEnter("p")()
	m.HTTPRequest("", 200, 0)
	m.AuditRecord()
	m.AuditHead(1)
	m.SetSessions(func() int { return 1 })
	if s := m.Stats(); s.ToolCalls != 0 {
		t.Fatal(s)
	}
}
