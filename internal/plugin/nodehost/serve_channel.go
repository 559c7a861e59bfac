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

// SendMessage calls the adapter's sendMessage in the plugin host, with
// SendMessageOptions {parseMode} when opts has a parse mode. While the
// host is down (crashed, restarting) it fails with the reason; it works
// again once the host is back.
func (c *channel) SendMessage(ctx context.Context, chatID, threadID, text string, opts plugin.SendOptions) error {
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("channel %s: send message: %w", c.Name(), err)
	}
	pr, err := c.p.current()
	if err != nil {
		return fmt.Errorf("channel %s: send message: %w", c.Name(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, hookTimeout)
	defer cancel()
	args := map[string]any{"chatId": chatID, "threadId": threadID, "text": text}
	if opts.ParseMode != "" {
		// The adapter's sendMessage gets SendMessageOptions only when
		// there is one to give, as the original's callers pass them.
		args["options"] = map[string]string{"parseMode": opts.ParseMode}
	}
	_, err = pr.call(ctx, "channel.send", args)
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
		Options  *struct {
			ParseMode any `json:"parseMode"`
		} `json:"options"`
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
	var opts plugin.SendOptions
	if a.Options != nil && a.Options.ParseMode != nil {
		mode, ok := a.Options.ParseMode.(string)
		if !ok {
			return nil, fmt.Errorf("channel %s: invalid parseMode: want \"markdown\", \"html\" or none", a.Name)
		}
		opts.ParseMode = mode
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("channel %s: %w", a.Name, err)
	}
	p.log.Info("plugin sends a message through a channel", "channel", a.Name, "chat", a.ChatID, "thread", a.ThreadID, "parseMode", opts.ParseMode)
	if err := ch.SendMessage(ctx, a.ChatID, a.ThreadID, a.Text, opts); err != nil {
		return nil, fmt.Errorf("channel %s: %w", a.Name, err)
	}
	return struct{}{}, nil
}
