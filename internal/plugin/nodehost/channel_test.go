package nodehost

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/plugin"
)

// chanPlugin registers a channel in the original's format: its adapter
// records what it was asked to send, and its tool reports the last one.
const chanPlugin = `
export function createPlugin(config, ctx) {
  let last = "none";
  const adapter = {
    supportsMessaging() { return true; },
    async sendMessage(chatId, threadId, text, options) {
      if (text === "fail") throw new Error("send refused");
      last = chatId + "/" + (threadId ?? "-") + ": " + text + (options === undefined ? "" : " " + JSON.stringify(options));
    },
  };
  return {
    register(r) {
      r.tool({ name: "chanplug", description: "", handler: async (args) => {
        if (args[0] === "exit") process.exit(3);
        return { output: last, exitCode: 0 };
      }});
      r.channel(adapter);
    },
  };
}
`

// TestChannelSendMessage: a TypeScript plugin's channel is registered
// under the plugin's name, and the gateway's SendMessage reaches the
// adapter's sendMessage; a crashed host makes sends fail clearly until it
// is restarted.
func TestChannelSendMessage(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	f := mustFixture(t, map[string][]string{"travel": {"chanplug"}}, tsPlugin{name: "chanplug", source: chanPlugin})
	ch, ok := f.host.Channels()["chanplug"]
	if !ok {
		t.Fatalf("the plugin's channel is not registered: %v\n%s", f.host.Channels(), f.log)
	}
	if ch.Name() != "chanplug" || !ch.SupportsMessaging() {
		t.Errorf("name %q, supportsMessaging %v", ch.Name(), ch.SupportsMessaging())
	}
	ctx := context.Background()
	if err := ch.SendMessage(ctx, "42", "7", "hello", plugin.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != "42/7: hello" {
		t.Errorf("the adapter got %+v", resp)
	}
	if err := ch.SendMessage(ctx, "42", "", "again", plugin.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != "42/-: again" {
		t.Errorf("without a thread the adapter got %+v", resp)
	}
	if err := ch.SendMessage(ctx, "42", "", "fail", plugin.SendOptions{}); err == nil || !strings.Contains(err.Error(), "plugin chanplug: channel sendMessage failed: send refused") {
		t.Errorf("a failing sendMessage: %v", err)
	}

	// SendMessageOptions reach the adapter as the original passes them.
	if err := ch.SendMessage(ctx, "42", "", "<b>hi</b>", plugin.SendOptions{ParseMode: plugin.ParseModeHTML}); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != `42/-: <b>hi</b> {"parseMode":"html"}` {
		t.Errorf("with parseMode html the adapter got %+v", resp)
	}
	if err := ch.SendMessage(ctx, "42", "", "x", plugin.SendOptions{ParseMode: "bold"}); err == nil || !strings.Contains(err.Error(), `invalid parseMode "bold"`) {
		t.Errorf("an invalid parse mode: %v", err)
	}

	backoffMin = time.Second
	f.call("travel", "chanplug", "exit")
	if err := ch.SendMessage(ctx, "42", "", "down", plugin.SendOptions{}); err == nil || !strings.Contains(err.Error(), "channel chanplug: send message: plugin chanplug is restarting") {
		t.Errorf("while the host is down: %v", err)
	}
	f.log.waitLog(t, "plugin host restarted")
	if err := ch.SendMessage(ctx, "42", "", "back", plugin.SendOptions{}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != "42/-: back" {
		t.Errorf("after the restart the adapter got %+v", resp)
	}
}

const senderPlugin = `
export function createPlugin(config, ctx) {
  return {
    register(r) {
      r.tool({ name: "sender", description: "", handler: async (args) => {
        const ch = ctx.getChannel(args[0]);
        if (!ch) return { output: "no channel", exitCode: 0 };
        const opts = args[3] === undefined ? undefined : args[3] === "number" ? { parseMode: 5 } : { parseMode: args[3], extra: true };
        try {
          await ch.sendMessage(args[1], undefined, args[2], opts);
        } catch (e) {
          return { output: "error: " + e.message, exitCode: 1 };
        }
        return { output: "sent, messaging " + ch.supportsMessaging(), exitCode: 0 };
      }});
    },
  };
}
`

// goChannel is a channel of the gateway's own (the built-in telegram's
// place), recording what it sends.
type goChannel struct {
	mu   sync.Mutex
	sent []string
}

func (c *goChannel) Name() string                                      { return "telegram" }
func (c *goChannel) Start(context.Context, plugin.PluginContext) error { return nil }
func (c *goChannel) SupportsMessaging() bool                           { return true }
func (c *goChannel) SendMessage(_ context.Context, chat, thread, text string, opts plugin.SendOptions) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if opts.ParseMode != "" {
		text += " (" + opts.ParseMode + ")"
	}
	c.sent = append(c.sent, chat+"/"+thread+": "+text)
	return nil
}

type channelsContext struct {
	fakeContext
	chans map[string]plugin.Channel
}

func (c *channelsContext) Channel(name string) (plugin.Channel, bool) {
	ch, ok := c.chans[name]
	return ch, ok
}

// TestGetChannel: ctx.getChannel(name) reaches another TypeScript plugin's
// channel and a channel of the gateway's own; an unknown name is
// undefined; the send is logged without its text.
func TestGetChannel(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"chanplug", "sender"}},
		tsPlugin{name: "chanplug", source: chanPlugin}, tsPlugin{name: "sender", source: senderPlugin})
	tg := &goChannel{}
	chans := f.host.Channels()
	chans["telegram"] = tg
	if err := f.host.Start(context.Background(), &channelsContext{chans: chans}); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "sender", "chanplug", "99", "secret words"); resp.Output != "sent, messaging true" {
		t.Fatalf("%+v\n%s", resp, f.log)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != "99/-: secret words" {
		t.Errorf("the channel plugin got %+v", resp)
	}
	if resp := f.call("travel", "sender", "telegram", "5", "hi"); resp.Output != "sent, messaging true" {
		t.Fatalf("%+v\n%s", resp, f.log)
	}
	tg.mu.Lock()
	if !slices.Equal(tg.sent, []string{"5/: hi"}) {
		t.Errorf("telegram sent %q", tg.sent)
	}
	tg.mu.Unlock()
	if resp := f.call("travel", "sender", "nosuch", "5", "hi"); resp.Output != "no channel" {
		t.Errorf("an unknown channel: %+v", resp)
	}
	f.log.waitLog(t, `msg="plugin sends a message through a channel" plugin=sender channel=chanplug chat=99`)
	if strings.Contains(f.log.String(), "secret words") {
		t.Errorf("the message text is logged:\n%s", f.log)
	}
}

