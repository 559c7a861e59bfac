package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/metrics"
)

// The fallback loop's constants (reference-notes "Model fallback constants").
const (
	// MaxPasses is how many times the loop goes over the model list.
	MaxPasses = 3
	// MaxConsecutiveFailures drops a model from the run's pool.
	MaxConsecutiveFailures = 3
	// DefaultIdleTimeout is how long a model stream may send nothing
	// before the watchdog aborts it.
	DefaultIdleTimeout = 10 * time.Minute
)

// Reasons for a model switch, as the modelSwitched hook names them.
const (
	ReasonRateLimit = "fallback_rate_limit" // the previous model is rate limited (or cooling down)
	ReasonError     = "fallback_error"      // the previous model failed
	ReasonTimeout   = "fallback_timeout"    // the previous model's stream went quiet
)

var (
	// ErrNoCandidates is returned by Stream when given no model.
	ErrNoCandidates = errors.New("routing: no candidate models")
	// ErrIdleTimeout matches (errors.Is) the *TimeoutError of an attempt
	// the watchdog aborted.
	ErrIdleTimeout = errors.New("routing: model stream timed out")
)

// TimeoutError is the error of an attempt the watchdog aborted because
// the stream sent no event for Idle.
type TimeoutError struct {
	Model string // health key, "<provider>/<model>"
	Idle  time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: no event for %s", e.Model, e.Idle)
}

// Is makes errors.Is(err, ErrIdleTimeout) hold.
func (e *TimeoutError) Is(target error) bool { return target == ErrIdleTimeout }

// Candidate is one model the router may use: an agent's model or one of
// its fallbackModels, with a provider ready to call.
type Candidate struct {
	// Provider is the provider's name in the config ("anthropic", "zai"):
	// it selects the concurrency pool and prefixes the health key. Empty
	// means Model.Provider.
	Provider string
	// Client calls the provider.
	Client llm.Provider
	// Model is the model's metadata; Model.ID is sent to the provider.
	Model llm.Model
	// Options tune the request (thinking level, max tokens, ...).
	Options llm.Options
}

func (c Candidate) provider() string {
	if c.Provider != "" {
		return c.Provider
	}
	return c.Model.Provider
}

// Key is the model's health key, "<provider>/<model>".
func (c Candidate) Key() string { return c.provider() + "/" + c.Model.ID }

// Observer is told what the router does, for audit, logs and hooks. A nil
// *Observer, or a nil field, is ignored. The functions are called on the
// goroutine running Stream.
type Observer struct {
	// OnAttempt is called after every attempt on a model, successful or
	// not (err nil on success), with the time it took including the wait
	// for the provider's concurrency slot. Models skipped for a cooldown
	// and requests cancelled while still queued are not attempts.
	OnAttempt func(c Candidate, err error, d time.Duration)
	// OnFallback is called before an attempt on a model other than the
	// previous one (or, for the first attempt, other than the primary),
	// with ReasonRateLimit, ReasonError or ReasonTimeout: why the
	// previous model was left.
	OnFallback func(from, to Candidate, reason string)
}

func (o *Observer) attempt(c Candidate, err error, d time.Duration) {
	if o != nil && o.OnAttempt != nil {
		o.OnAttempt(c, err, d)
	}
}

func (o *Observer) fallback(from, to Candidate, reason string) {
	if o != nil && o.OnFallback != nil {
		o.OnFallback(from, to, reason)
	}
}

// Options configure a Router. Nil or zero fields mean the defaults.
type Options struct {
	// Health is the shared provider-health store; nil means one in memory.
	Health *Health
	// Limiters are the providers' concurrency pools; nil means unlimited.
	Limiters *Limiters
	// IdleTimeout is how long an attempt may go without a stream event
	// before the watchdog aborts it; 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Logger receives a line per failed attempt; nil means slog.Default().
	Logger *slog.Logger
	// PassBackoff is the pause before the second pass; it doubles before
	// each later one, and each pause is jittered to between half and all of
	// it, so that prompts failing together do not retry together. 0 means
	// DefaultPassBackoff; a negative value means no pause (a storm of
	// retries against an overloaded provider: for tests).
	PassBackoff time.Duration
	// Metrics counts every attempt (outcome, time to first event,
	// duration, tokens) and the waits for a concurrency slot; nil: none.
	Metrics *metrics.Metrics
}

// DefaultPassBackoff is the pause before the second pass of the fallback
// loop (see Options.PassBackoff).
const DefaultPassBackoff = time.Second

