package routing

import (
	"container/list"
	"context"
	"sync"
)

// Limiter is a FIFO counting semaphore: at most its limit of holders at
// once; the others wait in arrival order and are never rejected. The
// zero value is not usable; see NewLimiter.
type Limiter struct {
	limit int // ≤ 0: unlimited

	mu      sync.Mutex
	inUse   int
	waiters list.List // of *waiter, oldest first
}

type waiter struct {
	ready   chan struct{} // closed when the slot is handed over
	granted bool          // set under mu with the close
}

// NewLimiter returns a limiter of n slots; n ≤ 0 means unlimited.
func NewLimiter(n int) *Limiter { return &Limiter{limit: n} }

// Limit returns the number of slots (≤ 0: unlimited).
func (l *Limiter) Limit() int { return l.limit }

// Acquire takes a slot, waiting behind earlier callers until one frees up
// or ctx ends. On success the caller must call release exactly once
// (later calls do nothing). If ctx ends first Acquire returns ctx.Err()
// and leaves the queue; a slot handed over at that very moment is passed
// on to the next waiter, never lost.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l == nil || l.limit <= 0 {
		return func() {}, nil
	}
	l.mu.Lock()
	if l.inUse < l.limit && l.waiters.Len() == 0 {
		l.inUse++
		l.mu.Unlock()
		return l.releaser(), nil
	}
	w := &waiter{ready: make(chan struct{})}
	elem := l.waiters.PushBack(w)
	l.mu.Unlock()

	select {
	case <-w.ready:
		return l.releaser(), nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		// The slot arrived as ctx ended: it is ours, so hand it on.
		l.releaseLocked()
	} else {
		l.waiters.Remove(elem)
	}
	return nil, ctx.Err()
}

func (l *Limiter) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.releaseLocked()
		})
	}
}

// releaseLocked frees one slot: it goes to the oldest waiter if there is
// one (inUse is unchanged), else back to the pool.
func (l *Limiter) releaseLocked() {
	if front := l.waiters.Front(); front != nil {
		w := l.waiters.Remove(front).(*waiter)
		w.granted = true
		close(w.ready)
		return
	}
	l.inUse--
}

// Stats returns how many slots are held and how many callers wait.
func (l *Limiter) Stats() (inUse, waiting int) {
	if l == nil {
		return 0, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inUse, l.waiters.Len()
}

// Limiters holds one Limiter per provider. A provider without a limit (or
// not configured at all) is unlimited. It is safe for concurrent use.
type Limiters struct {
	pools map[string]*Limiter // read-only after NewLimiters
}

// NewLimiters builds the limiters from provider name → maximum requests in
// flight (config llm.providers.<p>.concurrency); a value ≤ 0 (the config's
// -1) means unlimited.
func NewLimiters(limits map[string]int) *Limiters {
	ls := &Limiters{pools: map[string]*Limiter{}}
	for p, n := range limits {
		if n > 0 {
			ls.pools[p] = NewLimiter(n)
		}
	}
	return ls
}

// For returns the limiter of provider, or nil if it is unlimited.
func (ls *Limiters) For(provider string) *Limiter {
	if ls == nil {
		return nil
	}
	return ls.pools[provider]
}

// Acquire takes a slot of provider's pool; see Limiter.Acquire. A nil
// *Limiters, like an unlimited provider, lets every request through.
func (ls *Limiters) Acquire(ctx context.Context, provider string) (release func(), err error) {
	return ls.For(provider).Acquire(ctx)
}

// Stats returns the slots held and the waiters of provider's pool (0, 0
// when it is unlimited).
func (ls *Limiters) Stats(provider string) (inUse, waiting int) {
	return ls.For(provider).Stats()
}
