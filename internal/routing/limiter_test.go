package routing

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/beige-dev/beige/internal/routing/routingtest"
)

// waitFor polls cond until it holds or the test's patience runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The limiter tests run in a synctest bubble: synctest.Wait returns when
// every goroutine is blocked, so "it holds a slot or has queued" is known
// exactly, with no polling deciding the order of arrivals.

func TestLimiterFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, limit = 10, 2
		ls := NewLimiters(map[string]int{"p": limit})
		var (
			inFlight, peak atomic.Int32
			acquired       [n]atomic.Bool
			hold           [n]chan struct{}
			wg             sync.WaitGroup
		)
		for i := range n {
			hold[i] = make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				release, err := ls.Acquire(t.Context(), "p")
				if err != nil {
					t.Errorf("acquire %d: %v", i, err)
					return
				}
				cur := inFlight.Add(1)
				for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
				}
				acquired[i].Store(true)
				<-hold[i]
				inFlight.Add(-1)
				release()
			}()
			// Arrival order is launch order: i holds or queues.
			synctest.Wait()
			if inUse, waiting := ls.Stats("p"); inUse+waiting != i+1 {
				t.Fatalf("after %d arrivals: %d in use, %d waiting", i+1, inUse, waiting)
			}
		}
		if inUse, waiting := ls.Stats("p"); inUse != limit || waiting != n-limit {
			t.Fatalf("stats = %d in use, %d waiting; want %d, %d", inUse, waiting, limit, n-limit)
		}
		// Free one slot at a time: exactly the oldest waiter gets it.
		for k := range n {
			close(hold[k])
			synctest.Wait()
			next := k + limit
			for j := range n {
				if want := j <= next && j < n; acquired[j].Load() != want {
					t.Fatalf("after releasing %d: waiter %d served = %v, want %v", k, j, acquired[j].Load(), want)
				}
			}
		}
		wg.Wait()
		if peak.Load() > limit {
			t.Errorf("peak in flight = %d, limit %d", peak.Load(), limit)
		}
		if inUse, waiting := ls.Stats("p"); inUse != 0 || waiting != 0 {
			t.Errorf("leak: %d in use, %d waiting", inUse, waiting)
		}
	})
}

func TestLimiterCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1)
		releaseA, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctxB, cancelB := context.WithCancel(t.Context())
		errB := make(chan error, 1)
		go func() {
			_, err := l.Acquire(ctxB)
			errB <- err
		}()
		synctest.Wait() // B queued
		gotC := make(chan func(), 1)
		go func() {
			r, err := l.Acquire(t.Context())
			if err != nil {
				t.Error(err)
			}
			gotC <- r
		}()
		synctest.Wait() // C queued behind B
		if inUse, w := l.Stats(); inUse != 1 || w != 2 {
			t.Fatalf("stats = %d in use, %d waiting; want 1, 2", inUse, w)
		}

		cancelB()
		synctest.Wait()
		select {
		case err := <-errB:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("B: %v, want context.Canceled", err)
			}
		default:
			t.Fatal("cancelled waiter still waiting")
		}
		if _, w := l.Stats(); w != 1 {
			t.Errorf("waiting = %d after cancel, want 1", w)
		}
		releaseA()
		releaseA() // a second release does nothing
		synctest.Wait()
		select {
		case r := <-gotC:
			r()
		default:
			t.Fatal("C never served")
		}
		if inUse, w := l.Stats(); inUse != 0 || w != 0 {
			t.Errorf("leak: %d in use, %d waiting", inUse, w)
		}
	})
}

// TestLimiterCancelRace cancels waiters at the moment their slot is handed
// over: the slot must go on to the next waiter or back to the pool.
func TestLimiterCancelRace(t *testing.T) {
	l := NewLimiter(1)
	for i := range 300 {
		hold, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if r, err := l.Acquire(ctx); err == nil {
				r()
			}
		}()
		waitFor(t, "queued", func() bool { _, w := l.Stats(); return w == 1 && routingtest.Queued() == 1 })
		if i%2 == 0 {
			cancel() // the waiter wakes for ctx while the slot is handed over
			hold()
		} else {
			go cancel()
			hold()
		}
		<-done
		if inUse, w := l.Stats(); inUse != 0 || w != 0 {
			t.Fatalf("leak: %d in use, %d waiting", inUse, w)
		}
		// The slot is back: it can be taken at once.
		r, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		r()
	}
}

func TestLimiterUnlimited(t *testing.T) {
	ls := NewLimiters(map[string]int{"minus": -1, "zero": 0})
	for _, p := range []string{"minus", "zero", "unknown"} {
		var releases []func()
		for range 50 {
			r, err := ls.Acquire(t.Context(), p)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			releases = append(releases, r)
		}
		for _, r := range releases {
			r()
		}
	}
	var nilLs *Limiters
	if r, err := nilLs.Acquire(t.Context(), "x"); err != nil {
		t.Fatal(err)
	} else {
		r()
	}
}

func TestLimiterDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := NewLimiter(1).Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}
