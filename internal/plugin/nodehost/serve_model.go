package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/beige-dev/beige/internal/plugin"
)

// maxNameLen bounds a session key, agent, provider or model name a plugin
// passes: longer ones are refused before they reach the gateway.
const maxNameLen = 512

// serveSessionModel answers getModel, getSessionModel, persistSessionModel and
// clearSessionModel: the session's pinned model, kept by the gateway in the
// session's settings (so it survives restarts), as the original keeps its
// activeModel in the session's metadata. handled is false for other ops.
func (p *Plugin) serveSessionModel(ctx context.Context, pc plugin.PluginContext, op string, raw json.RawMessage, need func() error) (res any, handled bool, err error) {
	switch op {
	case "getSessionModel":
		key, err := sessionKeyArg(op, raw, need)
		if err != nil {
			return nil, true, err
		}
		m, err := sessionModel(ctx, pc, key)
		if err != nil {
			return nil, true, fmt.Errorf("ctx.getSessionModel: %w", err)
		}
		if m == "" {
			return nil, true, nil // undefined: no such session
		}
		provider, id, _ := strings.Cut(m, "/")
		return map[string]string{"provider": provider, "modelId": id}, true, nil
	case "persistSessionModel":
		var a struct {
			SessionKey string `json:"sessionKey"`
			AgentName  string `json:"agentName"`
			Provider   string `json:"provider"`
			ModelID    string `json:"modelId"`
		}
		if err := decodeNamed(op, raw, &a, need); err != nil {
			return nil, true, err
		}
		if err := checkNames(op, a.SessionKey, a.AgentName, a.Provider, a.ModelID); err != nil {
			return nil, true, err
		}
		// The original ignores (with a warning) an unknown agent or a model
		// that is not one of the agent's: so do we, and the pin is never
		// set to a model the agent may not use.
		if err := pc.SetModel(ctx, a.AgentName, a.SessionKey, a.Provider+"/"+a.ModelID); err != nil {
			p.log.Warn("ctx.persistSessionModel: ignored", "session", a.SessionKey, "agent", a.AgentName, "err", err)
		}
		return nil, true, nil
	case "getModelHealth", "clearModelHealth":
		res, err := serveModelHealth(pc, op, raw, need)
		return res, true, err
	case "disposeSession":
		key, err := sessionKeyArg(op, raw, need)
		if err != nil {
			return nil, true, err
		}
		d, ok := pc.(plugin.Disposer)
		if !ok {
			return nil, true, errors.New("ctx.disposeSession: this gateway cannot dispose sessions")
		}
		d.DisposeSession(key)
		return nil, true, nil
	case "getSessionUsage":
		key, err := sessionKeyArg(op, raw, need)
		if err != nil {
			return nil, true, err
		}
		ur, ok := pc.(plugin.UsageReader)
		if !ok {
			return nil, true, errors.New("ctx.getSessionUsage: this gateway cannot read usage")
		}
		agent, err := sessionAgent(ctx, pc, key)
		if err != nil {
			return nil, true, fmt.Errorf("ctx.getSessionUsage: %w", err)
		}
		if agent == "" {
			return nil, true, nil
		}
		u, ok, err := ur.SessionUsage(ctx, agent, key)
		if err != nil {
			return nil, true, fmt.Errorf("ctx.getSessionUsage: %w", err)
		}
		if !ok {
			return nil, true, nil
		}
		// inputTokens is the context's size, as the original computes it.
		in := u.TotalTokens
		if in == 0 {
			in = u.Input + u.Output + u.CacheRead + u.CacheWrite
		}
		return map[string]int{"inputTokens": in, "outputTokens": u.Output, "cacheReadTokens": u.CacheRead, "cacheWriteTokens": u.CacheWrite}, true, nil
	case "getModel":
		res, err := serveModelInfo(pc, raw, need)
		return res, true, err
	case "clearSessionModel":
		key, err := sessionKeyArg(op, raw, need)
		if err != nil {
			return nil, true, err
		}
		if err := pc.SetModel(ctx, "", key, ""); err != nil {
			return nil, true, fmt.Errorf("ctx.clearSessionModel: %w", err)
		}
		return nil, true, nil
	}
	return nil, false, nil
}

