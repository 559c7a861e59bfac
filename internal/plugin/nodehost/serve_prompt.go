package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/beige-dev/beige/internal/plugin"
)

// replyToKey is the session metadata key of a session's reply target, as
// the original keeps it in the session map entry.
const replyToKey = "_replyTo"

// promptExtras are the PromptOpts of ctx.prompt and promptStreaming beyond
// channel and the streaming and tool callbacks: a model for this prompt
// only, the session's reply target, and whether the plugin listens for
// automatic compaction (onAutoCompactionStart/End).
type promptExtras struct {
	ModelOverride *struct {
		Provider string `json:"provider"`
		Model    string `json:"model"`
	} `json:"modelOverride"`
	ReplyTo    json.RawMessage `json:"replyTo"`
	Compaction bool            `json:"compaction"`
}

// apply puts the extras on req; the compaction callbacks become events of
// the call (notify).
func (e *promptExtras) apply(req *plugin.PromptRequest, notify func(map[string]any)) error {
	if m := e.ModelOverride; m != nil {
		if err := checkNames("prompt", m.Provider, m.Model); err != nil {
			return err
		}
		req.ModelOverride = m.Provider + "/" + m.Model
	}
	rt, err := replyTarget(e.ReplyTo)
	if err != nil {
		return fmt.Errorf("ctx.prompt: %w", err)
	}
	req.ReplyTo = rt
	if e.Compaction && notify != nil {
		req.OnCompactionStart = func() { notify(map[string]any{"kind": "compactionStart"}) }
		req.OnCompactionEnd = func(c plugin.CompactionEnd) {
			ev := map[string]any{"kind": "compactionEnd", "success": c.Success, "willRetry": c.WillRetry}
			if c.Success {
				ev["tokensBefore"] = c.TokensBefore
			}
			if c.ErrorMessage != "" {
				ev["errorMessage"] = c.ErrorMessage
			}
			notify(ev)
		}
	}
	return nil
}

// replyTarget checks a reply target (the original's ReplyTarget,
// {channel, address}): a JSON object within the metadata bound; null or
// absent is none.
func replyTarget(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) > maxMetaValue {
		return nil, fmt.Errorf("replyTo is over %d bytes", maxMetaValue)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, errors.New("replyTo is not an object ({channel, address})")
	}
	return raw, nil
}

// setReplyTo stores updateSessionSettings' replyTo in the session's
// metadata, as the original does.
// metaSettings are the session settings the original keeps in the
// session map entry's metadata rather than with verbose and streaming,
// by their metadata keys.
var metaSettings = map[string]string{
	"model":    "_model",
	"replyTo":  replyToKey,
	"channel":  "_channel",
	"metadata": "_pluginMeta",
}

// setMetaSetting is updateSessionSettings of one of metaSettings, checked
// as the original's SessionSettings types it. A missing (falsy) value
// changes nothing, as in the original; metadata is merged into what the
// session has.
func (p *Plugin) setMetaSetting(pc plugin.PluginContext, sessionKey, name string, v any) error {
	if v == nil || v == false || v == "" {
		return nil
	}
	switch name {
	case "replyTo":
		return p.setReplyTo(pc, sessionKey, v)
	case "channel":
		if _, ok := v.(string); !ok {
			return errors.New("channel is not a string")
		}
	case "model":
		m, ok := v.(map[string]any)
		if !ok {
			return errors.New("model is not an object {provider, model, thinkingLevel?}")
		}
		for k, f := range m {
			if _, ok := f.(string); !ok || (k != "provider" && k != "model" && k != "thinkingLevel") {
				return fmt.Errorf("model.%s: want provider, model and thinkingLevel, as strings", k)
			}
		}
		if m["provider"] == nil || m["model"] == nil {
			return errors.New("model needs provider and model")
		}
	case "metadata":
		m, ok := v.(map[string]any)
		if !ok {
			return errors.New("metadata is not an object")
		}
		merged := map[string]any{}
		if old, ok := p.metadata(pc, sessionKey)["_pluginMeta"].(map[string]any); ok {
			maps.Copy(merged, old)
		}
		maps.Copy(merged, m)
		v = merged
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return p.setMetadata(pc, sessionKey, metaSettings[name], raw)
}

func (p *Plugin) setReplyTo(pc plugin.PluginContext, sessionKey string, v any) error {
	if v == nil {
		return nil // the original ignores a missing replyTo
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("replyTo: %w", err)
	}
	if raw, err = replyTarget(raw); err != nil {
		return err
	}
	return p.setMetadata(pc, sessionKey, replyToKey, raw)
}

// serveSteer is ctx.steerSession(sessionKey, text): queued for the
// session's running prompt through the gateway's plugin.Steerer; a no-op
// for a session that does not exist, as in the original.
func (p *Plugin) serveSteer(ctx context.Context, pc plugin.PluginContext, raw json.RawMessage, need func() error) (any, error) {
	var a struct {
		SessionKey string `json:"sessionKey"`
		Text       string `json:"text"`
	}
	if err := decodeNamed("steerSession", raw, &a, need); err != nil {
		return nil, err
	}
	if err := checkNames("steerSession", a.SessionKey); err != nil {
		return nil, err
	}
	st, ok := pc.(plugin.Steerer)
	if !ok {
		return nil, errors.New("ctx.steerSession: this gateway cannot steer sessions")
	}
	queued, err := st.Steer(ctx, "", a.SessionKey, a.Text, false)
	if err != nil {
		return nil, fmt.Errorf("ctx.steerSession: %w", err)
	}
	p.log.Debug("ctx.steerSession", "session", a.SessionKey, "queued", queued)
	return nil, nil
}
