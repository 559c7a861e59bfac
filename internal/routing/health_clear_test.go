package routing

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestHealthClear: clearing a model's health ends its cooldown and resets
// its failures at once, and the cleared cooldown does not come back when
// the file is read again (a gateway restart).
func TestHealthClear(t *testing.T) {
	clock := newClock()
	path := filepath.Join(t.TempDir(), HealthFile)
	h := OpenHealth(path, &HealthOptions{Now: clock.Now, FlushDelay: time.Hour})
	now := clock.Now()
	h.RecordRateLimit("a/m", now.Add(time.Hour), errors.New("429 slow down"))
	if e, ok := h.Entry("a/m"); !ok || e.ConsecutiveFailures != 1 || e.LastError != "429 slow down" || !e.RetryAfter.Equal(now.Add(time.Hour)) {
		t.Fatalf("Entry = %+v, %v", e, ok)
	}
	if _, ok := h.Entry("b/m"); ok {
		t.Error("an entry for a model nothing was recorded for")
	}
	h.Clear("a/m")
	if _, ok := h.CooldownUntil("a/m", now); ok {
		t.Error("cooldown kept after Clear")
	}
	if _, ok := h.Entry("a/m"); ok {
		t.Error("entry kept after Clear")
	}
	h2 := OpenHealth(path, &HealthOptions{Now: clock.Now})
	if _, ok := h2.CooldownUntil("a/m", now); ok {
		t.Error("the cleared cooldown came back on reopen")
	}
}
