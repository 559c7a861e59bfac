package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// originalDevConfig is a config in the style of the original Beige's
// examples/config.dev.json5: a $schema key, zai and anthropic without api or
// baseUrl, plugins installed by `plugins install` (with _source), and
// plugins that are not installed here.
const originalDevConfig = `{
  // Development config, as the original Beige writes them.
  $schema: "https://raw.githubusercontent.com/matthias-hausberger/beige/main/config.schema.json",
  llm: {
    providers: {
      zai: { apiKey: "${ZAI_API_KEY}" },
      anthropic: {
        // credentials elsewhere
      },
    },
  },
  plugins: {
    git: {
      path: "./plugins/git",
      config: { "identity.name": "Agent Beige" },
      _source: "github:example/toolkit/plugins/git",
    },
    telegram: {
      path: "./plugins/telegram",
      _source: "npm:@example/beige-telegram@1.2.0",
      config: { token: "t", allowedUsers: ["1"], agentMapping: { default: "beige" } },
    },
    chrome: { path: "./vendor/toolkit/plugins/chrome", config: { headless: false } },
    "markdown-pdf": { path: "./vendor/toolkit/plugins/markdown-pdf" },
  },
  agents: {
    beige: {
      model: { provider: "zai", model: "glm-4.7", thinkingLevel: "off" },
      fallbackModels: [{ provider: "anthropic", model: "claude-sonnet-4-6", thinkingLevel: "off" }],
      tools: ["chrome", "git", "telegram", "markdown-pdf"],
      sandbox: { image: "beige-sandbox:latest" },
    },
  },
}
`

// originalTelegramManifest is the original's channel plugin manifest: the
// channel is declared with a bool.
const originalTelegramManifest = `{
  "name": "telegram",
  "description": "Telegram channel",
  "provides": { "channel": true, "tools": ["telegram"] },
  "defaultConfig": { "defaults": { "verbose": false } }
}`

func TestOriginalDevConfig(t *testing.T) {
	f := newFixture(t)
	f.env["ZAI_API_KEY"] = "zk"
	f.write("plugins/telegram/plugin.json", originalTelegramManifest)
	p := f.write("config.json5", originalDevConfig)
	builtins := map[string]*Manifest{"git": {Name: "git"}, "telegram": {Name: "telegram"}}
	_, err := Load(p, &LoadOptions{LookupEnv: f.lookup, Builtins: builtins})
	// Only the two plugins that are not installed fail, each by name.
	wantErrors(t, err,
		`plugins.chrome.path: plugin "chrome" is not installed`,
		`plugins.markdown-pdf.path: plugin "markdown-pdf" is not installed`)

	// Installed, the whole config loads.
	f.write("./vendor/toolkit/plugins/chrome/plugin.json", `{"name": "git", "provides": {"tools": ["chrome"]}}`)
	f.write("./vendor/toolkit/plugins/markdown-pdf/plugin.json", `{"name": "git"}`)
	cfg, err := Load(p, &LoadOptions{LookupEnv: f.lookup, Builtins: builtins})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if z := cfg.LLM.Providers["zai"]; z.API != "openai-completions" || z.BaseURL != "https://api.z.ai/api/coding/paas/v4" {
		t.Errorf("zai = api %q baseUrl %q, want pi's openai-completions at https://api.z.ai/api/coding/paas/v4", z.API, z.BaseURL)
	}
	if a := cfg.LLM.Providers["anthropic"]; a.API != "anthropic-messages" || a.BaseURL != "" {
		t.Errorf("anthropic = api %q baseUrl %q", a.API, a.BaseURL)
	}
	if s := cfg.Plugins["git"].Source; s != "github:example/toolkit/plugins/git" {
		t.Errorf("git _source = %q", s)
	}
	m := cfg.Plugins["telegram"].Manifest
	if m == nil || m.Provides.Channel != ChannelOwnName {
		t.Fatalf("telegram manifest = %+v, want provides.channel true", m)
	}
	if got := m.Provides.ChannelNames("telegram"); len(got) != 1 || got[0] != "telegram" {
		t.Errorf("channels = %q, want [telegram]", got)
	}
	if cfg.Schema == "" {
		t.Error("$schema not kept")
	}
}

