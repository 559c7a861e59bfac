package routing

// Tests against scripted provider servers (llmtest) through the real
// provider implementations.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	_ "github.com/beige-dev/beige/internal/llm/providers"
	"github.com/beige-dev/beige/internal/routing/routingtest"
)

// serverCandidate builds a candidate for model on srv, speaking api.
func serverCandidate(t *testing.T, srv *llmtest.Server, api, provider, model string) Candidate {
	t.Helper()
	p, err := llm.NewProvider(llm.ProviderConfig{Name: provider, API: api, BaseURL: srv.URL(), APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	return Candidate{
		Provider: provider, Client: p,
		Model: llm.Model{ID: model, API: api, Provider: provider, BaseURL: srv.URL(), MaxTokens: 1024, Input: []string{"text"}},
	}
}

func anthropicCandidate(t *testing.T, srv *llmtest.Server, provider, model string) Candidate {
	return serverCandidate(t, srv, llm.APIAnthropicMessages, provider, model)
}

func userContext(text string) llm.Context {
	return llm.Context{Messages: []llm.Message{{User: &llm.UserMessage{Content: []llm.Content{llm.Text(text)}, Timestamp: 1}}}}
}

// (a) A 429 with retry-after cools the primary down for everyone, across a
// restart, until the cooldown ends.
func TestServerRateLimitCooldown(t *testing.T) {
	clock := newClock()
	path := filepath.Join(t.TempDir(), "data", HealthFile)
	primary := llmtest.NewAnthropic(t)
	fallback := llmtest.NewOpenAI(t)
	primary.Enqueue(llmtest.Status(429).WithHeader("retry-after", "120"))
	primary.SetDefault(llmtest.Text("from primary"))
	fallback.SetDefault(llmtest.Text("from fallback"))
	cands := []Candidate{
		anthropicCandidate(t, primary, "anthropic", "claude-x"),
		serverCandidate(t, fallback, llm.APIOpenAICompletions, "zai", "glm"),
	}

	h := OpenHealth(path, &HealthOptions{Now: clock.Now})
	r := NewRouter(&Options{PassBackoff: -1, Health: h, Logger: quiet})
	rec := new(recorder)
	msg, got, err := r.Stream(t.Context(), cands, userContext("hi"), rec.emit, rec.observer())
	if err != nil || msg.Text() != "from fallback" || got.Key() != "zai/glm" {
		t.Fatalf("first stream: %q from %s, %v", msg.Text(), got.Key(), err)
	}
	if g := strings.Join(rec.attempts, " "); g != "claude-x:rate_limit glm:ok" {
		t.Errorf("attempts = %s", g)
	}
	if g := strings.Join(rec.fallbacks, " "); g != "claude-x>glm:fallback_rate_limit" {
		t.Errorf("fallbacks = %s", g)
	}

	// The cooldown is on disk, about 120 s from now.
	entry := readHealthFile(t, path)["providers"].(map[string]any)["anthropic/claude-x"].(map[string]any)
	until, err := time.Parse(time.RFC3339, entry["retryAfter"].(string))
	if err != nil || !until.Equal(clock.Now().Add(120*time.Second)) {
		t.Errorf("retryAfter = %v (%v), want now+120s", entry["retryAfter"], err)
	}
	if entry["rateLimitedAt"] == nil || entry["consecutiveFailures"] != 1.0 || !strings.Contains(entry["lastError"].(string), "429") {
		t.Errorf("entry = %v", entry)
	}

	// Another session goes straight to the fallback.
	rec = new(recorder)
	msg, _, err = r.Stream(t.Context(), cands, userContext("second session"), rec.emit, rec.observer())
	if err != nil || msg.Text() != "from fallback" {
		t.Fatalf("second stream: %q, %v", msg.Text(), err)
	}
	if primary.Count() != 1 {
		t.Errorf("primary saw %d requests, want 1 (cooling down)", primary.Count())
	}
	if rec.events[0].Type != llm.EventModelFallback || rec.events[0].Provider != "zai" || rec.events[0].ModelID != "glm" {
		t.Errorf("first event = %+v, want model_fallback to zai/glm", rec.events[0])
	}
	if g := strings.Join(rec.fallbacks, " "); g != "claude-x>glm:fallback_rate_limit" {
		t.Errorf("fallbacks = %s", g)
	}

	// A restart: a new Health and Router from the same file.
	h.Close()
	r2 := NewRouter(&Options{PassBackoff: -1, Health: OpenHealth(path, &HealthOptions{Now: clock.Now}), Logger: quiet})
	if _, got, err := r2.Stream(t.Context(), cands, userContext("after restart"), nil, nil); err != nil || got.Key() != "zai/glm" {
		t.Fatalf("after restart: %s, %v", got.Key(), err)
	}
	if primary.Count() != 1 {
		t.Errorf("primary saw %d requests after restart, want 1", primary.Count())
	}

	// Past the cooldown the primary is back.
	clock.Advance(121 * time.Second)
	msg, got, err = r2.Stream(t.Context(), cands, userContext("later"), nil, nil)
	if err != nil || got.Key() != "anthropic/claude-x" || msg.Text() != "from primary" || primary.Count() != 2 {
		t.Errorf("after the cooldown: %q from %s, %v (primary count %d)", msg.Text(), got.Key(), err, primary.Count())
	}
}

// (b) A transient error is retried on the next pass and leaves no cooldown.
func TestServerTransientRetried(t *testing.T) {
	clock := newClock()
	path := filepath.Join(t.TempDir(), HealthFile)
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	a.Enqueue(llmtest.Status(529))
	a.SetDefault(llmtest.Text("A again"))
	b.Enqueue(llmtest.Status(500))
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "a"), anthropicCandidate(t, b, "other", "b")}
	h := OpenHealth(path, &HealthOptions{Now: clock.Now})
	rec := new(recorder)
	msg, got, err := NewRouter(&Options{PassBackoff: -1, Health: h, Logger: quiet}).Stream(t.Context(), cands, userContext("hi"), rec.emit, rec.observer())
	if err != nil || got.Model.ID != "a" || msg.Text() != "A again" {
		t.Fatalf("%q from %s, %v", msg.Text(), got.Model.ID, err)
	}
	if g := strings.Join(rec.attempts, " "); g != "a:transient b:other a:ok" {
		t.Errorf("attempts = %s", g)
	}
	// Arrival times confirm the order A, B, A.
	if ta, tb, ta2 := a.Request(0).Time, b.Request(0).Time, a.Request(1).Time; !ta.Before(tb) || !tb.Before(ta2) {
		t.Errorf("order: A %v, B %v, A %v", ta, tb, ta2)
	}
	if _, ok := h.CooldownUntil("anthropic/a", clock.Now()); ok {
		t.Error("529 set a cooldown")
	}
	if _, ok := h.CooldownUntil("other/b", clock.Now()); ok {
		t.Error("500 set a cooldown")
	}
	h.Close()
	providers := readHealthFile(t, path)["providers"].(map[string]any)
	if e := providers["anthropic/a"].(map[string]any); e["consecutiveFailures"] != 0.0 || e["retryAfter"] != nil {
		t.Errorf("a = %v", e)
	}
	if e := providers["other/b"].(map[string]any); e["consecutiveFailures"] != 1.0 || e["retryAfter"] != nil {
		t.Errorf("b = %v", e)
	}
	// The client was told to reset before each retry.
	if _, _, fb := rec.terminal(); strings.Join(fb, " ") != "b a" {
		t.Errorf("model_fallback events = %v", fb)
	}
}

