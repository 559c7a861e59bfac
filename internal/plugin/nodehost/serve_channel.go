package nodehost

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/beige-dev/beige/internal/plugin"
)

// channel is the channel a TypeScript plugin registers (reg.channel), as
// the gateway sees it: named like the plugin, as in the original. Its
// receiving side runs in the plugin's own start() (it prompts through
// ctx.prompt); SendMessage asks the host to call the adapter's
// sendMessage.
type channel struct {
	p         *Plugin
	messaging bool
}

var _ plugin.Channel = (*channel)(nil)

func (c *channel) Name() string { return c.p.env.Name }

// channelName is the name of the channel the plugin registered ("" for
// none): the channel its ctx.prompt sessions record (opts.channel is not
// trusted to name another).
func (p *Plugin) channelName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.decl != nil && p.decl.Channel {
		return p.env.Name
	}
	return ""
}

// Start does nothing: the plugin's start() (called by the Host before the
// channels start) runs the channel's receiving side.
func (c *channel) Start(context.Context, plugin.PluginContext) error { return nil }

func (c *channel) SupportsMessaging() bool { return c.messaging }

// SendMessage calls the adapter's sendMessage in the plugin host. While the
// host is down (crashed, restarting) it fails with the reason; it works
// again once the host is back.
func (c *channel) SendMessage(ctx context.Context, chatID, threadID, text string) error {
	pr, err := c.p.current()
	if err != nil {
		return fmt.Errorf("channel %s: send message: %w", c.Name(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, hookTimeout)
	defer cancel()
	_, err = pr.call(ctx, "channel.send", map[string]any{
		"chatId": chatID, "threadId": threadID, "text": text,
	})
	if err != nil {
		return c.p.callError(ctx, pr, "channel sendMessage", err)
	}
	return nil
}

// serveChannel answers ctx.getChannel (a synchronous call: the channel's
// name and whether it supports messaging, or null) and the sends of the
// adapter it returns. Sending through another plugin's channel is allowed,
// as in the original, and logged (never the text).
func (p *Plugin) serveChannel(ctx context.Context, op string, raw json.RawMessage, pc plugin.PluginContext) (any, error) {
	var a struct {
		Name     string `json:"name"`
		ChatID   string `json:"chatId"`
		ThreadID string `json:"threadId"`
		Text     string `json:"text"`
		Options  any    `json:"options"`
	}
	if err := decodeNamed(op, raw, &a, nil); err != nil {
		return nil, err
	}
	cl, _ := pc.(plugin.ChannelLookup)
	if op == "getChannel" {
		// Before the gateway serves there are no channels to reach.
		if cl == nil {
			return nil, nil
		}
		ch, ok := cl.Channel(a.Name)
		if !ok {
			return nil, nil
		}
		return map[string]any{"name": ch.Name(), "messaging": ch.SupportsMessaging()}, nil
	}
	if cl == nil {
		return nil, fmt.Errorf("channel %s: the gateway is not serving yet", a.Name)
	}
	ch, ok := cl.Channel(a.Name)
	if !ok {
		return nil, fmt.Errorf("no channel %q", a.Name)
	}
	if !ch.SupportsMessaging() {
		return nil, fmt.Errorf("channel %s does not support messaging", a.Name)
	}
	p.log.Info("plugin sends a message through a channel", "channel", a.Name, "chat", a.ChatID, "thread", a.ThreadID)
	if err := ch.SendMessage(ctx, a.ChatID, a.ThreadID, a.Text); err != nil {
		return nil, fmt.Errorf("channel %s: %w", a.Name, err)
	}
	return struct{}{}, nil
}
