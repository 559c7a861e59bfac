package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realManifest reads a built-in plugin's plugin.json from its package
// (dir, under internal/), so that the tests check the schemas beige ships.
func realManifest(t *testing.T, dir string) *Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(dir), "plugin.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// at returns "config.json5:line:col" of the first occurrence of marker in src.
func at(t *testing.T, src, marker string) string {
	t.Helper()
	i := strings.Index(src, marker)
	if i < 0 {
		t.Fatalf("%q not in the config", marker)
	}
	p := posAt([]byte(src), i)
	return fmt.Sprintf("config.json5:%d:%d: ", p.Line, p.Col)
}

// telegramOK is a valid telegram config, to splice keys into.
const telegramOK = `token: "t", allowedUsers: [1], agentMapping: { default: "a1" }`

func TestPluginConfigSchema(t *testing.T) {
	builtins := map[string]*Manifest{"telegram": realManifest(t, "channel/telegram"), "git": realManifest(t, "plugin/git")}
	cases := []struct {
		name         string
		agent, root  string
		want         func(t *testing.T, src string) []string // each: position + path + message
		wantNoErrors bool
	}{
		{"valid", `pluginConfigs: { git: { timeout: 5 } },`, `plugins: { telegram: { config: { ` + telegramOK + `, defaults: { verbose: true } } }, git: {} },`, nil, true},
		{"typo at the top", "", `plugins: { telegram: { config: { ` + telegramOK + `, defualts: { verbose: true } } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, "defualts") + `plugins.telegram.config.defualts: unknown key "defualts" (did you mean "defaults"?)`}
		}, false},
		{"typo nested", "", `plugins: { telegram: { config: { ` + telegramOK + `, defaults: { verbos: true } } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, "verbos") + `plugins.telegram.config.defaults.verbos: unknown key "verbos" (did you mean "verbose"?)`}
		}, false},
		{"unknown key far from any", "", `plugins: { git: { config: { zzzzzz: 1 } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, "zzzzzz") + `plugins.git.config.zzzzzz: unknown key "zzzzzz" (known: allowForcePush, localRemotes, timeout)`}
		}, false},
		{"wrong type", "", `plugins: { telegram: { config: { ` + telegramOK + `, defaults: { verbose: "yes" } } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, `"yes"`) + `plugins.telegram.config.defaults.verbose: want boolean, got string`}
		}, false},
		{"array item", "", `plugins: { git: { config: { allowForcePush: ["a", 7] } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, "7]") + `plugins.git.config.allowForcePush[1]: want string, got number`}
		}, false},
		{"missing required", "", `plugins: { telegram: { config: { token: "t" } } },`, func(t *testing.T, src string) []string {
			return []string{
				at(t, src, `{ token`) + `plugins.telegram.config.allowedUsers: missing required field "allowedUsers"`,
				at(t, src, `{ token`) + `plugins.telegram.config.agentMapping: missing required field "agentMapping"`,
			}
		}, false},
		{"no config at all", "", `plugins: { telegram: {} },`, func(t *testing.T, src string) []string {
			p := at(t, src, `{} }`)
			return []string{
				p + `plugins.telegram.config.token: missing required field "token"`,
				p + `plugins.telegram.config.allowedUsers: missing required field "allowedUsers"`,
				p + `plugins.telegram.config.agentMapping: missing required field "agentMapping"`,
			}
		}, false},
		{"minItems", "", `plugins: { telegram: { config: { token: "t", allowedUsers: [], agentMapping: { default: "a1" } } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, `[]`) + `plugins.telegram.config.allowedUsers: minItems: got 0, want 1`}
		}, false},
		{"misspelt required key, where any key is allowed", "", `plugins: { telegram: { config: { token: "t", allowedUsers: [1], agentMapping: { defualt: "a1" } } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, `{ defualt`) + `plugins.telegram.config.agentMapping.default: missing required field "default" (is "defualt" a misspelling of it?)`}
		}, false},
		{"misspelt required key, once", "", `plugins: { telegram: { config: { tokn: "t", allowedUsers: [1], agentMapping: { default: "a1" } } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, `tokn`) + `plugins.telegram.config.tokn: unknown key "tokn" (did you mean "token"?)`}
		}, false},
		{"agent override typo", `pluginConfigs: { git: { timeot: 5 } },`, `plugins: { git: {} },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, "timeot") + `agents.a1.pluginConfigs.git.timeot: unknown key "timeot" (did you mean "timeout"?)`}
		}, false},
		{"agent override wrong type", `pluginConfigs: { git: { timeout: "soon" } },`, `plugins: { git: { config: { timeout: 5 } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, `"soon"`) + `agents.a1.pluginConfigs.git.timeout: want number, got string`}
		}, false},
		{"plugin-level typo once, though the agent overrides", `pluginConfigs: { git: { timeout: 5 } },`, `plugins: { git: { config: { timout: 5 } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, "timout") + `plugins.git.config.timout: unknown key "timout" (did you mean "timeout"?)`}
		}, false},
		{"agent override missing nested", `pluginConfigs: { telegram: { agentMapping: null } },`, `plugins: { telegram: { config: { ` + telegramOK + ` } } },`, func(t *testing.T, src string) []string {
			return []string{at(t, src, "null") + `agents.a1.pluginConfigs.telegram.agentMapping: want object, got null`}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			src := minimal("", c.agent, c.root)
			p := f.write("config.json5", src)
			_, err := Load(p, &LoadOptions{LookupEnv: f.lookup, Builtins: builtins})
			if c.wantNoErrors {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			want := c.want(t, src)
			wantErrors(t, err, want...)
			// The position is the file's: the error starts with it.
			for i, e := range err.(ErrorList) {
				if i < len(want) && !strings.HasPrefix(e.Error(), filepath.Join(f.dir, want[i])) {
					t.Errorf("error %d = %q, want it to start with the file:line:col %q", i, e.Error(), want[i])
				}
			}
		})
	}
}

// TestPluginConfigSchemaExternal checks a plugin installed from a folder:
// its schema is checked like a built-in's; one without a schema takes any
// config; a broken schema is an error naming the plugin.json; a schema
// cannot make validation read files.
func TestPluginConfigSchemaExternal(t *testing.T) {
	f := newFixture(t)
	f.write("plugins/strict/plugin.json", `{"name": "strict", "run": {"command": ["./run"]},
	  "configSchema": {"type": "object", "properties": {"url": {"type": "string", "pattern": "^https://"}}, "additionalProperties": false},
	  "defaultConfig": {"url": "https://example.com"}}`)
	f.write("plugins/loose/plugin.json", `{"name": "loose", "run": {"command": ["./run"]}}`)
	f.write("plugins/broken/plugin.json", `{"name": "broken", "run": {"command": ["./run"]}, "configSchema": {"type": "nope"}}`)
	secret := f.write("secret.json", `{"type": "object", "properties": {"leaked": {"type": "string"}}}`)
	f.write("plugins/reader/plugin.json", `{"name": "reader", "run": {"command": ["./run"]}, "configSchema": {"$ref": "file://`+secret+`"}}`)

	f.env["URL"] = "http://sk-secret-value"
	src := minimal("", "", `plugins: {
    strict: { path: "plugins/strict", config: { url: "${URL}", urll: 1 } },
    loose: { path: "plugins/loose", config: { anything: [1, {goes: true}] } },
  },`)
	_, err := f.parse(src)
	wantErrors(t, err,
		at(t, src, `"${URL}"`)+`plugins.strict.config.url: does not match the pattern "^https://"`,
		at(t, src, `urll`)+`plugins.strict.config.urll: unknown key "urll" (did you mean "url"?)`,
	)
	if strings.Contains(err.Error(), "sk-secret-value") {
		t.Errorf("the error shows the value of ${URL}: %v", err)
	}

	// A schema that is no JSON Schema (published plugins write
	// documentation there) or loads something from outside itself is not
	// used: the config loads, and a warning says it was not checked.
	src = minimal("", "", `plugins: { broken: { path: "plugins/broken" }, reader: { path: "plugins/reader" } },`)
	cfg, err := f.parse(src)
	if err != nil {
		t.Fatalf("a plugin with an unusable configSchema: %v", err)
	}
	warns := strings.Join(PluginSchemaWarnings(cfg), "\n")
	for _, want := range []string{
		"plugins.broken: its config is not checked: the configSchema of " + filepath.Join(f.dir, "plugins/broken/plugin.json") + " is not a JSON Schema (at /type: value must be one of 'array',",
		"plugins.reader: its config is not checked: the configSchema of " + filepath.Join(f.dir, "plugins/reader/plugin.json") + " is not a JSON Schema",
	} {
		if !strings.Contains(warns, want) {
			t.Errorf("warnings %q lack %q", warns, want)
		}
	}
}

// TestPluginConfigDefaultsFromManifest: a manifest whose defaultConfig
// breaks its own schema is reported at the plugin's entry, the only place
// the file has.
func TestPluginConfigDefaultsFromManifest(t *testing.T) {
	f := newFixture(t)
	builtins := map[string]*Manifest{"odd": {Name: "odd",
		ConfigSchema:  map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}},
		DefaultConfig: map[string]any{"n": "one"}}}
	src := minimal("", "", `plugins: { odd: {} },`)
	p := f.write("config.json5", src)
	_, err := Load(p, &LoadOptions{LookupEnv: f.lookup, Builtins: builtins})
	wantErrors(t, err, at(t, src, `{} }`)+`plugins.odd.config.n: want number, got string`)
}

func TestUnbuiltAPI(t *testing.T) {
	f := newFixture(t)
	only := func(api string) bool { return api == "anthropic-messages" || api == "openai-completions" }
	src := minimal("", "", "")
	src = strings.Replace(src, `anthropic: { apiKey: "k",  }`, `anthropic: { apiKey: "k" },
    google: { apiKey: "k" },
    mine: { api: "openai-responses", baseUrl: "https://example.com/v1" },`, 1)
	p := f.write("config.json5", src)
	_, err := Load(p, &LoadOptions{LookupEnv: f.lookup, SupportedAPI: only})
	wantErrors(t, err,
		at(t, src, "{ apiKey: \"k\" },\n    mine")+`llm.providers.google: provider "google" speaks api "google-generative-ai" (known from its name), which is not built into this beige binary (built: anthropic-messages, openai-completions)`,
		at(t, src, `"openai-responses"`)+`llm.providers.mine.api: api "openai-responses" is not built into this beige binary (built: anthropic-messages, openai-completions)`,
	)
}