// (c) Two models failing transiently every time: exactly six attempts.
func TestServerAllTransient(t *testing.T) {
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Status(529))
	b.SetDefault(llmtest.Status(529))
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "claude-x"), anthropicCandidate(t, b, "zai", "glm")}
	rec := new(recorder)
	msg, _, err := NewRouter(&Options{PassBackoff: -1, Logger: quiet}).Stream(t.Context(), cands, userContext("hi"), rec.emit, rec.observer())
	if a.Count()+b.Count() != 6 || a.Count() != 3 {
		t.Errorf("requests: A %d, B %d; want 3 + 3", a.Count(), b.Count())
	}
	want := "all models failed: " + strings.Repeat("anthropic/claude-x: overloaded (529); zai/glm: overloaded (529); ", 3)
	want = strings.TrimSuffix(want, "; ")
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 529 {
		t.Errorf("errors.As APIError: %v", ae)
	}
	if msg.StopReason != llm.StopReasonError || msg.ErrorMessage != want {
		t.Errorf("message = %+v", msg)
	}
	if done, failed, _ := rec.terminal(); done != 0 || failed != 1 {
		t.Errorf("terminal events: %d done, %d error", done, failed)
	}
}

// (d) A 401 fails the model at once, with the provider's message.
func TestServerFatal(t *testing.T) {
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Status(401))
	b.Enqueue(llmtest.Status(500), llmtest.Status(500))
	b.SetDefault(llmtest.Text("B"))
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "a"), anthropicCandidate(t, b, "zai", "b")}
	msg, got, err := NewRouter(&Options{PassBackoff: -1, Logger: quiet}).Stream(t.Context(), cands, userContext("hi"), nil, nil)
	if err != nil || got.Model.ID != "b" || msg.Text() != "B" {
		t.Fatalf("%q from %s, %v", msg.Text(), got.Model.ID, err)
	}
	if a.Count() != 1 || b.Count() != 3 {
		t.Errorf("requests: A %d (want 1, never retried), B %d (want 3)", a.Count(), b.Count())
	}

	// Alone, it fails with the provider's message.
	_, _, err = NewRouter(&Options{PassBackoff: -1, Logger: quiet}).Stream(t.Context(), cands[:1], userContext("hi"), nil, nil)
	if err == nil || err.Error() != "all models failed: anthropic/a: 401 authentication_error: invalid x-api-key" || a.Count() != 2 {
		t.Errorf("err = %v, A count %d", err, a.Count())
	}
}

