package routingtest_test

import (
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/routing"
	"github.com/beige-dev/beige/internal/routing/routingtest"
)

// TestQueued: Queued sees the callers a limiter queues, and only those
// (a holder is not queued), so that the tests that wait for it do not
// hang if x/sync's semaphore changes.
func TestQueued(t *testing.T) {
	l := routing.NewLimiter(1)
	release, err := l.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := routingtest.Queued(); n != 0 {
		t.Fatalf("Queued = %d with one holder, want 0", n)
	}
	done := make(chan struct{})
	for range 3 {
		go func() {
			if r, err := l.Acquire(t.Context()); err == nil {
				r()
			}
			done <- struct{}{}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); routingtest.Queued() != 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Queued = %d, want 3", routingtest.Queued())
		}
	}
	release()
	for range 3 {
		<-done
	}
	if n := routingtest.Queued(); n != 0 {
		t.Errorf("Queued = %d after every caller is served, want 0", n)
	}
}
