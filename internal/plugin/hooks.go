package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// HookName names a point where plugins can act. Hooks of one name run in
// the order the plugins are written in the config.
type HookName string

// The hooks. The tool pipeline (internal/pipeline) runs preToolExec and
// postToolExec around every tool call, core and plugin tools alike; the others are run by the agent layer and the gateway
// through the Host's Run* methods.
const (
	HookPrePrompt       HookName = "prePrompt"
	HookPostResponse    HookName = "postResponse"
	HookPreToolExec     HookName = "preToolExec"
	HookPostToolExec    HookName = "postToolExec"
	HookSessionCreated  HookName = "sessionCreated"
	HookSessionDisposed HookName = "sessionDisposed"
	HookModelSwitched   HookName = "modelSwitched"
	HookGatewayStarted  HookName = "gatewayStarted"
	HookGatewayShutdown HookName = "gatewayShutdown"
)

// HookNames lists every hook.
var HookNames = []HookName{
	HookPrePrompt, HookPostResponse, HookPreToolExec, HookPostToolExec,
	HookSessionCreated, HookSessionDisposed, HookModelSwitched,
	HookGatewayStarted, HookGatewayShutdown,
}

// PrePromptEvent is a user message about to go to the model. A hook may
// change Prompt; an error stops the prompt with that error.
type PrePromptEvent struct {
	Agent   string
	Session proto.SessionContext
	Model   string // provider/model
	Prompt  string
}

// PostResponseEvent is the model's final answer about to go to the channel.
// A hook may change Response; an error is logged.
type PostResponseEvent struct {
	Agent    string
	Session  proto.SessionContext
	Model    string
	Response string
}

// PreToolExecEvent is a tool call that policy allowed, before it runs: a
// plugin tool's, or a core tool's (Tool "exec", "read", "write", "patch").
// A hook that returns an error denies the call; the error's text is the
// reason the agent sees. Hooks must not change the event.
type PreToolExecEvent struct {
	Agent string
	Tool  string
	// Args are the call's args as the audit log has them: a plugin tool's
	// argv; [command] for exec, [path] for read and patch, [path, "(N
	// bytes)"] for write.
	Args    []string
	Cwd     string // a plugin tool's folder as the sandbox sent it, relative to /workspace; "" for core tools
	Session proto.SessionContext
}

// PostToolExecEvent is a tool call that has run (core tools too: Output is
// then the result's text). Err is set when the tool failed, could not run
// or was stopped (timeout); Stderr then ends with its text. Errors of the
// hook are logged.
type PostToolExecEvent struct {
	Agent    string
	Tool     string
	Args     []string
	Session  proto.SessionContext
	Result   Result
	Err      error
	Duration time.Duration
}

// SessionCreatedEvent: a session was created.
type SessionCreatedEvent struct {
	Agent   string
	Session proto.SessionContext
}

// SessionDisposedEvent: a session was closed or removed.
type SessionDisposedEvent struct {
	Agent   string
	Session proto.SessionContext
}

// Reasons of ModelSwitchedEvent.
const (
	SwitchFallbackRateLimit = "fallback_rate_limit"
	SwitchFallbackError     = "fallback_error"
	SwitchFallbackTimeout   = "fallback_timeout"
	SwitchUserOverride      = "user_override"
)

// ModelSwitchedEvent: a session ended up on a model other than its primary.
type ModelSwitchedEvent struct {
	Agent    string
	Session  proto.SessionContext
	From, To string // provider/model
	Reason   string // Switch*
}

// GatewayStartedEvent: the gateway is up and serving.
type GatewayStartedEvent struct {
	Agents []string
}

// GatewayShutdownEvent: the gateway is about to stop.
type GatewayShutdownEvent struct{}

// The hook functions, one type per hook.
type (
	PrePromptHook       func(ctx context.Context, ev *PrePromptEvent) error
	PostResponseHook    func(ctx context.Context, ev *PostResponseEvent) error
	PreToolExecHook     func(ctx context.Context, ev *PreToolExecEvent) error
	PostToolExecHook    func(ctx context.Context, ev *PostToolExecEvent) error
	SessionCreatedHook  func(ctx context.Context, ev *SessionCreatedEvent) error
	SessionDisposedHook func(ctx context.Context, ev *SessionDisposedEvent) error
	ModelSwitchedHook   func(ctx context.Context, ev *ModelSwitchedEvent) error
	GatewayStartedHook  func(ctx context.Context, ev *GatewayStartedEvent) error
	GatewayShutdownHook func(ctx context.Context, ev *GatewayShutdownEvent) error
)