// (e) Concurrency 2, ten parallel streams: never more than 2 in flight,
// served in arrival order; both models of the provider share the pool.
func TestServerConcurrencyLimit(t *testing.T) {
	const n = 10
	srv := llmtest.NewAnthropic(t)
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	srv.Handle(func(rec llmtest.Recorded) llmtest.Response {
		var i int
		if _, err := fmt.Sscanf(rec.AllText(), "req-%d", &i); err != nil || i < 0 || i >= n {
			return llmtest.Status(400)
		}
		return llmtest.Text(fmt.Sprintf("answer-%d", i)).WithGate(gates[i])
	})
	models := []Candidate{anthropicCandidate(t, srv, "zai", "glm-a"), anthropicCandidate(t, srv, "zai", "glm-b")}
	limits := NewLimiters(map[string]int{"zai": 2})
	r := NewRouter(&Options{PassBackoff: -1, Limiters: limits, Logger: quiet})

	var wg sync.WaitGroup
	errs := make([]error, n)
	texts := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, _, err := r.Stream(t.Context(), models[i%2:i%2+1], userContext(fmt.Sprintf("req-%d", i)), nil, nil)
			errs[i] = err
			if msg != nil {
				texts[i] = msg.Text()
			}
		}()
		// Make the arrival order the launch order.
		if i < 2 {
			if !srv.WaitCount(i+1, 5*time.Second) {
				t.Fatalf("request %d never arrived", i)
			}
		} else {
			waitFor(t, "queued", func() bool { _, w := limits.Stats("zai"); return w == i-1 && routingtest.Queued() == i-1 })
		}
	}
	if srv.Count() != 2 || srv.InFlight() != 2 {
		t.Fatalf("server: %d requests, %d in flight; want 2, 2", srv.Count(), srv.InFlight())
	}
	for k := range n {
		close(gates[k])
		next := k + 2
		if next >= n {
			continue
		}
		if !srv.WaitCount(next+1, 5*time.Second) {
			t.Fatalf("request %d never arrived", next)
		}
		if got := srv.Request(next).AllText(); got != fmt.Sprintf("req-%d", next) {
			t.Fatalf("request %d to arrive was %q: not FIFO", next, got)
		}
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || texts[i] != fmt.Sprintf("answer-%d", i) {
			t.Errorf("stream %d: %q, %v", i, texts[i], errs[i])
		}
	}
	if m := srv.MaxInFlight(); m != 2 {
		t.Errorf("max in flight = %d, want 2", m)
	}
	if inUse, w := limits.Stats("zai"); inUse != 0 || w != 0 {
		t.Errorf("limiter leak: %d in use, %d waiting", inUse, w)
	}
}

