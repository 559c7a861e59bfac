package routing

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Limiter is a FIFO counting semaphore (x/sync's semaphore.Weighted): at
// most its limit of holders at once; the others wait in arrival order and
// are never rejected. The zero value is not usable; see NewLimiter.
type Limiter struct {
	limit int                 // ≤ 0: unlimited
	sem   *semaphore.Weighted // nil when unlimited

	// inUse and waiting are for Stats. A caller counts as waiting from
	// just before it queues until it holds a slot or gives up, so once
	// the callers are blocked the numbers are exact.
	inUse, waiting atomic.Int64
}

// NewLimiter returns a limiter of n slots; n ≤ 0 means unlimited.
func NewLimiter(n int) *Limiter {
	l := &Limiter{limit: n}
	if n > 0 {
		l.sem = semaphore.NewWeighted(int64(n))
	}
	return l
}

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
	if l == nil || l.sem == nil {
		return func() {}, nil
	}
	if !l.sem.TryAcquire(1) {
		l.waiting.Add(1)
		err := l.sem.Acquire(ctx, 1)
		l.waiting.Add(-1)
		if err != nil {
			return nil, err
		}
	}
	l.inUse.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.inUse.Add(-1)
			l.sem.Release(1)
		})
	}, nil
}

// Stats returns how many slots are held and how many callers wait.
func (l *Limiter) Stats() (inUse, waiting int) {
	if l == nil {
		return 0, 0
	}
	return int(l.inUse.Load()), int(l.waiting.Load())
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
