package routing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// Requests queued behind the one that gets a 429 must not follow it to the
// model: the cooldown is checked again when the slot is granted.
func TestCooldownRecheckedWhenSlotGranted(t *testing.T) {
	const queued = 5
	primary, fallback := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	gate := make(chan struct{})
	primary.Enqueue(llmtest.Status(429).WithGate(gate)) // a slow 429
	primary.SetDefault(llmtest.Status(429))
	fallback.SetDefault(llmtest.Text("from fallback"))
	cands := []Candidate{anthropicCandidate(t, primary, "anthropic", "claude-x"), anthropicCandidate(t, fallback, "zai", "glm")}
	limits := NewLimiters(map[string]int{"anthropic": 1})
	r := NewRouter(&Options{Limiters: limits, Logger: quiet})

	var wg sync.WaitGroup
	errs := make([]error, queued+1)
	texts := make([]string, queued+1)
	recs := make([]*recorder, queued+1)
	for i := range queued + 1 {
		recs[i] = new(recorder)
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, _, err := r.Stream(t.Context(), cands, userContext(fmt.Sprint("req-", i)), recs[i].emit, recs[i].observer())
			errs[i] = err
			if msg != nil {
				texts[i] = msg.Text()
			}
		}()
		if i == 0 {
			if !primary.WaitInFlight(1, 5*time.Second) {
				t.Fatal("the first request never arrived")
			}
		} else {
			waitFor(t, "queued", func() bool { _, w := limits.Stats("anthropic"); return w == i })
		}
	}
	close(gate)
	wg.Wait()
	for i := range queued + 1 {
		if errs[i] != nil || texts[i] != "from fallback" {
			t.Errorf("stream %d: %q, %v", i, texts[i], errs[i])
		}
	}
	if n := primary.Count(); n != 1 {
		t.Errorf("the rate-limited model got %d requests, want 1 (queued requests followed the 429)", n)
	}
	if n := fallback.Count(); n != queued+1 {
		t.Errorf("fallback got %d requests, want %d", n, queued+1)
	}
	// A queued stream never tried the primary: no attempt on it, and one
	// fallback from it, for the rate limit.
	for i := 1; i <= queued; i++ {
		if fmt.Sprint(recs[i].attempts) != "[glm:ok]" || fmt.Sprint(recs[i].fallbacks) != "[claude-x>glm:fallback_rate_limit]" {
			t.Errorf("stream %d: attempts %v, fallbacks %v", i, recs[i].attempts, recs[i].fallbacks)
		}
	}
}

// When every model answers 529, the passes are spaced out: a pause of
// about DefaultPassBackoff, then twice that, each jittered to at least half.
func TestPassesBackOff(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	handler := func(llmtest.Recorded) llmtest.Response {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		return llmtest.Status(529)
	}
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	a.Handle(handler)
	b.Handle(handler)
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "claude-x"), anthropicCandidate(t, b, "zai", "glm")}
	_, _, err := NewRouter(&Options{Logger: quiet}).Stream(t.Context(), cands, userContext("hi"), nil, nil)
	var ex *ExhaustedError
	if !errors.As(err, &ex) || len(ex.Attempts) != 6 {
		t.Fatalf("err = %v, want all 6 attempts failed", err)
	}
	if len(arrivals) != 6 {
		t.Fatalf("%d requests, want 6 (3 passes of 2)", len(arrivals))
	}
	for _, c := range []struct {
		after int
		min   time.Duration
	}{{2, DefaultPassBackoff / 2}, {4, DefaultPassBackoff}} {
		if gap := arrivals[c.after].Sub(arrivals[c.after-1]); gap < c.min {
			t.Errorf("pause before pass %d: %v, want at least %v", c.after/2+1, gap, c.min)
		}
	}
}

// The pause never goes past the prompt's deadline: with less time left
// than the pause, the run ends with what it has (not an abort).
func TestPassBackoffWithinDeadline(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Status(529))
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "claude-x")}
	ctx, cancel := context.WithTimeout(t.Context(), DefaultPassBackoff/4)
	defer cancel()
	_, _, err := NewRouter(&Options{Logger: quiet}).Stream(ctx, cands, userContext("hi"), nil, nil)
	var ex *ExhaustedError
	if !errors.As(err, &ex) || a.Count() != 1 {
		t.Errorf("err = %v after %d requests; want the run ended after pass 1", err, a.Count())
	}
	if ctx.Err() != nil {
		t.Error("the run waited until the deadline")
	}
}

// A prompt cancelled during the pause ends at once, aborted.
func TestPassBackoffCancelled(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Status(529))
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "claude-x")}
	ctx, cancel := context.WithCancel(t.Context())
	r := NewRouter(&Options{Logger: quiet, PassBackoff: time.Hour})
	done := make(chan error, 1)
	rec := new(recorder)
	go func() { _, _, err := r.Stream(ctx, cands, userContext("hi"), rec.emit, nil); done <- err }()
	if !a.WaitCount(1, 5*time.Second) {
		t.Fatal("no request")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want an abort", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pause did not end with the prompt")
	}
	if _, failed, _ := rec.terminal(); failed != 1 {
		t.Errorf("%d error events, want 1", failed)
	}
}

func TestPassPauseJitter(t *testing.T) {
	for _, c := range []struct {
		backoff time.Duration
		pass    int
		jitter  float64
		want    time.Duration
	}{
		{time.Second, 1, 0, 500 * time.Millisecond},
		{time.Second, 1, 0.5, 750 * time.Millisecond},
		{time.Second, 2, 0, time.Second},
		{time.Second, 2, 0.999999, 2*time.Second - time.Microsecond},
		{-1, 2, 0.5, 0},
	} {
		r := NewRouter(&Options{PassBackoff: c.backoff})
		r.jitter = func() float64 { return c.jitter }
		if got := r.passPause(c.pass); got.Round(time.Microsecond) != c.want {
			t.Errorf("backoff %v pass %d jitter %v: %v, want %v", c.backoff, c.pass, c.jitter, got, c.want)
		}
	}
}