// Router runs the fallback loop. One Router serves the whole gateway: the
// health store and the concurrency pools it holds are shared by every
// agent and session. It is safe for concurrent use.
type Router struct {
	health  *Health
	limits  *Limiters
	idle    time.Duration
	log     *slog.Logger
	backoff time.Duration
	metrics *metrics.Metrics
	// jitter returns a number in [0, 1); sleep waits d or until ctx ends.
	// Tests replace them.
	jitter func() float64
	sleep  func(ctx context.Context, d time.Duration) error
}

// NewRouter returns a router.
func NewRouter(opts *Options) *Router {
	var o Options
	if opts != nil {
		o = *opts
	}
	r := &Router{health: o.Health, limits: o.Limiters, idle: o.IdleTimeout, log: o.Logger,
		backoff: o.PassBackoff, metrics: o.Metrics, jitter: rand.Float64, sleep: sleepCtx}
	if r.backoff == 0 {
		r.backoff = DefaultPassBackoff
	}
	if r.health == nil {
		r.health = OpenHealth("", nil)
	}
	if r.idle <= 0 {
		r.idle = DefaultIdleTimeout
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// Health returns the router's health store.
func (r *Router) Health() *Health { return r.health }

// QueueStats returns the slots held and the requests waiting in provider's
// concurrency pool (0, 0 when it is unlimited).
func (r *Router) QueueStats(provider string) (inUse, waiting int) {
	return r.limits.Stats(provider)
}

// Stream answers c with the first model of candidates that succeeds,
// following the multi-pass fallback rules: candidates are tried in order
// (primary first), over up to MaxPasses passes; before each attempt a
// model with an active rate-limit cooldown (set by any session) leaves the
// pool, as does a model after MaxConsecutiveFailures failures in this run,
// or at once after a fatal error (400, 401, 403). A rate limit puts the
// model in a global cooldown (Health); a transient error (529,
// overloaded) does not, and the model is tried again on the next pass.
// Between passes the loop pauses (see Options.PassBackoff), but never past
// ctx's deadline: when the pause would end after it, the run ends there.
// The cooldown is checked again when the provider's concurrency slot is
// granted, so that requests queued behind the one that got a 429 do not
// follow it to the same model.
//
// emit (may be nil) receives the events of every attempt as they come,
// except the error event of a failed attempt; before an attempt that is
// not the first, or not on the primary, it receives a model_fallback
// event naming the model about to be tried, so a client can drop its
// partial message. Every Stream ends with exactly one done or error
// event.
//
// It returns the final message and the candidate that produced it. On
// failure it returns a failed message (stopReason error, or aborted) with
// the error: an abort (wrapping ctx.Err()) as soon as ctx ends, else an
// *ExhaustedError listing every attempt, whose text is also the message's
// errorMessage.
func (r *Router) Stream(ctx context.Context, candidates []Candidate, c llm.Context, emit func(llm.Event), obs *Observer) (*llm.AssistantMessage, Candidate, error) {
	if len(candidates) == 0 {
		return nil, Candidate{}, ErrNoCandidates
	}
	for _, cand := range candidates {
		if cand.Client == nil {
			return nil, Candidate{}, fmt.Errorf("routing: candidate %s has no provider", cand.Key())
		}
	}
	if emit == nil {
		emit = func(llm.Event) {}
	}
	var (
		p          = newPool(len(candidates))
		attempts   []Attempt
		last       = -1 // index of the last attempted candidate
		lastRes    result
		lastReason string
	)
passes:
	for p.pass = 0; p.pass < MaxPasses; p.pass++ {
		if p.pass > 0 && p.inPlay() {
			d := r.passPause(p.pass)
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
				r.log.Info("no time left for another pass", "pass", p.pass+1, "pause", d)
				break passes
			}
			if err := r.sleep(ctx, d); err != nil {
				msg := failedMessage(candidates[max(last, 0)], llm.StopReasonAborted, "Request was aborted")
				emit(llm.Event{Type: llm.EventError, Reason: string(llm.StopReasonAborted), Error: msg})
				return msg, candidates[max(last, 0)], llm.AbortError(ctx)
			}
		}
		for i, cand := range candidates {
			if p.out[i] {
				continue
			}
			now := r.health.Now()
			if until, ok := r.health.CooldownUntil(cand.Key(), now); ok {
				a := Attempt{Candidate: cand, Skipped: true, Class: llm.ClassRateLimit, Cooldown: until.Sub(now)}
				attempts = append(attempts, a)
				p.record(i, a)
				continue
			}
			// Said once the slot is granted and the cooldown checked again,
			// just before the request goes out.
			announce := func() {
				if last >= 0 || i != 0 {
					from, reason := candidates[0], ReasonRateLimit // the primary is cooling down
					if last >= 0 {
						from, reason = candidates[last], lastReason
					}
					if from.Key() != cand.Key() {
						obs.fallback(from, cand, reason)
					}
					emit(llm.Event{Type: llm.EventModelFallback, Provider: cand.provider(), ModelID: cand.Model.ID})
				}
			}

			res := r.call(ctx, cand, c, emit, announce)
			if res.skipped {
				a := Attempt{Candidate: cand, Skipped: true, Class: llm.ClassRateLimit, Cooldown: res.cooldown}
				attempts = append(attempts, a)
				p.record(i, a)
				continue
			}
			if res.attempted {
				obs.attempt(cand, res.err, res.dur)
			}
			if res.err == nil {
				return res.msg, cand, nil
			}
			if res.aborted {
				msg := res.msg
				if res.final.Type == llm.EventError && res.final.Error != nil {
					msg = res.final.Error
				}
				if msg == nil {
					msg = failedMessage(cand, llm.StopReasonAborted, "Request was aborted")
				}
				emit(llm.Event{Type: llm.EventError, Reason: string(llm.StopReasonAborted), Error: msg})
				return msg, cand, res.err
			}
			a := Attempt{Candidate: cand, Err: res.err, Class: res.class, TimedOut: res.timedOut, Cooldown: res.cooldown}
			attempts = append(attempts, a)
			p.record(i, a)
			r.log.Info("model attempt failed", "model", cand.Key(), "pass", p.pass+1,
				"class", res.class.String(), "timedOut", res.timedOut, "err", res.err)
			last, lastRes, lastReason = i, res, a.Reason()
		}
	}

	err := &ExhaustedError{Attempts: attempts}
	var (
		msg  *llm.AssistantMessage
		cand = candidates[0]
	)
	if last >= 0 {
		cand = candidates[last]
		if lastRes.msg != nil {
			msg = lastRes.msg.Clone()
		}
	}
	if msg == nil {
		msg = failedMessage(cand, llm.StopReasonError, "")
	}
	msg.StopReason = llm.StopReasonError
	msg.ErrorMessage = err.Error()
	r.log.Warn("all models failed", "err", err)
	emit(llm.Event{Type: llm.EventError, Reason: string(llm.StopReasonError), Error: msg.Clone()})
	return msg, cand, err
}

// failedMessage is the message of a request that never reached a model.
func failedMessage(c Candidate, reason llm.StopReason, text string) *llm.AssistantMessage {
	return &llm.AssistantMessage{
		Content: []llm.Content{}, API: c.Model.API, Provider: c.provider(), Model: c.Model.ID,
		StopReason: reason, ErrorMessage: text, Timestamp: llm.Now(),
	}
}

// pool is the run's state of the fallback loop: which candidates are
// still in play and their consecutive failures.
type pool struct {
	pass     int
	out      []bool
	failures []int
}

func newPool(n int) *pool { return &pool{out: make([]bool, n), failures: make([]int, n)} }

// inPlay reports whether any candidate is still in the run.
func (p *pool) inPlay() bool {
	for _, out := range p.out {
		if !out {
			return true
		}
	}
	return false
}

// passPause is the jittered pause before pass (1 or 2): backoff·2^(pass−1),
// between half and all of it.
func (r *Router) passPause(pass int) time.Duration {
	if r.backoff < 0 {
		return 0
	}
	d := r.backoff << (pass - 1)
	return d/2 + time.Duration(r.jitter()*float64(d/2))
}

// sleepCtx waits d, or until ctx ends (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// record applies the pool rules to the outcome of candidate i.
func (p *pool) record(i int, a Attempt) {
	if a.Skipped {
		p.out[i] = true // an active cooldown: out for the rest of the run
		return
	}
	p.failures[i]++
	if a.Class == llm.ClassFatal || p.failures[i] >= MaxConsecutiveFailures {
		p.out[i] = true
	}
	// A rate limit is not dropped here: its cooldown, checked before the
	// next attempt, drops it while it lasts.
}

// result is the outcome of one call.
type result struct {
	msg       *llm.AssistantMessage
	err       error
	class     llm.ErrorClass
	attempted bool          // the provider was called (not cancelled while queued)
	skipped   bool          // the model went into a cooldown while this waited for its slot
	aborted   bool          // the caller's ctx ended
	timedOut  bool          // the watchdog aborted the stream
	cooldown  time.Duration // rate limits: the cooldown recorded
	final     llm.Event     // the attempt's error event, held back
	dur       time.Duration
}

// errIdle is the cancel cause the watchdog sets.
var errIdle = errors.New("routing: watchdog")

// call makes one attempt on one model. Every model call goes through it:
// it waits for the provider's concurrency slot, runs the stream under the
// inactivity watchdog (no event for r.idle cancels the attempt, which then
// counts as a failure), holds back the stream's error event for the
// caller, and records the outcome in Health: success resets the failure
// count, a rate limit starts a global cooldown, any other failure counts.
// An abort by the caller is recorded nowhere. A model that went into a
// cooldown while the call waited for its slot is not called (skipped);
// announce runs just before the request goes out.
func (r *Router) call(ctx context.Context, c Candidate, lc llm.Context, emit func(llm.Event), announce func()) result {
	start := time.Now()
	key := c.Key()
	queued := r.metrics.QueueEnter(c.provider())
	release, err := r.limits.Acquire(ctx, c.provider())
	queued()
	if err != nil {
		return result{err: llm.AbortError(ctx), class: llm.ClassAborted, aborted: true, dur: time.Since(start)}
	}
	defer release()
	// While this waited for the slot, the request ahead of it may have
	// got a 429 (recorded before its slot was released).
	now := r.health.Now()
	if until, ok := r.health.CooldownUntil(key, now); ok {
		return result{skipped: true, class: llm.ClassRateLimit, cooldown: until.Sub(now), dur: time.Since(start)}
	}
	announce()

	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(r.idle, func() { cancel(errIdle) })
	res := result{attempted: true}
	sent := time.Now()
	var firstEvent time.Duration
	defer func() { r.countAttempt(c, res, sent, firstEvent) }()
	msg, err := c.Client.Stream(actx, llm.Request{Model: c.Model, Context: lc, Options: c.Options}, func(e llm.Event) {
		if firstEvent == 0 && firstToken(e.Type) {
			firstEvent = max(time.Since(sent), time.Nanosecond)
		}
		watchdog.Reset(r.idle)
		if e.Type == llm.EventError {
			res.final = e
			return
		}
		emit(e)
	})
	watchdog.Stop()
	res.msg, res.err, res.dur = msg, err, time.Since(start)
	if err == nil {
		r.health.RecordSuccess(key)
		return res
	}
	switch {
	case ctx.Err() != nil:
		res.aborted, res.class = true, llm.ClassAborted
		return res
	case errors.Is(context.Cause(actx), errIdle):
		res.timedOut, res.class = true, llm.ClassOther
		res.err = &TimeoutError{Model: key, Idle: r.idle}
	default:
		res.class = llm.Classify(err)
		if res.class == llm.ClassAborted {
			// A context error that is not the caller's (a client
			// timeout): a failure of this model.
			res.class = llm.ClassOther
		}
	}
	if res.class.IsRateLimit() {
		res.cooldown = llm.Cooldown(err)
		r.health.RecordRateLimit(key, r.health.Now().Add(res.cooldown), err)
	} else {
		r.health.RecordFailure(key, res.err)
	}
	return res
}

// firstToken reports whether an event of type t carries the first output
// of a reply (text, thinking or a tool call), for the time to first token:
// the start event comes with the response's headers, before any token.
func firstToken(t llm.EventType) bool {
	switch t {
	case llm.EventTextStart, llm.EventTextDelta, llm.EventThinkingStart, llm.EventThinkingDelta,
		llm.EventToolCallStart, llm.EventToolCallDelta, llm.EventDone:
		return true
	}
	return false
}

// countAttempt gives the metrics one attempt: its outcome, the time from
// the request going out to its first token and to its end, and the tokens
// the provider reported.
func (r *Router) countAttempt(c Candidate, res result, sent time.Time, firstEvent time.Duration) {
	if r.metrics == nil {
		return
	}
	a := metrics.LLMAttempt{Provider: c.provider(), Model: c.Model.ID, Outcome: metrics.OutcomeOK,
		FirstToken: firstEvent, Duration: time.Since(sent)}
	switch {
	case res.aborted:
		a.Outcome = metrics.OutcomeCanceled
	case res.err != nil:
		a.Outcome = metrics.OutcomeError
	}
	if res.msg != nil {
		a.InputTokens = int64(res.msg.Usage.Input + res.msg.Usage.CacheRead + res.msg.Usage.CacheWrite)
		a.OutputTokens = int64(res.msg.Usage.Output)
	}
	r.metrics.LLM(a)
}

// ActiveCooldowns counts the models whose rate-limit cooldown has not
// ended (beige_llm_cooldowns_active).
func (h *Health) ActiveCooldowns() int {
	now := h.Now()
	n := 0
	for _, e := range h.Snapshot() {
		if e.RetryAfter.After(now) {
			n++
		}
	}
	return n
}