// hooks holds the registered hooks in registration (= config) order.
type hooks struct {
	prePrompt       []namedHook[PrePromptHook]
	postResponse    []namedHook[PostResponseHook]
	preToolExec     []namedHook[PreToolExecHook]
	postToolExec    []namedHook[PostToolExecHook]
	sessionCreated  []namedHook[SessionCreatedHook]
	sessionDisposed []namedHook[SessionDisposedHook]
	modelSwitched   []namedHook[ModelSwitchedHook]
	gatewayStarted  []namedHook[GatewayStartedHook]
	gatewayShutdown []namedHook[GatewayShutdownHook]
}

type namedHook[F any] struct {
	plugin string
	fn     F
}

// add files fn under name; fn must be the hook's function type (or a func
// literal of the same signature).
func (h *hooks) add(plugin string, name HookName, fn any) error {
	bad := func() error {
		return fmt.Errorf("hook %s: want a func(context.Context, *%sEvent) error, got %T", name, exported(name), fn)
	}
	switch name {
	case HookPrePrompt:
		f, ok := asHook[PrePromptHook](fn)
		if !ok {
			return bad()
		}
		h.prePrompt = append(h.prePrompt, namedHook[PrePromptHook]{plugin, f})
	case HookPostResponse:
		f, ok := asHook[PostResponseHook](fn)
		if !ok {
			return bad()
		}
		h.postResponse = append(h.postResponse, namedHook[PostResponseHook]{plugin, f})
	case HookPreToolExec:
		f, ok := asHook[PreToolExecHook](fn)
		if !ok {
			return bad()
		}
		h.preToolExec = append(h.preToolExec, namedHook[PreToolExecHook]{plugin, f})
	case HookPostToolExec:
		f, ok := asHook[PostToolExecHook](fn)
		if !ok {
			return bad()
		}
		h.postToolExec = append(h.postToolExec, namedHook[PostToolExecHook]{plugin, f})
	case HookSessionCreated:
		f, ok := asHook[SessionCreatedHook](fn)
		if !ok {
			return bad()
		}
		h.sessionCreated = append(h.sessionCreated, namedHook[SessionCreatedHook]{plugin, f})
	case HookSessionDisposed:
		f, ok := asHook[SessionDisposedHook](fn)
		if !ok {
			return bad()
		}
		h.sessionDisposed = append(h.sessionDisposed, namedHook[SessionDisposedHook]{plugin, f})
	case HookModelSwitched:
		f, ok := asHook[ModelSwitchedHook](fn)
		if !ok {
			return bad()
		}
		h.modelSwitched = append(h.modelSwitched, namedHook[ModelSwitchedHook]{plugin, f})
	case HookGatewayStarted:
		f, ok := asHook[GatewayStartedHook](fn)
		if !ok {
			return bad()
		}
		h.gatewayStarted = append(h.gatewayStarted, namedHook[GatewayStartedHook]{plugin, f})
	case HookGatewayShutdown:
		f, ok := asHook[GatewayShutdownHook](fn)
		if !ok {
			return bad()
		}
		h.gatewayShutdown = append(h.gatewayShutdown, namedHook[GatewayShutdownHook]{plugin, f})
	default:
		return fmt.Errorf("unknown hook %q (known: %v)", name, HookNames)
	}
	return nil
}

// asHook accepts the named function type F or an unnamed func of the same
// signature; a nil function is refused.
func asHook[F ~func(context.Context, E) error, E any](fn any) (F, bool) {
	switch f := fn.(type) {
	case F:
		return f, f != nil
	case func(context.Context, E) error:
		return F(f), f != nil
	}
	return nil, false
}

func exported(n HookName) string {
	s := string(n)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// runAll runs hooks in order and stops at the first error, which it returns
// wrapped with the plugin's name.
func runAll[F ~func(context.Context, E) error, E any](ctx context.Context, hs []namedHook[F], ev E) error {
	for _, h := range hs {
		if err := callHook(ctx, h, ev); err != nil {
			return err
		}
	}
	return nil
}

// callHook runs one hook, turning a panic into an error.
func callHook[F ~func(context.Context, E) error, E any](ctx context.Context, h namedHook[F], ev E) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &HookError{Plugin: h.plugin, Err: fmt.Errorf("panic: %v", r)}
		}
	}()
	if e := h.fn(ctx, ev); e != nil {
		return &HookError{Plugin: h.plugin, Err: e}
	}
	return nil
}

// HookError is a hook's failure, naming the plugin it came from.
type HookError struct {
	Plugin string
	Err    error
}

func (e *HookError) Error() string { return e.Plugin + ": " + e.Err.Error() }
func (e *HookError) Unwrap() error { return e.Err }
