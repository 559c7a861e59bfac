package routing

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/testutil"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer returns a logger writing text into a buffer.
func logBuffer() (*slog.Logger, *testutil.SyncBuffer) {
	b := new(testutil.SyncBuffer)
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// readHealthFile reads the file as generic JSON.
func readHealthFile(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return v
}

func TestHealthFileFormat(t *testing.T) {
	clock := newClock()
	path := filepath.Join(t.TempDir(), "data", HealthFile)
	h := OpenHealth(path, &HealthOptions{Now: clock.Now, FlushDelay: time.Hour})
	h.RecordRateLimit("anthropic/claude-x", clock.Now().Add(2*time.Minute), errors.New("429 rate_limit_error: slow down"))

	// The cooldown is on disk before RecordRateLimit returns.
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	got := readHealthFile(t, path)
	want := map[string]any{
		"providers": map[string]any{
			"anthropic/claude-x": map[string]any{
				"rateLimitedAt":       "2025-03-01T12:00:00.000Z",
				"retryAfter":          "2025-03-01T12:02:00.000Z",
				"consecutiveFailures": 1.0,
				"lastError":           "429 rate_limit_error: slow down",
			},
		},
		"lastUpdated": "2025-03-01T12:00:00.000Z",
	}
	if g, w := mustMarshal(t, got), mustMarshal(t, want); g != w {
		t.Errorf("file =\n%s\nwant\n%s", g, w)
	}
	for _, ts := range []string{"2025-03-01T12:00:00.000Z"} {
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Error(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHealthCooldown(t *testing.T) {
	clock := newClock()
	h := OpenHealth("", &HealthOptions{Now: clock.Now})
	now := clock.Now()
	if _, ok := h.CooldownUntil("a/m", now); ok {
		t.Fatal("cooldown on a fresh store")
	}
	h.RecordRateLimit("a/m", now.Add(time.Minute), nil)
	if until, ok := h.CooldownUntil("a/m", now); !ok || !until.Equal(now.Add(time.Minute)) {
		t.Errorf("CooldownUntil = %v, %v", until, ok)
	}
	// A shorter cooldown does not shorten it.
	h.RecordRateLimit("a/m", now.Add(time.Second), nil)
	if until, _ := h.CooldownUntil("a/m", now); !until.Equal(now.Add(time.Minute)) {
		t.Errorf("cooldown shortened to %v", until)
	}
	// Success keeps the cooldown, resets the count.
	h.RecordSuccess("a/m")
	if _, ok := h.CooldownUntil("a/m", now); !ok {
		t.Error("success cleared the cooldown")
	}
	if e := h.Snapshot()["a/m"]; e.ConsecutiveFailures != 0 {
		t.Errorf("failures = %d after success", e.ConsecutiveFailures)
	}
	if _, ok := h.CooldownUntil("a/m", now.Add(time.Minute)); ok {
		t.Error("cooldown still active at its end")
	}
	clock.Advance(2 * time.Minute)
	if e := h.Snapshot()["a/m"]; !e.RetryAfter.IsZero() || !e.RateLimitedAt.IsZero() {
		t.Errorf("expired cooldown kept: %+v", e)
	}
}

func TestHealthReloadDropsExpired(t *testing.T) {
	clock := newClock()
	path := filepath.Join(t.TempDir(), HealthFile)
	h := OpenHealth(path, &HealthOptions{Now: clock.Now})
	now := clock.Now()
	h.RecordRateLimit("a/short", now.Add(10*time.Second), errors.New("x"))
	h.RecordRateLimit("a/long", now.Add(time.Hour), errors.New("y"))

	clock.Advance(time.Minute)
	h2 := OpenHealth(path, &HealthOptions{Now: clock.Now})
	if _, ok := h2.CooldownUntil("a/short", clock.Now()); ok {
		t.Error("expired cooldown loaded")
	}
	if until, ok := h2.CooldownUntil("a/long", clock.Now()); !ok || !until.Equal(now.Add(time.Hour)) {
		t.Errorf("long cooldown = %v, %v", until, ok)
	}
	if e := h2.Snapshot()["a/short"]; e.ConsecutiveFailures != 1 || e.LastError != "x" {
		t.Errorf("short entry = %+v", e)
	}
}

func TestHealthBatchedFailures(t *testing.T) {
	clock := newClock()
	path := filepath.Join(t.TempDir(), HealthFile)
	h := OpenHealth(path, &HealthOptions{Now: clock.Now, FlushDelay: time.Hour})
	h.RecordFailure("a/m", errors.New("boom"))
	h.RecordFailure("a/m", errors.New("boom again"))
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("failure written at once (%v); want batched", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	p := readHealthFile(t, path)["providers"].(map[string]any)["a/m"].(map[string]any)
	if p["consecutiveFailures"] != 2.0 || p["lastError"] != "boom again" {
		t.Errorf("entry = %v", p)
	}
	if _, ok := p["retryAfter"]; ok {
		t.Errorf("retryAfter written for a plain failure: %v", p)
	}

	// A short delay writes by itself.
	h2 := OpenHealth(path, &HealthOptions{Now: clock.Now, FlushDelay: 10 * time.Millisecond})
	h2.RecordSuccess("a/m")
	waitFor(t, "batched write", func() bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), `"consecutiveFailures": 0`)
	})
}

func TestHealthCorruptFile(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":   "{not json",
		"array":     `[1, 2]`,
		"truncated": `{"providers": {"a/m": {"retryAfter": "2099-01-01T00:00:00Z"`,
		"wrong":     `{"providers": {"a/m": {"consecutiveFailures": "many"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), HealthFile)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			log, buf := logBuffer()
			h := OpenHealth(path, &HealthOptions{Logger: log})
			if len(h.Keys()) != 0 {
				t.Errorf("entries = %v, want none", h.Keys())
			}
			if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), path) {
				t.Errorf("no warning logged: %q", buf.String())
			}
			// The bad file is kept beside the new one, untouched.
			if b, err := os.ReadFile(path + ".bad"); err != nil || string(b) != content {
				t.Errorf("%s.bad = %q, %v; want the corrupt file kept", HealthFile, b, err)
			}
			if !strings.Contains(buf.String(), path+".bad") {
				t.Errorf("the log does not say where the file was kept: %q", buf.String())
			}
			h.RecordRateLimit("a/m", time.Now().Add(time.Minute), nil)
			readHealthFile(t, path)
			// A second corrupt file does not overwrite the first copy.
			os.WriteFile(path, []byte("{second"), 0o600)
			OpenHealth(path, &HealthOptions{Logger: log})
			if b, _ := os.ReadFile(path + ".bad"); string(b) != content {
				t.Errorf("the first .bad was overwritten: %q", b)
			}
			if b, _ := os.ReadFile(path + ".bad.1"); string(b) != "{second" {
				t.Errorf("%s.bad.1 = %q", HealthFile, b)
			}
		})
	}
}

func TestHealthUnreadableFile(t *testing.T) {
	path := t.TempDir() // a folder: reading it fails
	log, buf := logBuffer()
	h := OpenHealth(path, &HealthOptions{Logger: log})
	if len(h.Keys()) != 0 || !strings.Contains(buf.String(), "cannot read") {
		t.Errorf("keys %v, log %q", h.Keys(), buf.String())
	}
	// It cannot be set aside either: state is kept in memory only, and
	// what is at path is left as it is.
	h.RecordRateLimit("a/m", time.Now().Add(time.Minute), nil)
	h.Flush()
	if _, ok := h.CooldownUntil("a/m", time.Now()); !ok {
		t.Error("cooldown lost")
	}
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		t.Errorf("the unreadable path was touched: %v", err)
	}
}

// A failed write is logged, not fatal, and state stays in memory.
func TestHealthWriteFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", HealthFile)
	log, buf := logBuffer()
	h := OpenHealth(path, &HealthOptions{Logger: log, FlushDelay: -1})
	os.WriteFile(filepath.Join(dir, "sub"), nil, 0o600) // a file where the folder should be
	h.RecordRateLimit("a/m", time.Now().Add(time.Minute), nil)
	h.Flush()
	if _, ok := h.CooldownUntil("a/m", time.Now()); !ok {
		t.Error("cooldown lost after a failed write")
	}
	waitFor(t, "write failure logged", func() bool { return strings.Contains(buf.String(), "cannot write") })
}

func TestHealthMissingFile(t *testing.T) {
	log, buf := logBuffer()
	h := OpenHealth(filepath.Join(t.TempDir(), "nope", HealthFile), &HealthOptions{Logger: log})
	if len(h.Keys()) != 0 || buf.String() != "" {
		t.Errorf("keys %v, log %q", h.Keys(), buf.String())
	}
}

func TestDecodeHealthLenient(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	data := `{"providers": {
		"a/ok": {"rateLimitedAt": "2025-03-01T11:59:00Z", "retryAfter": "2025-03-01T12:05:00+01:00", "consecutiveFailures": 2, "lastError": "e"},
		"a/future": {"retryAfter": "2025-03-01T13:00:00.5Z", "consecutiveFailures": -4},
		"a/badtime": {"retryAfter": "tomorrow", "consecutiveFailures": 1},
		"": {"consecutiveFailures": 1}
	}, "lastUpdated": "whenever", "extra": true}`
	entries, err := decodeHealth([]byte(data), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("entries = %d, want 3 (empty key dropped)", len(entries))
	}
	// 12:05+01:00 is 11:05Z: expired.
	if e := entries["a/ok"]; !e.RetryAfter.IsZero() || e.ConsecutiveFailures != 2 {
		t.Errorf("a/ok = %+v", e)
	}
	if e := entries["a/future"]; !e.RetryAfter.Equal(now.Add(time.Hour+500*time.Millisecond)) || e.ConsecutiveFailures != 0 {
		t.Errorf("a/future = %+v", e)
	}
	if e := entries["a/badtime"]; !e.RetryAfter.IsZero() || e.ConsecutiveFailures != 1 {
		t.Errorf("a/badtime = %+v", e)
	}
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	got := truncate(long, maxLastError)
	if len(got) > maxLastError || !strings.HasSuffix(got, "…") || truncate(got, maxLastError) != got {
		t.Errorf("truncate: %d bytes, idempotent %v", len(got), truncate(got, maxLastError) == got)
	}
}

func FuzzDecodeHealth(f *testing.F) {
	f.Add([]byte(`{"providers":{"a/m":{"rateLimitedAt":"2025-03-01T12:00:00.000Z","retryAfter":"2025-03-01T12:02:00.000Z","consecutiveFailures":1,"lastError":"x"}},"lastUpdated":"2025-03-01T12:00:00.000Z"}`))
	f.Add([]byte(`{"providers":{"z/g":{"retryAfter":"9999-12-31T23:59:59.999999999-23:59","consecutiveFailures":9223372036854775807}}}`))
	f.Add([]byte(`{"providers":null}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"providers":{"a":{"lastError":"\xff\xfe"}}}`))
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeHealth(data, now)
		if err != nil {
			return
		}
		// What was read writes back and reads the same.
		out, err := encodeHealth(entries, now)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		again, err := decodeHealth(out, now)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, out)
		}
		if len(again) != len(entries) {
			t.Fatalf("entries %d → %d", len(entries), len(again))
		}
		for k, e := range entries {
			g := again[k]
			if g == nil || *g != *e {
				t.Fatalf("%q: %+v → %+v", k, e, g)
			}
			if e.ConsecutiveFailures < 0 || (!e.RetryAfter.IsZero() && !e.RetryAfter.After(now)) {
				t.Fatalf("%q: not normalised: %+v", k, e)
			}
		}
	})
}

// A cooldown written before the damage in a corrupt file is still in force.
func TestHealthCorruptFileKeepsReadableCooldowns(t *testing.T) {
	path := filepath.Join(t.TempDir(), HealthFile)
	until := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	content := `{"providers": {"anthropic/claude-x": {"rateLimitedAt": "` + time.Now().UTC().Format(time.RFC3339) +
		`", "retryAfter": "` + until.Format(time.RFC3339) + `", "consecutiveFailures": 1}, "zai/glm": {"consecutiveFail`
	os.WriteFile(path, []byte(content), 0o600)
	log, _ := logBuffer()
	h := OpenHealth(path, &HealthOptions{Logger: log})
	defer h.Close()
	if got, ok := h.CooldownUntil("anthropic/claude-x", time.Now()); !ok || !got.Equal(until) {
		t.Errorf("the 24 h cooldown was lost: %v %v", got, ok)
	}
	if b, _ := os.ReadFile(path + ".bad"); string(b) != content {
		t.Errorf(".bad = %q", b)
	}
}

func FuzzSalvageHealth(f *testing.F) {
	f.Add([]byte(`{"providers": {"a/m": {"retryAfter": "2099-01-01T00:00:00Z"}, "b`))
	f.Add([]byte(`{"lastUpdated": 1, "providers": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for k, e := range salvageHealth(data, time.Now()) {
			if k == "" || e == nil || e.ConsecutiveFailures < 0 || e.ConsecutiveFailures > maxFailures {
				t.Fatalf("bad entry %q %+v", k, e)
			}
		}
	})
}

// A pi-based client (the original Beige's terminal client) retries an error
// whose text looks transient: overloaded, rate limit, 429, 5xx, ... A model
// skipped for its cooldown is not worth a retry seconds later (the cooldown
// lasts minutes), so its description must not look like one.
func TestSkippedDoesNotLookRetryable(t *testing.T) {
	retryable := regexp.MustCompile(`(?i)overloaded|rate.?limit|too many requests|429|5\d\d|service.?unavailable|server error`)
	d := Attempt{Skipped: true, Cooldown: 2 * time.Minute}.Describe()
	if retryable.MatchString(d) {
		t.Errorf("a skipped model is described as %q, which a pi client retries", d)
	}
	if !strings.Contains(d, "2m0s") {
		t.Errorf("%q does not say how long the cooldown lasts", d)
	}
}
