package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
)

// quiet is a logger for tests.
var quiet = slog.New(slog.DiscardHandler)

// step is one scripted answer of a fake provider: nil for success.
type step func(ctx context.Context) error

func ok() step { return nil }

func apiErr(status int, typ, msg string) step {
	return func(context.Context) error {
		return &llm.APIError{Provider: "p", Model: "m", StatusCode: status, Type: typ, Message: msg}
	}
}

func overloaded() step   { return apiErr(529, "overloaded_error", "Overloaded") }
func serverError() step  { return apiErr(500, "api_error", "Internal server error") }
func unauthorized() step { return apiErr(401, "authentication_error", "invalid x-api-key") }

func rateLimited(retry time.Duration) step {
	return func(context.Context) error {
		return &llm.APIError{StatusCode: 429, Type: "rate_limit_error", Message: "slow down", RetryAfter: retry}
	}
}

// fakeProvider answers from a script; past its end it repeats the last step.
type fakeProvider struct {
	name  string
	mu    sync.Mutex
	steps []step
	calls int
	log   *[]string // shared attempt log
	logMu *sync.Mutex
}

func (f *fakeProvider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event)) (*llm.AssistantMessage, error) {
	f.mu.Lock()
	var s step
	if len(f.steps) > 0 {
		s = f.steps[min(f.calls, len(f.steps)-1)]
	}
	f.calls++
	f.mu.Unlock()
	f.logMu.Lock()
	*f.log = append(*f.log, f.name)
	f.logMu.Unlock()

	b := llm.NewBuilder(req.Model, emit)
	b.Start()
	i := b.BeginText()
	b.AppendText(i, "partial from "+f.name)
	if s != nil {
		if err := s(ctx); err != nil {
			return b.Fail(ctx, err)
		}
	}
	return b.Finish()
}

// recorder collects a Stream's events and observer calls.
type recorder struct {
	events    []llm.Event
	attempts  []string
	fallbacks []string
}

func (r *recorder) emit(e llm.Event) { r.events = append(r.events, e) }

func (r *recorder) observer() *Observer {
	return &Observer{
		OnAttempt: func(c Candidate, err error, d time.Duration) {
			s := c.Model.ID + ":ok"
			if err != nil {
				s = c.Model.ID + ":" + llm.Classify(err).String()
			}
			r.attempts = append(r.attempts, s)
		},
		OnFallback: func(from, to Candidate, reason string) {
			r.fallbacks = append(r.fallbacks, from.Model.ID+">"+to.Model.ID+":"+reason)
		},
	}
}

// terminal counts done and error events; fallbacks lists model_fallback
// targets.
func (r *recorder) terminal() (done, failed int, fallbacks []string) {
	for _, e := range r.events {
		switch e.Type {
		case llm.EventDone:
			done++
		case llm.EventError:
			failed++
		case llm.EventModelFallback:
			fallbacks = append(fallbacks, e.ModelID)
		}
	}
	return
}

func fakeCandidates(log *[]string, mu *sync.Mutex, scripts map[string][]step, names ...string) []Candidate {
	var cs []Candidate
	for _, n := range names {
		cs = append(cs, Candidate{
			Provider: "prov-" + n,
			Client:   &fakeProvider{name: n, steps: scripts[n], log: log, logMu: mu},
			Model:    llm.Model{ID: n, API: "fake", Provider: "prov-" + n},
		})
	}
	return cs
}

