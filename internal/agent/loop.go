package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
)

// DefaultMaxModelCalls bounds the model calls of one prompt when the Loop
// says nothing: a model stuck calling tools stops there.
const DefaultMaxModelCalls = 50

// ErrAborted is returned (wrapped, together with the cause: context.Canceled,
// a deadline, or the cause given to the cancel func) when a prompt was
// cancelled. The partial reply is kept in the history with stopReason
// aborted.
var ErrAborted = errors.New("agent: prompt aborted")

// PromptOptions are the observers of one prompt. Every callback is optional
// and is called synchronously on the prompt's goroutine, in order: keep
// them quick (hand slow work, such as a network send, to another
// goroutine).
type PromptOptions struct {
	// OnEvent receives the model's stream events (text deltas, tool call
	// deltas, done, error), for streaming clients.
	OnEvent func(llm.Event)
	// OnToolStart is called before each tool call runs, for verbose mode:
	// see ToolCallSummary.
	OnToolStart func(name string, args json.RawMessage)
	// OnToolEnd is called with each tool result, after it was recorded.
	OnToolEnd func(name string, result *llm.ToolResultMessage)
	// OnMessage receives each new message of the conversation (the user's
	// message, each assistant reply, each tool result), after it was
	// recorded.
	OnMessage func(llm.Message)
	// OnCompactionStart is called when the session's older turns are about
	// to be summarised before a model call of this prompt (automatic
	// compaction); OnCompactionEnd when that ended.
	OnCompactionStart func()
	OnCompactionEnd   func(CompactionOutcome)
	// Channel, if set, is the session's channel (a plugin channel's
	// name) instead of the session key's first part.
	Channel string
	// Model, if set, is the model of this prompt (its model calls and its
	// compaction) instead of the agent's (AgentSetup.Model).
	Model Model
	// ReplyTo, if set, is stored in the session's metadata as "_replyTo"
	// (where the original Beige kept a session's reply target) when the
	// prompt starts.
	ReplyTo json.RawMessage
}

// CompactionOutcome is what an automatic compaction did, for
// PromptOptions.OnCompactionEnd (the original's onAutoCompactionEnd).
type CompactionOutcome struct {
	Success bool
	// TokensBefore is the estimated context size before; 0 on failure.
	TokensBefore int
	// WillRetry is always false: beige compacts before a model call, never
	// as a retry of a call the context overflowed.
	WillRetry bool
	// ErrorMessage says why it failed.
	ErrorMessage string
}

// Result is the outcome of one prompt.
type Result struct {
	// Text is the answer: the text of the last reply (with a note when the
	// prompt stopped at the bound on model calls). It is what POST
	// /api/agents/:name/prompt returns as "response".
	Text string
	// Messages are the new messages of the prompt, the user's first.
	Messages []llm.Message
	// Usage adds up the tokens and cost of every model call, summaries
	// included.
	Usage llm.Usage
	// StopReason is that of the last reply.
	StopReason llm.StopReason
	// ModelCalls counts the model calls (summaries not included).
	ModelCalls int
	// Limited says the prompt stopped at the bound on model calls.
	Limited bool
	// Compactions counts the times older turns were summarised.
	Compactions int
}

// Loop runs prompts: it streams the model; when the reply calls tools, it
// runs them one after the other, in order, adds one tool result per call,
// and calls the model again; until the model stops, fails, is aborted or
// the bound on model calls is reached.
//
// A call with malformed arguments, of an unknown tool, or whose arguments
// the tool rejects gets an error result that says what was wrong, and the
// loop goes on so that the model can correct itself. Cancelling ctx aborts
// the prompt: the model call in flight ends (its partial reply is kept with
// stopReason aborted, which llm.TransformMessages leaves out of later
// requests), and the calls not yet run get an error result saying so.
//
// A Loop holds no state between prompts; its fields are read-only while it
// runs.
type Loop struct {
	Model Model
	// Tools may be nil: no tools.
	Tools        Tools
	SystemPrompt string
	// Session is passed to the tools (BEIGE_* variables, audit).
	Session proto.SessionContext
	// MaxModelCalls bounds the model calls of a prompt; 0 means
	// DefaultMaxModelCalls.
	MaxModelCalls int
	// Record, if set, is called with each new message before anyone else
	// sees it: persistence. An error ends the prompt.
	Record func(llm.Message) error
	// Compact, if set, is called before each model call with the
	// conversation so far; it returns the conversation to go on with (older
	// turns summarised) and what it did, or nil when it did nothing. An
	// error ends the prompt. See Compactor.
	Compact func(ctx context.Context, msgs []llm.Message) ([]llm.Message, *Compaction, error)
	// Steering, if set, is polled for a user message sent while the prompt
	// runs (Manager.Steer), one at a time: at the start, after each tool
	// call and after a reply that calls no tools — the last poll (last is
	// true) unless it gives a message. A message polled after a tool call
	// skips the reply's remaining calls (each gets the result
	// SkippedForSteering); the message is recorded and the model called
	// again, as pi does.
	Steering func(last bool) (llm.Message, bool)
	// Logger may be nil.
	Logger *slog.Logger
}