// (f) The watchdog aborts a silent stream; it counts as a failure and the
// fallback answers. A slow stream that keeps sending is left alone.
func TestServerWatchdog(t *testing.T) {
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	a.Enqueue(llmtest.Hang())
	a.SetDefault(llmtest.Text("slow but alive, slow but alive").WithChunk(4).WithDelay(40 * time.Millisecond))
	b.SetDefault(llmtest.Text("fallback"))
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "a"), anthropicCandidate(t, b, "zai", "b")}
	h := OpenHealth("", nil)
	r := NewRouter(&Options{PassBackoff: -1, Health: h, IdleTimeout: 250 * time.Millisecond, Logger: quiet})

	var attemptErr error
	rec := new(recorder)
	obs := rec.observer()
	onAttempt := obs.OnAttempt
	obs.OnAttempt = func(c Candidate, err error, d time.Duration) {
		if c.Model.ID == "a" {
			attemptErr = err
		}
		onAttempt(c, err, d)
	}
	start := time.Now()
	msg, got, err := r.Stream(t.Context(), cands, userContext("hi"), rec.emit, obs)
	if err != nil || got.Model.ID != "b" || msg.Text() != "fallback" {
		t.Fatalf("%q from %s, %v", msg.Text(), got.Model.ID, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	if !errors.Is(attemptErr, ErrIdleTimeout) {
		t.Errorf("attempt error = %v, want ErrIdleTimeout", attemptErr)
	}
	if g := strings.Join(rec.fallbacks, " "); g != "a>b:fallback_timeout" {
		t.Errorf("fallbacks = %s", g)
	}
	if !a.WaitCancelled(1, time.Second) {
		t.Error("the hung request was not cancelled")
	}
	if e := h.Snapshot()["anthropic/a"]; e.ConsecutiveFailures != 1 || !strings.Contains(e.LastError, "no event for 250ms") {
		t.Errorf("health = %+v", e)
	}

	// A stream slower in total than the timeout, but never silent for it.
	msg, got, err = r.Stream(t.Context(), cands, userContext("hi"), nil, nil)
	if err != nil || got.Model.ID != "a" || msg.Text() != "slow but alive, slow but alive" {
		t.Errorf("slow stream: %q from %s, %v", msg.Text(), got.Model.ID, err)
	}
}

// (g) Cancelling the context returns at once and cancels the request.
func TestServerCancel(t *testing.T) {
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Hang())
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "a"), anthropicCandidate(t, b, "zai", "b")}
	h := OpenHealth("", nil)
	r := NewRouter(&Options{PassBackoff: -1, Health: h, Logger: quiet})
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		msg *llm.AssistantMessage
		err error
	}
	done := make(chan result, 1)
	rec := new(recorder)
	go func() {
		msg, _, err := r.Stream(ctx, cands, userContext("hi"), rec.emit, nil)
		done <- result{msg, err}
	}()
	if !a.WaitCount(1, 5*time.Second) {
		t.Fatal("no request")
	}
	cancel()
	cancelled := a.WaitCancelled(1, 100*time.Millisecond)
	select {
	case res := <-done:
		if llm.Classify(res.err) != llm.ClassAborted || res.msg.StopReason != llm.StopReasonAborted {
			t.Errorf("err %v, message %+v", res.err, res.msg)
		}
	case <-time.After(time.Second):
		t.Fatal("Stream did not return after cancel")
	}
	if !cancelled {
		t.Error("server did not see the cancel within 100ms")
	}
	if b.Count() != 0 {
		t.Errorf("fallback tried after an abort (%d requests)", b.Count())
	}
	if len(h.Keys()) != 0 {
		t.Errorf("abort recorded in health: %v", h.Snapshot())
	}
	if done, failed, _ := rec.terminal(); done != 0 || failed != 1 {
		t.Errorf("terminal events: %d done, %d error", done, failed)
	}
}

