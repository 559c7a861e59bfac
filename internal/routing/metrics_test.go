package routing

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/metrics"
)

// usageProvider answers with a reply that used 7 input and 3 output tokens.
type usageProvider struct{}

func (usageProvider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	b := llm.NewBuilder(req.Model, emit)
	b.Start()
	i := b.BeginText()
	b.AppendText(i, "hi")
	msg, err := b.Finish()
	if msg != nil {
		msg.Usage.Input, msg.Usage.Output = 7, 3
	}
	return msg, err
}

// TestRouterCountsAttempts: every attempt of the fallback loop is counted
// by provider, model and outcome, with its time to first event and its
// tokens; a model skipped for its cooldown is no attempt.
func TestRouterCountsAttempts(t *testing.T) {
	m := metrics.New()
	m.SetBounds(nil, nil, []string{"prov-a", "prov-b", "prov-c"}, []string{"prov-a/a", "prov-b/b", "prov-c/c"})
	health := OpenHealth("", nil)
	r := NewRouter(&Options{Health: health, Logger: quiet, PassBackoff: -1, Metrics: m})
	var log []string
	var mu sync.Mutex
	cands := fakeCandidates(&log, &mu, map[string][]step{"a": {serverError()}}, "a", "b", "c")
	cands[1].Client = usageProvider{}
	health.RecordRateLimit("prov-c/c", time.Now().Add(time.Hour), nil)
	if _, winner, err := r.Stream(context.Background(), cands, llm.Context{}, nil, nil); err != nil || winner.Model.ID != "b" {
		t.Fatalf("Stream: %v, winner %s", err, winner.Model.ID)
	}
	// Twice more: a fails (1 attempt each), b answers.
	for range 2 {
		r.Stream(context.Background(), cands, llm.Context{}, nil, nil)
	}
	m.SetCooldowns(health.ActiveCooldowns)
	text := scrapeText(t, m)
	for _, l := range []string{
		`beige_llm_attempts_total{model="a",outcome="error",provider="prov-a"} 3`,
		`beige_llm_attempts_total{model="b",outcome="ok",provider="prov-b"} 3`,
		`beige_llm_time_to_first_token_seconds_count{model="b",provider="prov-b"} 3`,
		`beige_llm_tokens_total{direction="input",model="b",provider="prov-b"} 21`,
		`beige_llm_tokens_total{direction="output",model="b",provider="prov-b"} 9`,
		`beige_llm_queue_wait_seconds_count{provider="prov-a"} 3`,
		`beige_llm_cooldowns_active 1`,
	} {
		if !strings.Contains(text, l+"\n") {
			t.Errorf("missing %q", l)
		}
	}
	if strings.Contains(text, `model="c",outcome`) {
		t.Errorf("a model in cooldown was counted as an attempt:\n%s", text)
	}
}

func scrapeText(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// slowFirstToken starts its reply at once and sends its first text after
// 200 ms.
type slowFirstToken struct{}

func (slowFirstToken) Stream(ctx context.Context, req llm.Request, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	b := llm.NewBuilder(req.Model, emit)
	b.Start()
	time.Sleep(200 * time.Millisecond)
	i := b.BeginText()
	b.AppendText(i, "late")
	return b.Finish()
}

// TestTimeToFirstTokenIsTheFirstOutput: the time to first token runs to
// the first text, not to the start event that comes with the headers.
func TestTimeToFirstTokenIsTheFirstOutput(t *testing.T) {
	m := metrics.New()
	m.SetBounds(nil, nil, []string{"p"}, []string{"p/slow"})
	r := NewRouter(&Options{Logger: quiet, Metrics: m})
	c := Candidate{Provider: "p", Client: slowFirstToken{}, Model: llm.Model{ID: "slow", API: "fake", Provider: "p"}}
	if _, _, err := r.Stream(context.Background(), []Candidate{c}, llm.Context{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	text := scrapeText(t, m)
	var sum float64
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, `beige_llm_time_to_first_token_seconds_sum{model="slow",provider="p"} `); ok {
			fmt.Sscan(v, &sum)
		}
	}
	if sum < 0.2 {
		t.Errorf("time to first token %.3fs, want at least the 0.2 s before the first text", sum)
	}
}
