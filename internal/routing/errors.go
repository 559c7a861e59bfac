package routing

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/llm"
)

// Attempt is one entry of the fallback loop's record: a failed attempt on
// a model, or a model skipped because of its cooldown.
type Attempt struct {
	Candidate Candidate
	// Err is the attempt's error (a *TimeoutError for a watchdog abort);
	// nil for a skipped model.
	Err error
	// Class is llm.Classify(Err) (ClassOther for a watchdog abort,
	// ClassRateLimit for a skipped model).
	Class llm.ErrorClass
	// TimedOut says the watchdog aborted the stream.
	TimedOut bool
	// Skipped says the model was not tried: its cooldown was active.
	Skipped bool
	// Cooldown is, for a rate limit, the cooldown it started; for a
	// skipped model, how much of it was left.
	Cooldown time.Duration
}

// Reason is the modelSwitched reason for leaving the model after this
// attempt: ReasonRateLimit, ReasonTimeout or ReasonError.
func (a Attempt) Reason() string {
	switch {
	case a.Skipped || a.Class.IsRateLimit():
		return ReasonRateLimit
	case a.TimedOut:
		return ReasonTimeout
	}
	return ReasonError
}

// Describe says why the attempt failed, e.g. "rate limited (429), retry
// after 2m0s" or "overloaded (529)"; a fatal error keeps the provider's
// message.
func (a Attempt) Describe() string {
	round := func(d time.Duration) string { return max(d, 0).Round(time.Second).String() }
	var ae *llm.APIError
	isAPI := errors.As(a.Err, &ae)
	switch {
	case a.Skipped:
		return "skipped, cooling down for " + round(a.Cooldown)
	case a.TimedOut:
		var te *TimeoutError
		if errors.As(a.Err, &te) {
			return "timed out, no event for " + te.Idle.String()
		}
		return "timed out"
	case a.Err == nil:
		return "failed"
	case a.Class == llm.ClassRateLimit && isAPI:
		return fmt.Sprintf("rate limited (%d), retry after %s", ae.StatusCode, round(a.Cooldown))
	case a.Class == llm.ClassSoftRateLimit:
		return fmt.Sprintf("rate limited (%s), retry after %s", llm.ErrorMessage(a.Err), round(a.Cooldown))
	case a.Class == llm.ClassTransient && isAPI && ae.StatusCode == 529:
		return "overloaded (529)"
	case a.Class == llm.ClassTransient && isAPI && ae.StatusCode != 0:
		return fmt.Sprintf("%s (%d): %s", strings.ToLower(http.StatusText(ae.StatusCode)), ae.StatusCode, ae.Message)
	}
	return llm.ErrorMessage(a.Err)
}

// ExhaustedError is the failure of a run whose every model failed or was
// skipped. Its text lists the attempts in order:
//
//	all models failed: anthropic/claude-x: rate limited (429), retry after 2m0s; zai/glm: overloaded (529)
type ExhaustedError struct {
	Attempts []Attempt
}

func (e *ExhaustedError) Error() string {
	var b strings.Builder
	b.WriteString("all models failed")
	for i, a := range e.Attempts {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(a.Candidate.Key() + ": " + a.Describe())
	}
	return b.String()
}

// Unwrap returns the attempts' errors, so errors.As finds e.g. the
// provider's *llm.APIError.
func (e *ExhaustedError) Unwrap() []error {
	var errs []error
	for _, a := range e.Attempts {
		if a.Err != nil {
			errs = append(errs, a.Err)
		}
	}
	return errs
}