// SkippedForSteering is the result of a tool call that was not run
// because the user sent a new message meanwhile (pi's wording).
const SkippedForSteering = "Skipped due to queued user message."

// Run runs one prompt: history is the conversation so far (not modified),
// input the new user message. The Result is never nil, even with an error,
// and holds what happened up to the failure. The error wraps ErrAborted when
// ctx was cancelled; otherwise it is a model failure (after the Model's own
// retries) or a Record or Compact failure.
func (l *Loop) Run(ctx context.Context, history []llm.Message, input llm.Message, opts *PromptOptions) (*Result, error) {
	if opts == nil {
		opts = &PromptOptions{}
	}
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx = ContextWithSession(ctx, l.Session)
	r := &run{l: l, opts: opts, log: log, res: &Result{}}
	r.msgs = make([]llm.Message, len(history), len(history)+8)
	copy(r.msgs, history)
	if l.Tools != nil {
		r.defs = l.Tools.Definitions()
	}
	r.known = make(map[string]bool, len(r.defs))
	for _, d := range r.defs {
		r.known[d.Name] = true
	}
	r.model = l.Model.Info()

	if err := ctx.Err(); err != nil {
		return r.res, abortError(ctx)
	}
	if err := r.add(input); err != nil {
		return r.res, err
	}
	return r.loop(ctx)
}

// run is the state of one Loop.Run.
type run struct {
	l     *Loop
	opts  *PromptOptions
	log   *slog.Logger
	res   *Result
	msgs  []llm.Message
	defs  []llm.Tool
	known map[string]bool
	model llm.Model
}

// add records a new message and tells the observers.
func (r *run) add(m llm.Message) error {
	r.msgs = append(r.msgs, m)
	r.res.Messages = append(r.res.Messages, m)
	if r.l.Record != nil {
		if err := r.l.Record(m); err != nil {
			return fmt.Errorf("agent: record %s message: %w", m.Role(), err)
		}
	}
	if r.opts.OnMessage != nil {
		r.opts.OnMessage(m)
	}
	return nil
}

func abortError(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.Canceled
	}
	if ctx.Err() != nil && !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("%w: %w: %w", ErrAborted, ctx.Err(), cause)
	}
	return fmt.Errorf("%w: %w", ErrAborted, cause)
}

func (r *run) loop(ctx context.Context) (*Result, error) {
	maxCalls := r.l.MaxModelCalls
	if maxCalls <= 0 {
		maxCalls = DefaultMaxModelCalls
	}
	pending, steered := r.poll(ctx, false)
	for {
		if steered {
			if err := r.add(pending); err != nil {
				return r.res, err
			}
			steered = false
		}
		if r.l.Compact != nil {
			out, c, err := r.l.Compact(ctx, r.msgs)
			if err != nil {
				if ctx.Err() != nil {
					return r.res, abortError(ctx)
				}
				return r.res, fmt.Errorf("agent: compact: %w", err)
			}
			if c != nil {
				r.msgs = out
				r.res.Compactions++
				addUsage(&r.res.Usage, c.Usage)
			}
		}

		msg, err := r.callModel(ctx)
		r.res.ModelCalls++
		addUsage(&r.res.Usage, msg.Usage)
		r.res.StopReason = msg.StopReason
		r.res.Text = msg.Text()
		if aerr := r.add(llm.Message{Assistant: msg}); aerr != nil {
			return r.res, aerr
		}
		switch {
		case msg.StopReason == llm.StopReasonAborted:
			return r.res, abortError(ctx)
		case err != nil || msg.StopReason == llm.StopReasonError:
			if err == nil {
				err = errors.New(msg.ErrorMessage)
			}
			return r.res, fmt.Errorf("agent: model call failed: %w", err)
		}

		calls := msg.ToolCalls()
		if len(calls) == 0 {
			if pending, steered = r.poll(ctx, true); steered {
				continue
			}
			return r.res, nil
		}
		if r.res.ModelCalls >= maxCalls {
			note := fmt.Sprintf("not run: this prompt reached its limit of %d model calls", maxCalls)
			if err := r.skip(calls, note); err != nil {
				return r.res, err
			}
			r.res.Limited = true
			if r.res.Text != "" {
				r.res.Text += "\n\n"
			}
			r.res.Text += fmt.Sprintf("[Stopped: this prompt reached its limit of %d model calls before the task "+
				"was finished. Send another message to let the agent continue.]", maxCalls)
			return r.res, nil
		}
		for i, tc := range calls {
			if ctx.Err() != nil {
				if err := r.skip(calls[i:], "not run: the prompt was aborted"); err != nil {
					return r.res, err
				}
				return r.res, abortError(ctx)
			}
			if err := r.runTool(ctx, tc, msg.Model); err != nil {
				return r.res, err
			}
			if pending, steered = r.poll(ctx, false); steered {
				if err := r.skip(calls[i+1:], SkippedForSteering); err != nil {
					return r.res, err
				}
				break
			}
		}
		if ctx.Err() != nil {
			return r.res, abortError(ctx)
		}
	}
}

