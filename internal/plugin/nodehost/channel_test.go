package nodehost

import (
	"context"
	"strings"
	"testing"
	"time"
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
      last = chatId + "/" + (threadId ?? "-") + ": " + text;
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
	if err := ch.SendMessage(ctx, "42", "7", "hello"); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != "42/7: hello" {
		t.Errorf("the adapter got %+v", resp)
	}
	if err := ch.SendMessage(ctx, "42", "", "again"); err != nil {
		t.Fatal(err)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != "42/-: again" {
		t.Errorf("without a thread the adapter got %+v", resp)
	}
	if err := ch.SendMessage(ctx, "42", "", "fail"); err == nil || !strings.Contains(err.Error(), "plugin chanplug: channel sendMessage failed: send refused") {
		t.Errorf("a failing sendMessage: %v", err)
	}

	backoffMin = time.Second
	f.call("travel", "chanplug", "exit")
	if err := ch.SendMessage(ctx, "42", "", "down"); err == nil || !strings.Contains(err.Error(), "channel chanplug: send message: plugin chanplug is restarting") {
		t.Errorf("while the host is down: %v", err)
	}
	f.log.waitLog(t, "plugin host restarted")
	if err := ch.SendMessage(ctx, "42", "", "back"); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if resp := f.call("travel", "chanplug"); resp.Output != "42/-: back" {
		t.Errorf("after the restart the adapter got %+v", resp)
	}
}
