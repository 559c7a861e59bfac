// Package routing decides which model answers a prompt, and keeps the
// providers healthy while doing it. It owns:
//
//   - the per-provider FIFO concurrency [Limiters] (llm.providers.<p>.concurrency):
//     requests beyond a provider's limit queue in arrival order and are
//     never rejected; all models of a provider share its pool;
//   - the provider-health store [Health], persisted in
//     $BEIGE_HOME/data/provider-health.json: global rate-limit cooldowns
//     (every session skips a cooling model) and failure counts;
//   - the [Router]'s multi-pass fallback loop over an agent's model and
//     fallbackModels (3 passes; a model leaves the pool on an active
//     cooldown, on 3 consecutive failures in the run, or at once on a
//     fatal 400/401/403), with an inactivity watchdog on every attempt.
//
// Every model call goes through one function, Router.call, which takes the
// provider's concurrency slot, runs the watchdog and records the outcome in
// Health, so that prompts and streaming calls are treated alike.
//
// It does not build providers, read the config, run hooks or write the
// audit log: the gateway does, through [Candidate] and [Observer].
package routing