// poll takes the next steering message, if any; none once the prompt was
// aborted, so that a message is never taken and then dropped.
func (r *run) poll(ctx context.Context, last bool) (llm.Message, bool) {
	if r.l.Steering == nil || ctx.Err() != nil {
		return llm.Message{}, false
	}
	return r.l.Steering(last)
}

// callModel streams one reply. It always returns a message: one the Model
// failed to give is made up from the error.
func (r *run) callModel(ctx context.Context) (*llm.AssistantMessage, error) {
	c := llm.Context{SystemPrompt: r.l.SystemPrompt, Messages: r.msgs, Tools: r.defs}
	msg, err := r.l.Model.Stream(ctx, c, r.opts.OnEvent)
	if msg == nil {
		msg = &llm.AssistantMessage{
			Content: []llm.Content{}, API: r.model.API, Provider: r.model.Provider, Model: r.model.ID,
			StopReason: llm.StopReasonError, Timestamp: llm.Now(),
		}
		switch {
		case ctx.Err() != nil:
			msg.StopReason, msg.ErrorMessage = llm.StopReasonAborted, "Request was aborted"
		case err != nil:
			msg.ErrorMessage = llm.ErrorMessage(err)
		default:
			msg.ErrorMessage = "the model returned no message"
			err = errors.New("agent: the model returned no message")
		}
	} else {
		msg = msg.Clone()
	}
	if err != nil && msg.StopReason != llm.StopReasonError && msg.StopReason != llm.StopReasonAborted {
		msg.StopReason = llm.StopReasonError
		if ctx.Err() != nil {
			msg.StopReason = llm.StopReasonAborted
		}
		if msg.ErrorMessage == "" {
			msg.ErrorMessage = llm.ErrorMessage(err)
		}
	}
	return msg, err
}

// runTool runs one call and records its result.
func (r *run) runTool(ctx context.Context, tc llm.Content, model string) error {
	if r.opts.OnToolStart != nil {
		r.opts.OnToolStart(tc.Name, tc.Arguments)
	}
	start := time.Now()
	var out ToolOutcome
	switch {
	case tc.InvalidArguments != "":
		out = InvalidJSONOutcome(tc.Name, tc.InvalidArguments)
	case !r.known[tc.Name]:
		out = UnknownToolOutcome(tc.Name, r.defs)
	default:
		out = r.callTool(ctx, tc, model)
	}
	out = capOutcome(out)
	r.log.Debug("tool call", "tool", tc.Name, "duration", time.Since(start), "isError", out.IsError)
	return r.addResult(tc, out)
}

// callTool calls Tools.Run, turning a panic into an error result so that a
// broken tool cannot take the gateway down.
func (r *run) callTool(ctx context.Context, tc llm.Content, model string) (out ToolOutcome) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("tool panicked", "tool", tc.Name, "panic", p, "stack", string(debug.Stack()))
			out = ErrorOutcome("%s failed: internal error in the tool", tc.Name)
		}
	}()
	return r.l.Tools.Run(ctx, ToolCall{
		ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments,
		Session: r.l.Session, Model: cmp.Or(model, r.model.ID), Images: r.model.AcceptsImages(),
	})
}

func (r *run) addResult(tc llm.Content, out ToolOutcome) error {
	content := out.Content
	if content == nil {
		content = []llm.Content{}
	}
	res := &llm.ToolResultMessage{
		ToolCallID: tc.ID, ToolName: tc.Name, Content: content,
		IsError: out.IsError, Timestamp: llm.Now(),
	}
	if err := r.add(llm.Message{ToolResult: res}); err != nil {
		return err
	}
	if r.opts.OnToolEnd != nil {
		r.opts.OnToolEnd(tc.Name, res)
	}
	return nil
}

// skip answers calls that will not run, so that every call has its result.
func (r *run) skip(calls []llm.Content, why string) error {
	for _, tc := range calls {
		if err := r.addResult(tc, TextOutcome(why, true)); err != nil {
			return err
		}
	}
	return nil
}

// addUsage adds b to a.
func addUsage(a *llm.Usage, b llm.Usage) {
	a.Input += b.Input
	a.Output += b.Output
	a.CacheRead += b.CacheRead
	a.CacheWrite += b.CacheWrite
	a.TotalTokens += b.TotalTokens
	a.Cost.Input += b.Cost.Input
	a.Cost.Output += b.Cost.Output
	a.Cost.CacheRead += b.Cost.CacheRead
	a.Cost.CacheWrite += b.Cost.CacheWrite
	a.Cost.Total += b.Cost.Total
}

type sessionKey struct{}

// ContextWithSession returns ctx carrying the session a prompt runs for, so
// that a Model can tell whose call it makes (to audit it, or to fire hooks).
// Loop.Run does this for its Model and Tools.
func ContextWithSession(ctx context.Context, sc proto.SessionContext) context.Context {
	return context.WithValue(ctx, sessionKey{}, sc)
}

// SessionFromContext returns the session of ContextWithSession.
func SessionFromContext(ctx context.Context) (proto.SessionContext, bool) {
	sc, ok := ctx.Value(sessionKey{}).(proto.SessionContext)
	return sc, ok
}
