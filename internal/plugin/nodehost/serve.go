package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// maxToolParams bounds the tool arguments passed to a plugin's
// onToolStart; larger ones arrive as {}.
const maxToolParams = 64 << 10

// serve answers one ctx call of the plugin: the PluginContext methods the
// original gives plugins, mapped onto the gateway's plugin.PluginContext.
// Its arguments come from the plugin and are decoded strictly.
func (p *Plugin) serve(ctx context.Context, op string, raw json.RawMessage, notify func(map[string]any)) (any, error) {
	p.mu.Lock()
	pc := p.pc
	p.mu.Unlock()
	need := func() error {
		if pc == nil {
			return fmt.Errorf("ctx.%s: the gateway is not serving yet (call it from start() or a tool, not from createPlugin or register)", op)
		}
		return nil
	}
	// args decodes the call's arguments into v, then checks that the
	// gateway serves: what most methods do first (see decodeNamed).
	args := func(v any) error { return decodeNamed(op, raw, v, need) }
	switch op {
	case "getChannel", "channel.sendTo":
		return p.serveChannel(ctx, op, raw, pc)
	case "prompt":
		var a struct {
			SessionKey string `json:"sessionKey"`
			AgentName  string `json:"agentName"`
			Message    string `json:"message"`
			Channel    string `json:"channel"`
			Stream     bool   `json:"stream"`
			ToolStart  bool   `json:"toolStart"`
			promptExtras
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		if !slices.Contains(pc.Agents(), a.AgentName) {
			return nil, fmt.Errorf("ctx.prompt: unknown agent %q", a.AgentName)
		}
		req := plugin.PromptRequest{Agent: a.AgentName, SessionKey: a.SessionKey, Message: a.Message, Channel: p.channelName()}
		if err := a.apply(&req, notify); err != nil {
			return nil, err
		}
		if a.Stream && notify != nil {
			// promptStreaming: text deltas, and the start of each assistant
			// turn (onAssistantTurnStart), as events of this call.
			req.OnEvent = func(ev llm.Event) {
				switch ev.Type {
				case llm.EventStart:
					notify(map[string]any{"kind": "turn"})
				case llm.EventTextDelta:
					notify(map[string]any{"kind": "delta", "delta": ev.Delta})
				}
			}
		}
		if a.ToolStart && notify != nil {
			// onToolStart(toolName, params): the arguments as the model
			// gave them, when they are a small JSON object.
			req.OnToolCall = func(name string, args json.RawMessage) {
				var params map[string]any
				if len(args) > maxToolParams || json.Unmarshal(args, &params) != nil || params == nil {
					params = map[string]any{}
				}
				notify(map[string]any{"kind": "tool", "name": name, "params": params})
			}
		}
		res, err := pc.Prompt(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("ctx.prompt: %w", err)
		}
		return res.Text, nil
	case "newSession":
		var a struct {
			SessionKey string `json:"sessionKey"`
			AgentName  string `json:"agentName"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		if err := pc.NewSession(ctx, a.AgentName, a.SessionKey); err != nil {
			return nil, fmt.Errorf("ctx.newSession: %w", err)
		}
		return nil, nil
	case "getSessionSettings":
		var a struct {
			SessionKey string `json:"sessionKey"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		out := maps.Clone(pc.Settings(a.SessionKey, nil))
		// model, replyTo, channel and metadata are kept in the session's
		// metadata, as the original keeps them in the session map entry.
		meta := p.metadata(pc, a.SessionKey)
		for name, key := range metaSettings {
			if v, ok := meta[key]; ok {
				out[name] = v
			}
		}
		return out, nil
	case "updateSessionSettings":
		var a struct {
			SessionKey string         `json:"sessionKey"`
			Update     map[string]any `json:"update"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		for k, v := range a.Update {
			if _, ok := metaSettings[k]; ok {
				if err := p.setMetaSetting(pc, a.SessionKey, k, v); err != nil {
					return nil, fmt.Errorf("ctx.updateSessionSettings: %w", err)
				}
				continue
			}
			if err := pc.SetSetting(a.SessionKey, k, v); err != nil {
				return nil, fmt.Errorf("ctx.updateSessionSettings: %w", err)
			}
		}
		return nil, nil
	case "clearSessionSettings":
		var a struct {
			SessionKey string `json:"sessionKey"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		for k := range pc.Settings(a.SessionKey, nil) {
			if err := pc.SetSetting(a.SessionKey, k, nil); err != nil {
				return nil, fmt.Errorf("ctx.clearSessionSettings: %w", err)
			}
		}
		return nil, nil
	case "isSessionActive":
		var a struct {
			SessionKey string `json:"sessionKey"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		for _, ag := range pc.Agents() {
			if st, err := pc.Status(ctx, ag, a.SessionKey); err == nil && st.Running {
				return true, nil
			}
		}
		return false, nil
	case "getRegisteredTools":
		if err := decodeNamed(op, raw, &struct{}{}, nil); err != nil {
			return nil, err
		}
		if err := need(); err != nil || p.env.RegisteredTools == nil {
			return nil, errors.New("ctx.getRegisteredTools: the gateway is not serving yet")
		}
		return p.env.RegisteredTools(), nil
	case "abortSession", "compactSession":
		var a struct {
			SessionKey string `json:"sessionKey"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		agent, err := sessionAgent(ctx, pc, a.SessionKey)
		if err != nil || agent == "" {
			if op == "abortSession" {
				return nil, nil // no-op for an unknown session, as in the original
			}
			return nil, fmt.Errorf("ctx.compactSession: no session %q", a.SessionKey)
		}
		if op == "abortSession" {
			pc.Abort(agent, a.SessionKey)
			return nil, nil
		}
		if err := pc.Compact(ctx, agent, a.SessionKey); err != nil {
			return nil, fmt.Errorf("ctx.compactSession: %w", err)
		}
		return map[string]any{"tokensBefore": 0, "summary": ""}, nil
	case "listSessions", "listSessionKeys":
		var a struct {
			AgentName           string `json:"agentName"`
			IncludeToolSessions bool   `json:"includeToolSessions"`
		}
		if err := decodeNamed(op, raw, &a, nil); err != nil {
			return nil, err
		}
		sl, err := p.lister(pc, need)
		if err != nil {
			return nil, err
		}
		list, err := sl.Sessions(ctx, a.AgentName)
		if err != nil {
			return nil, fmt.Errorf("ctx.%s: %w", op, err)
		}
		if op == "listSessionKeys" {
			out := make([]map[string]string, 0, len(list))
			for _, s := range list {
				out = append(out, map[string]string{"key": s.ID, "sessionFile": s.SessionFile})
			}
			return out, nil
		}
		out := make([]map[string]string, 0, len(list))
		for _, s := range list {
			out = append(out, map[string]string{
				"sessionId": s.SessionID, "sessionFile": s.SessionFile, "agentName": s.AgentName,
				"createdAt": s.CreatedAt, "firstMessage": s.FirstMessage,
			})
		}
		return out, nil
	case "getSessionEntry":
		var a struct {
			SessionKey string `json:"sessionKey"`
		}
		if err := decodeNamed(op, raw, &a, nil); err != nil {
			return nil, err
		}
		sl, err := p.lister(pc, need)
		if err != nil {
			return nil, err
		}
		return p.sessionEntry(ctx, pc, sl, a.SessionKey)
	case "createSession":
		var a struct {
			SessionKey string                     `json:"sessionKey"`
			AgentName  string                     `json:"agentName"`
			Metadata   map[string]json.RawMessage `json:"metadata"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		if !slices.Contains(pc.Agents(), a.AgentName) {
			return nil, fmt.Errorf("ctx.createSession: unknown agent %q", a.AgentName)
		}
		if err := pc.NewSession(ctx, a.AgentName, a.SessionKey); err != nil {
			return nil, fmt.Errorf("ctx.createSession: %w", err)
		}
		p.metaMu.Lock()
		if p.meta == nil {
			p.meta = map[string]map[string]any{}
		}
		if p.meta[a.SessionKey] == nil {
			p.meta[a.SessionKey] = map[string]any{}
		}
		p.meta[a.SessionKey]["\x00agent"] = a.AgentName
		p.metaMu.Unlock()
		for k, v := range a.Metadata {
			if err := p.setMetadata(pc, a.SessionKey, k, v); err != nil {
				return nil, fmt.Errorf("ctx.createSession: %w", err)
			}
		}
		return "", nil
	case "setSessionMetadata":
		var a struct {
			SessionKey string          `json:"sessionKey"`
			Key        string          `json:"key"`
			Value      json.RawMessage `json:"value"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		if err := p.setMetadata(pc, a.SessionKey, a.Key, a.Value); err != nil {
			return nil, err
		}
		return nil, nil
	case "getSessionMetadata":
		var a struct {
			SessionKey string `json:"sessionKey"`
			Key        string `json:"key"`
		}
		if err := args(&a); err != nil {
			return nil, err
		}
		return p.metadata(pc, a.SessionKey)[a.Key], nil
	}
	if res, ok, err := p.serveSessionModel(ctx, pc, op, raw, need); ok {
		return res, err
	}
	if op == "invokeTool" {
		return p.serveInvokeTool(ctx, pc, raw, need)
	}
	if op == "llmPrompt" {
		return p.serveLLMPrompt(ctx, pc, raw, need)
	}
	if op == "steerSession" {
		return p.serveSteer(ctx, pc, raw, need)
	}
	return nil, fmt.Errorf("ctx.%s is not supported by beige yet", op)
}

// sessionAgent returns the agent whose session key is, from the sessions
// list ("" when no agent has it).
func sessionAgent(ctx context.Context, pc plugin.PluginContext, key string) (string, error) {
	sl, ok := pc.(sessionLister)
	if !ok {
		return "", errors.New("this gateway cannot list sessions")
	}
	for _, ag := range pc.Agents() {
		list, err := sl.Sessions(ctx, ag)
		if err != nil {
			continue
		}
		for _, s := range list {
			if s.ID == key {
				return ag, nil
			}
		}
	}
	return "", nil
}

// sessionLister is the part of the gateway's PluginContext that lists an
// agent's sessions.
type sessionLister interface {
	Sessions(ctx context.Context, agent string) ([]proto.SessionInfo, error)
}

func (p *Plugin) lister(pc plugin.PluginContext, need func() error) (sessionLister, error) {
	if err := need(); err != nil {
		return nil, err
	}
	sl, ok := pc.(sessionLister)
	if !ok {
		return nil, errors.New("this gateway cannot list sessions")
	}
	return sl, nil
}

// sessionEntry finds a session by key among every agent's sessions; a
// session the plugin created that has no file yet is found through the
// metadata kept for it. Its metadata is what the plugin set on it.
func (p *Plugin) sessionEntry(ctx context.Context, pc plugin.PluginContext, sl sessionLister, key string) (any, error) {
	p.metaMu.Lock()
	created, _ := p.meta[key]["\x00agent"].(string)
	p.metaMu.Unlock()
	meta := p.metadata(pc, key)
	if len(meta) == 0 {
		meta = nil
	}
	for _, ag := range pc.Agents() {
		list, err := sl.Sessions(ctx, ag)
		if err != nil {
			continue
		}
		for _, s := range list {
			if s.ID == key {
				out := map[string]any{"agentName": s.AgentName, "sessionFile": s.SessionFile, "createdAt": s.CreatedAt}
				if meta != nil {
					out["metadata"] = meta
				}
				return out, nil
			}
		}
	}
	if created != "" {
		out := map[string]any{"agentName": created, "sessionFile": "", "createdAt": ""}
		if meta != nil {
			out["metadata"] = meta
		}
		return out, nil
	}
	return nil, nil
}

// decodeNamed decodes the arguments of a call of ctx.<op> strictly into v
// (none is {}) and then, when need is not nil, checks that the gateway
// serves: the one way every method decodes its arguments, so that every
// error starts "ctx.<op>:".
func decodeNamed(op string, raw json.RawMessage, v any, need func() error) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := strictDecode(raw, v); err != nil {
		return fmt.Errorf("ctx.%s: bad arguments: %w", op, err)
	}
	if need == nil {
		return nil
	}
	return need()
}