// A request cancelled while queued for its provider's slot never reaches
// the server and leaves the queue.
func TestServerCancelWhileQueued(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Enqueue(llmtest.Hang())
	cand := []Candidate{anthropicCandidate(t, srv, "zai", "glm")}
	limits := NewLimiters(map[string]int{"zai": 1})
	r := NewRouter(&Options{PassBackoff: -1, Limiters: limits, Logger: quiet})

	holder, stopHolder := context.WithCancel(t.Context())
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, _, _ = r.Stream(holder, cand, userContext("holder"), nil, nil)
	}()
	if !srv.WaitCount(1, 5*time.Second) {
		t.Fatal("holder never arrived")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var attempts int
	go func() {
		_, _, err := r.Stream(ctx, cand, userContext("queued"), nil, &Observer{OnAttempt: func(Candidate, error, time.Duration) { attempts++ }})
		done <- err
	}()
	waitFor(t, "queued", func() bool { _, w := limits.Stats("zai"); return w == 1 })
	cancel()
	select {
	case err := <-done:
		if llm.Classify(err) != llm.ClassAborted {
			t.Errorf("err = %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("queued Stream did not return after cancel")
	}
	if attempts != 0 {
		t.Errorf("OnAttempt called %d times for a request that never left the queue", attempts)
	}
	stopHolder()
	<-held
	if srv.Count() != 1 {
		t.Errorf("server saw %d requests, want 1", srv.Count())
	}
	if inUse, w := limits.Stats("zai"); inUse != 0 || w != 0 {
		t.Errorf("limiter leak: %d in use, %d waiting", inUse, w)
	}
}

// (h) A corrupt health file: a warning, an empty store, a working router;
// the next cooldown replaces the file.
func TestServerCorruptHealthFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), HealthFile)
	if err := os.WriteFile(path, []byte(`{"providers": {"anthropic/a": {"retryAfter": "2999-01-01T00:00:00Z", `), 0o600); err != nil {
		t.Fatal(err)
	}
	log, buf := logBuffer()
	a, b := llmtest.NewAnthropic(t), llmtest.NewAnthropic(t)
	a.Enqueue(llmtest.Text("A"), llmtest.Status(429))
	cands := []Candidate{anthropicCandidate(t, a, "anthropic", "a"), anthropicCandidate(t, b, "zai", "b")}
	r := NewRouter(&Options{PassBackoff: -1, Health: OpenHealth(path, &HealthOptions{Logger: log}), Logger: quiet})
	if !strings.Contains(buf.String(), "corrupt") {
		t.Errorf("no warning: %q", buf.String())
	}
	msg, got, err := r.Stream(t.Context(), cands, userContext("hi"), nil, nil)
	if err != nil || got.Model.ID != "a" || msg.Text() != "A" {
		t.Fatalf("%q from %s, %v", msg.Text(), got.Model.ID, err)
	}
	if _, got, err = r.Stream(t.Context(), cands, userContext("hi"), nil, nil); err != nil || got.Model.ID != "b" {
		t.Fatalf("after 429: %s, %v", got.Model.ID, err)
	}
	providers := readHealthFile(t, path)["providers"].(map[string]any)
	if e, ok := providers["anthropic/a"].(map[string]any); !ok || e["retryAfter"] == nil {
		t.Errorf("file not rewritten with the cooldown: %v", providers)
	}
}
