package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/config"
)

func TestString(t *testing.T) {
	r := New([]Secret{
		{"llm.providers.anthropic.apiKey", "sk-ant-0123456789"},
		{"llm.providers.long.apiKey", "sk-ant-0123456789-longer"},
		{"gateway.authToken", "short"},               // < MinLen: ignored
		{"plugins.x.config.password", "p\"w/<d>\\x"}, // needs JSON escaping
		{"odd name\"}", "odd-secret-value"},
	})
	tests := []struct{ in, want string }{
		{"", ""},
		{"nothing here", "nothing here"},
		{"key=sk-ant-0123456789\n", "key=[redacted:llm.providers.anthropic.apiKey]\n"},
		{"sk-ant-0123456789sk-ant-0123456789", "[redacted:llm.providers.anthropic.apiKey][redacted:llm.providers.anthropic.apiKey]"},
		{"k sk-ant-0123456789-longer.", "k [redacted:llm.providers.long.apiKey]."},
		{"short is short", "short is short"},
		{`pw p"w/<d>\x`, "pw [redacted:plugins.x.config.password]"},
		{`{"pw":"p\"w/\u003cd\u003e\\x"}`, `{"pw":"[redacted:plugins.x.config.password]"}`},
		{"odd-secret-value", "[redacted:odd_name__]"},
		{"sk-ant-012345678", "sk-ant-012345678"}, // a prefix is no match
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, want := r.Names(), []string{"llm.providers.anthropic.apiKey", "llm.providers.long.apiKey", "odd name\"}", "plugins.x.config.password"}; !equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

func TestNilRedactor(t *testing.T) {
	var r *Redactor
	if New(nil) != nil || New([]Secret{{"a", "1234567"}, {"b", ""}}) != nil {
		t.Error("New without a secret of MinLen bytes is not nil")
	}
	if r.String("x") != "x" || string(r.JSON(json.RawMessage(`1`))) != "1" || r.Names() != nil {
		t.Error("nil Redactor changed something")
	}
	h := slog.NewTextHandler(os.Stderr, nil)
	if r.Handler(h) != slog.Handler(h) {
		t.Error("nil Redactor wrapped the handler")
	}
}

func TestJSON(t *testing.T) {
	r := New([]Secret{{"s", "0123456789"}, {"q", `abcd","xyz`}})
	if got := string(r.JSON(json.RawMessage(`{"command":"echo 0123456789"}`))); got != `{"command":"echo [redacted:s]"}` {
		t.Errorf("got %s", got)
	}
	// A value that spans JSON syntax cannot be cut out in place: the whole
	// value goes.
	if got := string(r.JSON(json.RawMessage(`{"a":"abcd","xyz":"cd"}`))); got != `"[redacted]"` {
		t.Errorf("got %s", got)
	}
}

func TestHandler(t *testing.T) {
	const key = "sk-live-abcdefgh1234"
	r := New([]Secret{{"llm.providers.openai.apiKey", key}})
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil))).With("pre", "with "+key)
	log.WithGroup("g").Error("provider said "+key, "err", errors.New("401 for key "+key),
		"s", key, slog.Group("sub", "v", key), "n", 3)
	out := buf.String()
	if strings.Contains(out, key) || strings.Count(out, "[redacted:llm.providers.openai.apiKey]") != 5 {
		t.Errorf("log line: %s", out)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Errorf("not JSON: %v", err)
	}
}

func TestFromConfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BEIGE_TEST_REDACT_TG", "tg-bot-token-from-env")
	t.Setenv("BEIGE_TEST_REDACT_CHAT", "chat-id-from-the-env")
	cfgText := `{
	  llm: { providers: { anthropic: { apiKey: 'sk-ant-providerkey' }, openai: { apiKey: 'x' } } },
	  gateway: { authToken: 'gateway-auth-token' },
	  plugins: { telegram: { config: { botToken: '${BEIGE_TEST_REDACT_TG}', chatName: 'not-a-secret-value', chatId: '${BEIGE_TEST_REDACT_CHAT}',
	    nested: { apiKeys: ['list-secret-1', 'list-secret-2'] } } } },
	  agents: { a: { model: { provider: 'anthropic', model: 'm' }, sandbox: { image: 'i', egress: { credentials: [{ host: 'api.github.com', header: 'Authorization', value: 'Bearer ghp-injected-token' }] } },
	    pluginConfigs: { telegram: { clientSecret: 'agent-client-secret' } } } },
	}`
	p := filepath.Join(dir, "config.json5")
	if err := os.WriteFile(p, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := FromConfig(cfg)
	want := []string{
		"agents.a.pluginConfigs.telegram.clientSecret",
		"agents.a.sandbox.egress.credentials.0.value", // the header value
		"agents.a.sandbox.egress.credentials.0.value", // and its token alone
		"gateway.authToken",
		"llm.providers.anthropic.apiKey",
		"plugins.telegram.config.botToken",
		"plugins.telegram.config.chatId",
		"plugins.telegram.config.nested.apiKeys.0",
		"plugins.telegram.config.nested.apiKeys.1",
	}
	if got := r.Names(); !equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	if got := r.String("tg-bot-token-from-env not-a-secret-value chat-id-from-the-env"); got != "[redacted:plugins.telegram.config.botToken] not-a-secret-value [redacted:plugins.telegram.config.chatId]" {
		t.Errorf("got %q", got)
	}
	// An injected credential, whole or its token alone.
	if got := r.String("Bearer ghp-injected-token / ghp-injected-token"); got != "[redacted:agents.a.sandbox.egress.credentials.0.value] / [redacted:agents.a.sandbox.egress.credentials.0.value]" {
		t.Errorf("injected credential: got %q", got)
	}
}

func FuzzString(f *testing.F) {
	f.Add("sk-ant-0123456789 and more", `{"a":"sk-ant-0123456789"}`)
	f.Fuzz(func(t *testing.T, secret, text string) {
		r := New([]Secret{{"n", secret}})
		out := r.String(text)
		if len(secret) >= MinLen && strings.Contains(out, secret) && !strings.Contains("[redacted:n]", secret) {
			// The replacement can join with neighbouring text into the
			// secret only if the secret overlaps the marker.
			if !strings.Contains(secret, "[redacted:n]") && !strings.ContainsAny(secret, "[]") {
				t.Errorf("secret %q left in %q", secret, out)
			}
		}
		if len(secret) < MinLen && out != text {
			t.Errorf("short secret changed the text")
		}
		if json.Valid([]byte(text)) && !json.Valid(r.JSON(json.RawMessage(text))) {
			t.Errorf("JSON %q became invalid", text)
		}
	})
}

// The cost on a 50 KB tool output (the model's cut), with no secret, with
// the few of a typical config, and with a match.
func BenchmarkString50KB(b *testing.B) {
	text := strings.Repeat("drwxr-xr-x 2 agent agent 4096 Dec  1 18:00 some-file-name.txt\n", 50<<10/62)
	secrets := []Secret{
		{"llm.providers.anthropic.apiKey", "sk-ant-api03-" + strings.Repeat("A", 90)},
		{"llm.providers.openai.apiKey", "sk-proj-" + strings.Repeat("b", 40)},
		{"gateway.authToken", strings.Repeat("c", 32)},
		{"plugins.telegram.config.botToken", "123456789:" + strings.Repeat("D", 35)},
	}
	for _, bc := range []struct {
		name string
		r    *Redactor
		text string
	}{
		{"none", New(nil), text},
		{"one", New(secrets[:1]), text},
		{"four", New(secrets), text},
		{"four-hit", New(secrets), text + secrets[0].Value},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.r.String(bc.text)
			}
		})
	}
}