// sessionKeyArg decodes the arguments of a method that takes only a session
// key ({sessionKey}) and checks the key, as decodeNamed and checkNames do.
func sessionKeyArg(op string, raw json.RawMessage, need func() error) (string, error) {
	var a struct {
		SessionKey string `json:"sessionKey"`
	}
	if err := decodeNamed(op, raw, &a, need); err != nil {
		return "", err
	}
	return a.SessionKey, checkNames(op, a.SessionKey)
}

// checkNames refuses an empty or oversized name.
func checkNames(op string, names ...string) error {
	for _, n := range names {
		if n == "" {
			return fmt.Errorf("ctx.%s: bad arguments: an empty name", op)
		}
		if len(n) > maxNameLen {
			return fmt.Errorf("ctx.%s: bad arguments: a name longer than %d bytes", op, maxNameLen)
		}
	}
	return nil
}

// sessionModel is the model ("provider/model") a session uses: the one it
// is pinned to, else its agent's primary; "" for a session no agent has
// (the original's undefined before the first message).
func sessionModel(ctx context.Context, pc plugin.PluginContext, key string) (string, error) {
	agent, err := sessionAgent(ctx, pc, key)
	if err != nil {
		return "", err
	}
	if agent != "" {
		st, err := pc.Status(ctx, agent, key)
		if err != nil {
			return "", err
		}
		return st.Model, nil
	}
	// A session pinned before its first message has no file yet: its pin
	// is still its model.
	for _, ag := range pc.Agents() {
		if st, err := pc.Status(ctx, ag, key); err == nil && st.Pinned {
			return st.Model, nil
		}
	}
	return "", nil
}

// serveModelInfo answers getModel: a model's metadata in the original's
// ModelInfo shape, undefined for a provider that is not configured.
func serveModelInfo(pc plugin.PluginContext, raw json.RawMessage, need func() error) (any, error) {
	var a struct {
		Provider string `json:"provider"`
		ModelID  string `json:"modelId"`
	}
	if err := decodeNamed("getModel", raw, &a, need); err != nil {
		return nil, err
	}
	if err := checkNames("getModel", a.Provider, a.ModelID); err != nil {
		return nil, err
	}
	ml, ok := pc.(plugin.ModelLookup)
	if !ok {
		return nil, errors.New("ctx.getModel: this gateway cannot describe models")
	}
	m, ok := ml.LookupModel(a.Provider, a.ModelID)
	if !ok {
		return nil, nil
	}
	return map[string]any{
		"provider": a.Provider, "modelId": m.ID, "name": m.Name,
		"contextWindow": m.ContextWindow, "maxTokens": m.MaxTokens,
	}, nil
}

// serveModelHealth answers getModelHealth (undefined when nothing was
// recorded for the model) and clearModelHealth.
func serveModelHealth(pc plugin.PluginContext, op string, raw json.RawMessage, need func() error) (any, error) {
	var a struct {
		Provider string `json:"provider"`
		ModelID  string `json:"modelId"`
	}
	if err := decodeNamed(op, raw, &a, need); err != nil {
		return nil, err
	}
	if err := checkNames(op, a.Provider, a.ModelID); err != nil {
		return nil, err
	}
	mh, ok := pc.(plugin.ModelHealth)
	if !ok {
		return nil, fmt.Errorf("ctx.%s: this gateway keeps no model health", op)
	}
	if op == "clearModelHealth" {
		mh.ClearModelHealth(a.Provider, a.ModelID)
		return nil, nil
	}
	st, ok := mh.ModelHealth(a.Provider, a.ModelID)
	if !ok {
		return nil, nil
	}
	out := map[string]any{
		"isCoolingDown": st.CoolingDown, "remainingCooldownMs": st.Remaining.Milliseconds(),
		"consecutiveFailures": st.ConsecutiveFailures,
	}
	if st.LastError != "" {
		out["lastError"] = st.LastError
	}
	return out, nil
}

