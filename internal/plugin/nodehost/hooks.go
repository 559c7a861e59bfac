package nodehost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// runHook sends a hook's event to the host and decodes its result.
//
// Every hook is registered for every TypeScript plugin, in its config
// place, so that a plugin that loads late (its first load failed) or
// restarts with other hooks has the hooks it registers now: a hook the
// running plugin did not register is skipped. While the host is down, a
// hook its last register() declared fails (a pre* hook fails closed); one
// it did not declare, or any hook of a plugin that never loaded, is
// skipped. The host and its registration are read together, so a call in
// flight sees one or the other, never a mix.
func (p *Plugin) runHook(ctx context.Context, name plugin.HookName, event any, out any) error {
	p.mu.Lock()
	reg := p.live
	p.mu.Unlock()
	if reg == nil || !slices.Contains(reg.Hooks, string(name)) {
		return errSkipped
	}
	pr, err := p.current()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, hookTimeout)
	defer cancel()
	raw, err := pr.call(ctx, "hook", map[string]any{"hook": string(name), "event": event})
	if err != nil {
		return p.callError(ctx, pr, "hook "+string(name), err)
	}
	if out == nil {
		return nil
	}
	if err := strictDecode(raw, out); err != nil {
		return fmt.Errorf("plugin %s: hook %s: %w", p.env.Name, name, err)
	}
	return nil
}

func splitModel(m string) map[string]string {
	prov, id, _ := strings.Cut(m, "/")
	return map[string]string{"provider": prov, "modelId": id}
}

// errSkipped is runHook's answer for a hook the plugin has not registered.
var errSkipped = errors.New("hook not registered")

// skipped turns errSkipped into success.
func skipped(err error) error {
	if errors.Is(err, errSkipped) {
		return nil
	}
	return err
}

// errBlocked is a prePrompt hook's block without a reason.
var errBlocked = errors.New("blocked")

// hook returns the Go hook that forwards name's events to the plugin, in
// the original's event shapes. A hook that fails (the plugin threw, crashed
// or is restarting) stops a prompt: prePrompt fails closed.
func (p *Plugin) hook(name plugin.HookName) (any, error) {
	sess := func(agent string, s proto.SessionContext) map[string]any {
		return map[string]any{"sessionKey": s.SessionKey, "agentName": agent, "channel": s.Channel}
	}
	switch name {
	case plugin.HookPrePrompt:
		return plugin.PrePromptHook(func(ctx context.Context, ev *plugin.PrePromptEvent) error {
			e := sess(ev.Agent, ev.Session)
			e["message"] = ev.Prompt
			var r struct {
				Message string `json:"message"`
				Block   bool   `json:"block"`
				Reason  string `json:"reason"`
			}
			if err := p.runHook(ctx, name, e, &r); err != nil {
				return skipped(err)
			}
			if r.Block {
				if r.Reason == "" {
					return errBlocked
				}
				return errors.New(r.Reason)
			}
			ev.Prompt = r.Message
			return nil
		}), nil
	case plugin.HookPostResponse:
		return plugin.PostResponseHook(func(ctx context.Context, ev *plugin.PostResponseEvent) error {
			e := sess(ev.Agent, ev.Session)
			e["response"] = ev.Response
			var r struct {
				Response string `json:"response"`
				Block    bool   `json:"block"`
			}
			if err := p.runHook(ctx, name, e, &r); err != nil {
				return skipped(err)
			}
			if r.Block {
				return errBlocked
			}
			ev.Response = r.Response
			return nil
		}), nil
	case plugin.HookPreToolExec:
		return plugin.PreToolExecHook(func(ctx context.Context, ev *plugin.PreToolExecEvent) error {
			e := map[string]any{"toolName": ev.Tool, "args": nonNil(ev.Args), "sessionKey": ev.Session.SessionKey, "agentName": ev.Agent}
			var r struct {
				Allow  bool   `json:"allow"`
				Reason string `json:"reason"`
			}
			if err := p.runHook(ctx, name, e, &r); err != nil {
				return skipped(err)
			}
			if !r.Allow {
				if r.Reason == "" {
					return errors.New("denied")
				}
				return errors.New(r.Reason)
			}
			return nil
		}), nil
	case plugin.HookPostToolExec:
		return plugin.PostToolExecHook(func(ctx context.Context, ev *plugin.PostToolExecEvent) error {
			e := map[string]any{
				"toolName": ev.Tool, "args": nonNil(ev.Args), "sessionKey": ev.Session.SessionKey, "agentName": ev.Agent,
				"result": map[string]any{"output": ev.Result.Output, "exitCode": ev.Result.ExitCode},
			}
			return skipped(p.runHook(ctx, name, e, nil))
		}), nil
	case plugin.HookSessionCreated:
		return plugin.SessionCreatedHook(func(ctx context.Context, ev *plugin.SessionCreatedEvent) error {
			return skipped(p.runHook(ctx, name, sess(ev.Agent, ev.Session), nil))
		}), nil
	case plugin.HookSessionDisposed:
		return plugin.SessionDisposedHook(func(ctx context.Context, ev *plugin.SessionDisposedEvent) error {
			return skipped(p.runHook(ctx, name, sess(ev.Agent, ev.Session), nil))
		}), nil
	case plugin.HookModelSwitched:
		return plugin.ModelSwitchedHook(func(ctx context.Context, ev *plugin.ModelSwitchedEvent) error {
			e := sess(ev.Agent, ev.Session)
			e["previousModel"], e["newModel"], e["reason"] = splitModel(ev.From), splitModel(ev.To), ev.Reason
			return skipped(p.runHook(ctx, name, e, nil))
		}), nil
	case plugin.HookGatewayStarted:
		return plugin.GatewayStartedHook(func(ctx context.Context, _ *plugin.GatewayStartedEvent) error {
			return skipped(p.runHook(ctx, name, map[string]any{}, nil))
		}), nil
	case plugin.HookGatewayShutdown:
		return plugin.GatewayShutdownHook(func(ctx context.Context, _ *plugin.GatewayShutdownEvent) error {
			return skipped(p.runHook(ctx, name, map[string]any{}, nil))
		}), nil
	}
	return nil, fmt.Errorf("plugin %s: register() registered unknown hook %q (known: %v)", p.env.Name, name, plugin.HookNames)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