// TestFallbackRules drives the loop with scripted providers: which models
// are tried, in which order, and how the run ends.
func TestFallbackRules(t *testing.T) {
	tests := []struct {
		name      string
		models    []string
		scripts   map[string][]step
		cooling   []string // keys cooling down before the run
		attempts  string   // models tried, in order
		winner    string   // "" for failure
		errHas    []string // substrings of the error
		fallbacks string   // OnFallback calls
		events    string   // model_fallback targets
	}{
		{
			name: "primary answers", models: []string{"A", "B"},
			attempts: "A", winner: "A",
		},
		{
			name: "error then fallback", models: []string{"A", "B"},
			scripts:  map[string][]step{"A": {serverError()}},
			attempts: "A B", winner: "B",
			fallbacks: "A>B:fallback_error", events: "B",
		},
		{
			name: "transient retried on the next pass", models: []string{"A", "B"},
			scripts:  map[string][]step{"A": {overloaded(), ok()}, "B": {serverError()}},
			attempts: "A B A", winner: "A",
			fallbacks: "A>B:fallback_error B>A:fallback_error", events: "B A",
		},
		{
			name: "two models always transient: six attempts", models: []string{"A", "B"},
			scripts:   map[string][]step{"A": {overloaded()}, "B": {overloaded()}},
			attempts:  "A B A B A B",
			errHas:    []string{"all models failed: prov-A/A: overloaded (529); prov-B/B: overloaded (529); prov-A/A: overloaded (529); prov-B/B: overloaded (529); prov-A/A: overloaded (529); prov-B/B: overloaded (529)"},
			events:    "B A B A B",
			fallbacks: "A>B:fallback_error B>A:fallback_error A>B:fallback_error B>A:fallback_error A>B:fallback_error",
		},
		{
			name: "one model: three failures", models: []string{"A"},
			scripts:  map[string][]step{"A": {serverError()}},
			attempts: "A A A",
			errHas:   []string{"prov-A/A: 500 api_error: Internal server error"},
			events:   "A A",
		},
		{
			name: "fatal fails at once", models: []string{"A", "B"},
			scripts:  map[string][]step{"A": {unauthorized()}, "B": {serverError(), serverError(), ok()}},
			attempts: "A B B B", winner: "B",
			fallbacks: "A>B:fallback_error", events: "B B B",
		},
		{
			name: "fatal everywhere", models: []string{"A", "B"},
			scripts:   map[string][]step{"A": {unauthorized()}, "B": {apiErr(403, "permission_error", "no access")}},
			attempts:  "A B",
			errHas:    []string{"prov-A/A: 401 authentication_error: invalid x-api-key; prov-B/B: 403 permission_error: no access"},
			fallbacks: "A>B:fallback_error", events: "B",
		},
		{
			name: "rate limit cools down, not retried", models: []string{"A", "B"},
			scripts:  map[string][]step{"A": {rateLimited(2 * time.Minute)}, "B": {serverError(), ok()}},
			attempts: "A B B", winner: "B",
			fallbacks: "A>B:fallback_rate_limit", events: "B B",
		},
		{
			name: "rate limits everywhere", models: []string{"A", "B"},
			scripts:  map[string][]step{"A": {rateLimited(2 * time.Minute)}, "B": {rateLimited(0)}},
			attempts: "A B",
			errHas: []string{
				"prov-A/A: rate limited (429), retry after 2m0s; prov-B/B: rate limited (429), retry after 5m0s; ",
				"prov-A/A: skipped, cooling down for 2m0s; prov-B/B: skipped, cooling down for 5m0s",
			},
			fallbacks: "A>B:fallback_rate_limit", events: "B",
		},
		{
			name: "soft rate limit", models: []string{"A", "B"},
			scripts:  map[string][]step{"A": {apiErr(0, "", "Rate limit reached for requests")}},
			attempts: "A B", winner: "B",
			fallbacks: "A>B:fallback_rate_limit", events: "B",
		},
		{
			name: "primary cooling down from another session", models: []string{"A", "B"},
			cooling:  []string{"prov-A/A"},
			attempts: "B", winner: "B",
			fallbacks: "A>B:fallback_rate_limit", events: "B",
		},
		{
			name: "everything cooling down", models: []string{"A", "B"},
			cooling:  []string{"prov-A/A", "prov-B/B"},
			attempts: "",
			errHas:   []string{"all models failed: prov-A/A: skipped, cooling down for 1m0s; prov-B/B: skipped"},
		},
		{
			name: "three models, mixed", models: []string{"A", "B", "C"},
			scripts:   map[string][]step{"A": {serverError()}, "B": {unauthorized()}, "C": {overloaded()}},
			attempts:  "A B C A C A C",
			errHas:    []string{"prov-B/B: 401"},
			events:    "B C A C A C",
			fallbacks: "A>B:fallback_error B>C:fallback_error C>A:fallback_error A>C:fallback_error C>A:fallback_error A>C:fallback_error",
		},
		{
			name: "network error counts as a failure", models: []string{"A", "B"},
			scripts: map[string][]step{"A": {func(context.Context) error {
				return fmt.Errorf("prov-A A: %w", errors.New("connection refused"))
			}}},
			attempts: "A B", winner: "B",
			fallbacks: "A>B:fallback_error", events: "B",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				log   []string
				logMu sync.Mutex
			)
			clock := newClock()
			h := OpenHealth("", &HealthOptions{Now: clock.Now})
			for _, k := range tt.cooling {
				h.RecordRateLimit(k, clock.Now().Add(time.Minute), nil)
			}
			r := NewRouter(&Options{PassBackoff: -1, Health: h, Logger: quiet})
			rec := new(recorder)
			cands := fakeCandidates(&log, &logMu, tt.scripts, tt.models...)
			msg, got, err := r.Stream(t.Context(), cands, llm.Context{}, rec.emit, rec.observer())

			if g := strings.Join(log, " "); g != tt.attempts {
				t.Errorf("attempts = %q, want %q", g, tt.attempts)
			}
			if len(rec.attempts) != len(log) {
				t.Errorf("OnAttempt called %d times for %d attempts", len(rec.attempts), len(log))
			}
			done, failed, fbEvents := rec.terminal()
			if done+failed != 1 {
				t.Errorf("terminal events: %d done, %d error; want exactly one", done, failed)
			}
			if g := strings.Join(fbEvents, " "); g != tt.events {
				t.Errorf("model_fallback events = %q, want %q", g, tt.events)
			}
			if g := strings.Join(rec.fallbacks, " "); g != tt.fallbacks {
				t.Errorf("OnFallback = %q, want %q", g, tt.fallbacks)
			}
			if tt.winner != "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if got.Model.ID != tt.winner || msg.Model != tt.winner || msg.Text() != "partial from "+tt.winner {
					t.Errorf("winner %s, message %+v", got.Model.ID, msg)
				}
				if done != 1 {
					t.Error("no done event")
				}
				return
			}
			var ex *ExhaustedError
			if !errors.As(err, &ex) {
				t.Fatalf("err = %v, want *ExhaustedError", err)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q\nlacks %q", err, s)
				}
			}
			if msg == nil || msg.StopReason != llm.StopReasonError || msg.ErrorMessage != err.Error() {
				t.Errorf("failed message = %+v", msg)
			}
			if last := rec.events[len(rec.events)-1]; last.Type != llm.EventError || last.Error.ErrorMessage != err.Error() {
				t.Errorf("last event = %+v", last)
			}
		})
	}
}

