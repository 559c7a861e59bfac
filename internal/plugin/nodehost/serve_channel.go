package nodehost

import (
	"context"
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
