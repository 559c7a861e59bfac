package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/beige-dev/beige/internal/channel/telegram/bottest"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestTypeScriptGetChannelTelegram: ctx.getChannel("telegram") of a
// TypeScript plugin reaches the gateway's built-in telegram channel: the
// message the plugin sends from its start() arrives at the chat, and the
// adapter says the channel supports messaging; SendMessageOptions'
// parseMode reaches Telegram as its parse_mode.
func TestTypeScriptGetChannelTelegram(t *testing.T) {
	const user = 111
	node := tsNode(t)
	relay := filepath.Join(t.TempDir(), "relay")
	os.MkdirAll(relay, 0o755)
	os.WriteFile(filepath.Join(relay, "plugin.json"), []byte(`{"name":"relay","description":"Sends a note through telegram."}`), 0o644)
	os.WriteFile(filepath.Join(relay, "index.ts"), []byte(fmt.Sprintf(`
export function createPlugin(config: Record<string, unknown>, ctx: any) {
  return {
    register(r: any): void {},
    async start(): Promise<void> {
      for (let i = 0; i < 100; i++) {
        const ch = ctx.getChannel("telegram");
        if (ch) {
          try {
            await ch.sendMessage("%d", undefined, "note from relay, messaging=" + ch.supportsMessaging());
            await ch.sendMessage("%d", undefined, "<b>bold</b> note", { parseMode: "html" });
            return;
          } catch (e) { console.error("send failed:", e); }
        }
        await new Promise((res) => setTimeout(res, 100));
      }
      console.error("telegram never answered");
    },
  };
}
`, user, user)), 0o644)
	bot := bottest.New(t)
	srv := llmtest.NewAnthropic(t)
	startGatewayWith(t, gatewaySetup{
		names:     []string{"tg"},
		providers: fmt.Sprintf(`p: { api: "anthropic-messages", baseUrl: %q, apiKey: "k" }`, srv.URL()),
		model:     "{ provider: 'p', model: 'm' }",
		plugins: fmt.Sprintf(`telegram: { config: { token: %q, allowedUsers: [%d], apiUrl: %q,
			agentMapping: { default: "AGENT" }, defaults: { verbose: false, streaming: false } } },
			relay: { path: %q, node: %q }`, bottest.Token, user, bot.URL(), relay, node),
		rename: map[string]string{"AGENT": "tg"},
	})
	// Without a parse mode the text is sent as it is (as the toolkit's
	// telegram channel sends it); with parseMode "html" as Telegram HTML.
	calls := bot.WaitFor("the relay's messages at the chat", func([]bottest.Call) bool {
		return slices.Contains(bottest.SentTexts(bot.Snapshot(), user), "<b>bold</b> note")
	})
	var got []string
	for _, c := range calls {
		if c.Method == "sendMessage" {
			got = append(got, c.Params["parse_mode"]+":"+c.Params["text"])
		}
	}
	if want := []string{":note from relay, messaging=true", "HTML:<b>bold</b> note"}; !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}
}