// TestRateLimitExpiresBetweenPasses: the pool drops a model while its
// cooldown is active, not for ever: a short retry-after that is over by the
// next pass lets the model in again.
func TestRateLimitExpiresBetweenPasses(t *testing.T) {
	var (
		log   []string
		logMu sync.Mutex
	)
	clock := newClock()
	h := OpenHealth("", &HealthOptions{Now: clock.Now})
	advance := func(context.Context) error { clock.Advance(2 * time.Second); return errors.New("boom") }
	cands := fakeCandidates(&log, &logMu, map[string][]step{
		"A": {rateLimited(time.Second), ok()},
		"B": {advance},
	}, "A", "B")
	_, got, err := NewRouter(&Options{PassBackoff: -1, Health: h, Logger: quiet}).Stream(t.Context(), cands, llm.Context{}, nil, nil)
	if err != nil || got.Model.ID != "A" || strings.Join(log, " ") != "A B A" {
		t.Errorf("got %s, %v, attempts %v", got.Model.ID, err, log)
	}
}

// TestHealthRecorded: what the loop leaves in Health.
func TestHealthRecorded(t *testing.T) {
	var (
		log   []string
		logMu sync.Mutex
	)
	clock := newClock()
	h := OpenHealth("", &HealthOptions{Now: clock.Now})
	cands := fakeCandidates(&log, &logMu, map[string][]step{
		"A": {overloaded(), ok()},
		"B": {rateLimited(90 * time.Second)},
	}, "A", "B")
	if _, _, err := NewRouter(&Options{PassBackoff: -1, Health: h, Logger: quiet}).Stream(t.Context(), cands, llm.Context{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	snap := h.Snapshot()
	if a := snap["prov-A/A"]; a.ConsecutiveFailures != 0 || !a.RetryAfter.IsZero() || !strings.Contains(a.LastError, "Overloaded") {
		t.Errorf("A = %+v", a)
	}
	if b := snap["prov-B/B"]; b.ConsecutiveFailures != 1 || !b.RetryAfter.Equal(clock.Now().Add(90*time.Second)) {
		t.Errorf("B = %+v", b)
	}
}

func TestStreamBadInput(t *testing.T) {
	r := NewRouter(&Options{PassBackoff: -1, Logger: quiet})
	if _, _, err := r.Stream(t.Context(), nil, llm.Context{}, nil, nil); !errors.Is(err, ErrNoCandidates) {
		t.Errorf("no candidates: %v", err)
	}
	if _, _, err := r.Stream(t.Context(), []Candidate{{Provider: "p", Model: llm.Model{ID: "m"}}}, llm.Context{}, nil, nil); err == nil {
		t.Error("nil client accepted")
	}
}

// TestAbortStops: a cancelled context stops the loop at once, without
// trying the fallback or recording anything.
func TestAbortStops(t *testing.T) {
	var (
		log   []string
		logMu sync.Mutex
	)
	ctx, cancel := context.WithCancel(t.Context())
	cands := fakeCandidates(&log, &logMu, map[string][]step{
		"A": {func(ctx context.Context) error { cancel(); <-ctx.Done(); return ctx.Err() }},
	}, "A", "B")
	h := OpenHealth("", nil)
	rec := new(recorder)
	msg, _, err := NewRouter(&Options{PassBackoff: -1, Health: h, Logger: quiet}).Stream(ctx, cands, llm.Context{}, rec.emit, rec.observer())
	if llm.Classify(err) != llm.ClassAborted || msg.StopReason != llm.StopReasonAborted {
		t.Errorf("err %v, message %+v", err, msg)
	}
	if strings.Join(log, " ") != "A" {
		t.Errorf("attempts %v", log)
	}
	if len(h.Keys()) != 0 {
		t.Errorf("abort recorded in health: %v", h.Keys())
	}
	if done, failed, _ := rec.terminal(); done != 0 || failed != 1 {
		t.Errorf("terminal events %d/%d", done, failed)
	}
}