// Limits on session metadata a plugin sets (it is not trusted); the
// gateway's store bounds what it keeps too.
const (
	maxMetaName  = 256
	maxMetaValue = 16 << 10
	maxMetaKeys  = 4096 // kept in memory, over all sessions without an entry yet
)

// setMetadata stores one key of a session's metadata in the gateway's
// store (the session-map entry, across restarts); before the session has
// an entry it is kept in this host's memory, as a stub, and moved to the
// store at the next set. A nil or null value removes the key.
func (p *Plugin) setMetadata(pc plugin.PluginContext, sessionKey, name string, value json.RawMessage) error {
	if err := checkNames("setSessionMetadata", sessionKey, name); err != nil {
		return err
	}
	if name == "\x00agent" || len(name) > maxMetaName {
		return fmt.Errorf("ctx.setSessionMetadata: bad arguments: a key of 1 to %d bytes", maxMetaName)
	}
	if len(value) > maxMetaValue {
		return fmt.Errorf("ctx.setSessionMetadata: the value of %q is over %d bytes", name, maxMetaValue)
	}
	if string(value) == "null" {
		value = nil
	}
	if ms, ok := pc.(plugin.MetadataStore); ok {
		// What waited in memory goes to the store first.
		p.metaMu.Lock()
		pending := maps.Clone(p.meta[sessionKey])
		p.metaMu.Unlock()
		stored, err := ms.SetSessionMetadata(sessionKey, name, value)
		if err != nil {
			return fmt.Errorf("ctx.setSessionMetadata: %w", err)
		}
		if stored {
			for k, v := range pending {
				if k == "\x00agent" || k == name {
					continue
				}
				b, _ := json.Marshal(v)
				if _, err := ms.SetSessionMetadata(sessionKey, k, b); err != nil {
					p.log.Warn("ctx.setSessionMetadata: a key kept in memory could not be stored", "session", sessionKey, "key", k, "err", err)
				}
			}
			p.metaMu.Lock()
			if m := p.meta[sessionKey]; m != nil {
				for k := range m {
					if k != "\x00agent" {
						delete(m, k)
					}
				}
			}
			p.metaMu.Unlock()
			return nil
		}
	}
	var v any
	if value != nil {
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("ctx.setSessionMetadata: bad value: %w", err)
		}
	}
	p.metaMu.Lock()
	defer p.metaMu.Unlock()
	if p.meta == nil {
		p.meta = map[string]map[string]any{}
	}
	n := 0
	for _, m := range p.meta {
		n += len(m)
	}
	if n >= maxMetaKeys {
		return fmt.Errorf("ctx.setSessionMetadata: more than %d keys on sessions without an entry", maxMetaKeys)
	}
	if p.meta[sessionKey] == nil {
		p.meta[sessionKey] = map[string]any{}
	}
	if value == nil {
		delete(p.meta[sessionKey], name)
	} else {
		p.meta[sessionKey][name] = v
	}
	return nil
}

// metadata is a session's metadata: what the gateway stored, overlaid by
// what this host keeps for it in memory.
func (p *Plugin) metadata(pc plugin.PluginContext, sessionKey string) map[string]any {
	out := map[string]any{}
	if ms, ok := pc.(plugin.MetadataStore); ok && sessionKey != "" {
		if stored, ok := ms.SessionMetadata(sessionKey); ok {
			for k, raw := range stored {
				var v any
				if json.Unmarshal(raw, &v) == nil {
					out[k] = v
				}
			}
		}
	}
	p.metaMu.Lock()
	defer p.metaMu.Unlock()
	for k, v := range p.meta[sessionKey] {
		if k != "\x00agent" {
			out[k] = v
		}
	}
	return out
}