// channelPromptContext answers a prompt with the channel it was given.
type channelPromptContext struct{ fakeContext }

func (c *channelPromptContext) Prompt(_ context.Context, r plugin.PromptRequest) (*plugin.PromptResult, error) {
	return &plugin.PromptResult{Text: "channel=" + r.Channel}, nil
}

// TestChannelPromptCarriesChannel: a session a TypeScript channel creates
// with ctx.prompt records the channel's name (whatever its key or
// opts.channel say); a plugin without a channel names none.
func TestChannelPromptCarriesChannel(t *testing.T) {
	const prompter = `
export function createPlugin(config, ctx) {
  return { register(r) {
    r.tool({ name: "%s", description: "", handler: async () => ({ output: await ctx.prompt("other:1", "helper", "hi", { channel: "tui" }), exitCode: 0 }) });
    %s
  } };
}`
	f := mustFixture(t, map[string][]string{"travel": {"withchan", "nochan"}},
		tsPlugin{name: "withchan", source: fmt.Sprintf(prompter, "withchan", `r.channel({ sendMessage: async () => {} });`)},
		tsPlugin{name: "nochan", source: fmt.Sprintf(prompter, "nochan", "")})
	if err := f.host.Start(context.Background(), &channelPromptContext{}); err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]string{"withchan": "channel=withchan", "nochan": "channel="} {
		if resp := f.call("travel", tool); !resp.Success || resp.Output != want {
			t.Errorf("%s: got %+v, want %q\n%s", tool, resp, want, f.log)
		}
	}
}

// TestGetChannelParseMode: the SendMessageOptions a plugin gives
// ctx.getChannel(name).sendMessage reach the channel, a TypeScript
// plugin's adapter and a channel of the gateway's own alike (other fields
// of the options are not passed on); an invalid parseMode is refused with
// a clear error and nothing is sent.
func TestGetChannelParseMode(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"chanplug", "sender"}},
		tsPlugin{name: "chanplug", source: chanPlugin}, tsPlugin{name: "sender", source: senderPlugin})
	tg := &goChannel{}
	chans := f.host.Channels()
	chans["telegram"] = tg
	if err := f.host.Start(context.Background(), &channelsContext{chans: chans}); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "sender", "chanplug", "99", "*hi*", "markdown"); resp.Output != "sent, messaging true" {
		t.Fatalf("%+v\n%s", resp, f.log)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != `99/-: *hi* {"parseMode":"markdown"}` {
		t.Errorf("the channel plugin got %+v", resp)
	}
	if resp := f.call("travel", "sender", "telegram", "5", "<b>hi</b>", "html"); resp.Output != "sent, messaging true" {
		t.Fatalf("%+v\n%s", resp, f.log)
	}
	for _, bad := range []struct{ mode, want string }{
		{"bold", `invalid parseMode "bold"`},
		{"HTML", `invalid parseMode "HTML"`},
		{"number", "invalid parseMode"},
	} {
		resp := f.call("travel", "sender", "telegram", "5", "never", bad.mode)
		if !strings.Contains(resp.Output, "error: channel telegram: "+bad.want) {
			t.Errorf("parseMode %s: %+v", bad.mode, resp)
		}
	}
	tg.mu.Lock()
	if !slices.Equal(tg.sent, []string{"5/: <b>hi</b> (html)"}) {
		t.Errorf("telegram sent %q", tg.sent)
	}
	tg.mu.Unlock()
}
