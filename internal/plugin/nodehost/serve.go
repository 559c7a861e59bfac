package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/beige-dev/beige/internal/plugin"
)

// serve answers one ctx call of the plugin: the PluginContext methods the
// original gives plugins, mapped onto the gateway's plugin.PluginContext.
// Its arguments come from the plugin and are decoded strictly.
func (p *Plugin) serve(ctx context.Context, op string, raw json.RawMessage) (any, error) {
	p.mu.Lock()
	pc := p.pc
	p.mu.Unlock()
	need := func() error {
		if pc == nil {
			return fmt.Errorf("ctx.%s: the gateway is not serving yet (call it from start() or a tool, not from createPlugin or register)", op)
		}
		return nil
	}
	switch op {
	case "prompt":
		var a struct {
			SessionKey string `json:"sessionKey"`
			AgentName  string `json:"agentName"`
			Message    string `json:"message"`
			Channel    string `json:"channel"`
		}
		if err := decodeArgs(raw, &a); err != nil {
			return nil, err
		}
		if err := need(); err != nil {
			return nil, err
		}
		if !slices.Contains(pc.Agents(), a.AgentName) {
			return nil, fmt.Errorf("ctx.prompt: unknown agent %q", a.AgentName)
		}
		res, err := pc.Prompt(ctx, plugin.PromptRequest{Agent: a.AgentName, SessionKey: a.SessionKey, Message: a.Message})
		if err != nil {
			return nil, fmt.Errorf("ctx.prompt: %w", err)
		}
		return res.Text, nil
	case "newSession":
		var a struct {
			SessionKey string `json:"sessionKey"`
			AgentName  string `json:"agentName"`
		}
		if err := decodeArgs(raw, &a); err != nil {
			return nil, err
		}
		if err := need(); err != nil {
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
		if err := decodeArgs(raw, &a); err != nil {
			return nil, err
		}
		if err := need(); err != nil {
			return nil, err
		}
		return pc.Settings(a.SessionKey, nil), nil
	case "updateSessionSettings":
		var a struct {
			SessionKey string         `json:"sessionKey"`
			Update     map[string]any `json:"update"`
		}
		if err := decodeArgs(raw, &a); err != nil {
			return nil, err
		}
		if err := need(); err != nil {
			return nil, err
		}
		for k, v := range a.Update {
			if err := pc.SetSetting(a.SessionKey, k, v); err != nil {
				return nil, fmt.Errorf("ctx.updateSessionSettings: %w", err)
			}
		}
		return nil, nil
	case "clearSessionSettings":
		var a struct {
			SessionKey string `json:"sessionKey"`
		}
		if err := decodeArgs(raw, &a); err != nil {
			return nil, err
		}
		if err := need(); err != nil {
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
		if err := decodeArgs(raw, &a); err != nil {
			return nil, err
		}
		if err := need(); err != nil {
			return nil, err
		}
		for _, ag := range pc.Agents() {
			if st, err := pc.Status(ctx, ag, a.SessionKey); err == nil && st.Running {
				return true, nil
			}
		}
		return false, nil
	}
	return nil, fmt.Errorf("ctx.%s is not supported by beige yet", op)
}

func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := strictDecode(raw, v); err != nil {
		return errors.New("bad arguments: " + err.Error())
	}
	return nil
}