// TestKnownProviders: each provider pi knows by name needs only a key; an
// explicit api or baseUrl wins over what the name says.
func TestKnownProviders(t *testing.T) {
	tests := []struct {
		name, extra, api, baseURL string
	}{
		{"zai", "", "openai-completions", "https://api.z.ai/api/coding/paas/v4"},
		{"openrouter", "", "openai-completions", "https://openrouter.ai/api/v1"},
		{"groq", "", "openai-completions", "https://api.groq.com/openai/v1"},
		{"cerebras", "", "openai-completions", "https://api.cerebras.ai/v1"},
		{"xai", "", "openai-completions", "https://api.x.ai/v1"},
		{"mistral", "", "openai-completions", "https://api.mistral.ai/v1"},
		{"deepseek", "", "openai-completions", "https://api.deepseek.com"},
		{"openai", "", "openai-completions", ""},
		{"google", "", "google-generative-ai", ""},
		{"zai", `baseUrl: "https://open.bigmodel.cn/api/paas/v4"`, "openai-completions", "https://open.bigmodel.cn/api/paas/v4"},
		{"zai", `api: "anthropic-messages"`, "anthropic-messages", ""}, // another API: pi's URL would be wrong
		{"groq", `api: "openai-completions"`, "openai-completions", "https://api.groq.com/openai/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.extra, func(t *testing.T) {
			f := newFixture(t)
			src := strings.NewReplacer("anthropic: {", tt.name+": {", `provider: "anthropic"`, `provider: "`+tt.name+`"`).Replace(minimal(tt.extra, "", ""))
			cfg := f.mustParse(src)
			p := cfg.LLM.Providers[tt.name]
			if p.API != tt.api || p.BaseURL != tt.baseURL {
				t.Errorf("api %q baseUrl %q, want %q %q", p.API, p.BaseURL, tt.api, tt.baseURL)
			}
		})
	}
}

// TestStillStrict: what the original's configs need does not loosen the
// check of our own keys.
func TestStillStrict(t *testing.T) {
	f := newFixture(t)
	tests := []struct{ name, src, want string }{
		{"typo at root", minimal("", "", `$shema: "x",`), `config.json5:10:3: $shema: unknown key "$shema" (did you mean "$schema"?)`},
		{"typo in plugin", minimal("", "", `plugins: { git: { path: "plugins/git", _sourse: "x" } },`), `plugins.git._sourse: unknown key "_sourse" (did you mean "_source"?)`},
		{"other underscore key", minimal("", "", `plugins: { git: { path: "plugins/git", _comment: "x" } },`), `plugins.git._comment: unknown key "_comment"`},
		{"typo in provider", strings.Replace(minimal(`baseUrl: "https://x"`, "", ""), "baseUrl", "baseURL", 1), `config.json5:2:49: llm.providers.anthropic.baseURL: unknown key "baseURL" (did you mean "baseUrl"?)`},
		{"unknown provider needs api", strings.NewReplacer("anthropic: {", "zia: {", `provider: "anthropic"`, `provider: "zia"`).Replace(minimal("", "", "")), `llm.providers.zia: missing required field "api": provider "zia" is not one beige knows by name`},
		{"_source not a string", minimal("", "", `plugins: { git: { path: "plugins/git", _source: 1 } },`), `plugins.git._source: want a string, got number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.parse(tt.src)
			wantErrors(t, err, tt.want)
		})
	}
}

// TestManifestChannel reads provides.channel in each of its forms.
func TestManifestChannel(t *testing.T) {
	tests := []struct {
		json    string
		want    []string
		wantErr bool
	}{
		{`{"name":"tg","provides":{"channel":true}}`, []string{"tg"}, false},
		{`{"name":"tg","provides":{"channel":false}}`, nil, false},
		{`{"name":"tg","provides":{"channel":"chat"}}`, []string{"chat"}, false},
		{`{"name":"tg","provides":{"channel":"chat","channels":["chat","b"]}}`, []string{"chat", "b"}, false},
		{`{"name":"tg","provides":{}}`, nil, false},
		{`{"name":"tg","provides":{"channel":1}}`, nil, true},
		{`{"name":"tg","provides":{"channel":"\u0000own"}}`, nil, true},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		f := &fixture{t: t, dir: dir}
		f.write("plugin.json", tt.json)
		m, err := ReadManifest(dir)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v, want error %v", tt.json, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if got := m.Provides.ChannelNames(m.Name); strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: channels %q, want %q", tt.json, got, tt.want)
		}
		out, _ := json.Marshal(m)
		f.write("plugin.json", string(out))
		if m2, err := ReadManifest(dir); err != nil || m2.Provides.Channel != m.Provides.Channel {
			t.Errorf("%s: written back as %s, read %+v, %v", tt.json, out, m2, err)
		}
	}
}
