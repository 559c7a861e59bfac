package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// specExample is the config of architecture.md section 1, verbatim.
const specExample = `{
  llm: {
    providers: {
      anthropic: { apiKey: "${ANTHROPIC_API_KEY}" },
      // zai: {
      //   baseUrl: "https://api.zai.com/v1",
      //   apiKey: "${ZAI_API_KEY}",
      //   api: "openai-completions",
      // },
    },
  },

  plugins: {
    git: {
      path: "./plugins/git",
    },
    // browser: {
    //   path: "./plugins/browser",
    //   config: { browserUrl: "ws://localhost:9222" },
    // },
  },

  agents: {
    travel: {
      model: {
        provider: "anthropic",
        model: "claude-sonnet-4-6",
        thinkingLevel: "medium",
      },
      fallbackModels: [
        { provider: "anthropic", model: "claude-3-5-sonnet-20241022" },
      ],
      tools: ["git"],
      // Per-agent plugin config overrides — deep-merged with plugins.git.config
      // pluginConfigs: {
      //   git: { allowForcePush: ["del"] },
      // },
      sandbox: { image: "beige-sandbox:latest" },
    },
  },
}
`

const gitManifest = `{
  "name": "git",
  "description": "Git version control operations.",
  "commands": ["status", "commit", "log"],
  "provides": { "tools": ["git"] }
}`

// fixture is a folder with a config and the files it points at.
type fixture struct {
	t   *testing.T
	dir string
	env map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), env: map[string]string{}}
	f.write("plugins/git/plugin.json", gitManifest)
	f.write("skills/review/skill.json", `{"name": "review", "description": "Code review checklists"}`)
	return f
}

func (f *fixture) write(name, content string) string {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) lookup(k string) (string, bool) {
	v, ok := f.env[k]
	return v, ok
}

func (f *fixture) parse(src string) (*Config, error) {
	f.t.Helper()
	p := f.write("config.json5", src)
	return Load(p, &LoadOptions{LookupEnv: f.lookup})
}

func (f *fixture) mustParse(src string) *Config {
	f.t.Helper()
	cfg, err := f.parse(src)
	if err != nil {
		f.t.Fatalf("Load: %v", err)
	}
	return cfg
}

func TestSpecExample(t *testing.T) {
	f := newFixture(t)
	f.env["ANTHROPIC_API_KEY"] = "sk-test"
	cfg := f.mustParse(specExample)
	a := cfg.Agents["travel"]
	if a == nil {
		t.Fatal("no agent travel")
	}
	if a.Model != (ModelRef{Provider: "anthropic", Model: "claude-sonnet-4-6", ThinkingLevel: "medium"}) {
		t.Errorf("model = %+v", a.Model)
	}
	if len(a.FallbackModels) != 1 || a.FallbackModels[0].Model != "claude-3-5-sonnet-20241022" || a.FallbackModels[0].ThinkingLevel != "off" {
		t.Errorf("fallbackModels = %+v", a.FallbackModels)
	}
	if p := cfg.LLM.Providers["anthropic"]; p.APIKey.Reveal() != "sk-test" || p.API != "anthropic-messages" || p.Concurrency != -1 {
		t.Errorf("provider = %+v", p)
	}
	if got, want := cfg.Plugins["git"].Path, filepath.Join(f.dir, "plugins/git"); got != want {
		t.Errorf("plugin path = %q, want %q", got, want)
	}
	if m := cfg.Plugins["git"].Manifest; m == nil || m.Provides.Tools[0] != "git" {
		t.Errorf("manifest = %+v", m)
	}
	if cfg.Gateway.Host != "127.0.0.1" || cfg.Gateway.Port != 7433 || cfg.Gateway.Log.MaxSizeBytes != 10<<20 || cfg.Gateway.Log.MaxFiles != 5 {
		t.Errorf("gateway defaults = %+v", cfg.Gateway)
	}
	if a.Sandbox.MemoryLimit != 3<<30 || a.Sandbox.Network != "proxy" || a.Sandbox.Egress.Allow != nil {
		t.Errorf("sandbox defaults = %+v", a.Sandbox)
	}

	delete(f.env, "ANTHROPIC_API_KEY")
	_, err := f.parse(specExample)
	wantErrors(t, err, "config.json5:4:28: llm.providers.anthropic.apiKey: environment variable ANTHROPIC_API_KEY is not set")
}

// wantErrors checks that err lists exactly the given messages (each a
// substring of one error, in order).
func wantErrors(t *testing.T, err error, want ...string) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error = %v, want an ErrorList", err)
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(list), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(list[i].Error(), w) {
			t.Errorf("error %d = %q, want it to contain %q", i, list[i].Error(), w)
		}
	}
}

// minimal returns a valid config with extra text spliced into the agent
// (agentExtra), the root (rootExtra) and the provider (providerExtra).
func minimal(providerExtra, agentExtra, rootExtra string) string {
	return fmt.Sprintf(`{
  llm: { providers: { anthropic: { apiKey: "k", %s } } },
  agents: {
    a1: {
      model: { provider: "anthropic", model: "m" },
      sandbox: { image: "img" },
      %s
    },
  },
  %s
}`, providerExtra, agentExtra, rootExtra)
}

// TestFields decodes every field of the schema once.
func TestFields(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name                  string
		provider, agent, root string
		check                 func(t *testing.T, c *Config)
	}{
		{"approval", "", `approval: { exec: ["git push*"], tools: ["github"], timeoutSeconds: 2.5 },`, "", func(t *testing.T, c *Config) {
			a := c.Agents["a1"].Approval
			if len(a.Exec) != 1 || a.Exec[0] != "git push*" || len(a.Tools) != 1 || a.Tools[0] != "github" || a.Timeout() != 2500*time.Millisecond {
				t.Errorf("%+v", a)
			}
			if d := (Approval{}).Timeout(); d != 300*time.Second {
				t.Errorf("default timeout %v", d)
			}
		}},
		{"provider baseUrl api concurrency", `baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", concurrency: 2`, "", "", func(t *testing.T, c *Config) {
			p := c.LLM.Providers["anthropic"]
			if p.BaseURL != "http://127.0.0.1:9/v1" || p.API != "openai-completions" || p.Concurrency != 2 {
				t.Errorf("%+v", p)
			}
		}},
		{"concurrency -1", `concurrency: -1`, "", "", func(t *testing.T, c *Config) {
			if c.LLM.Providers["anthropic"].Concurrency != -1 {
				t.Error(c.LLM.Providers["anthropic"].Concurrency)
			}
		}},
		{"provider models", `models: [{id: "x1", name: "X One", reasoning: true, input: ["text", "image"], cost: {input: 1, output: 2, cacheRead: 0.1, cacheWrite: 1.25}, contextWindow: 1000, maxTokens: 100}]`, "", "", func(t *testing.T, c *Config) {
			m := c.LLM.Providers["anthropic"].Models[0]
			if m.ID != "x1" || m.Name != "X One" || !m.Reasoning || len(m.Input) != 2 || m.Cost.CacheWrite != 1.25 || m.ContextWindow != 1000 || m.MaxTokens != 100 {
				t.Errorf("%+v", m)
			}
		}},
		{"plugins path and config", "", "", `plugins: { git: { path: "plugins/git", config: { n: 1, list: ["a", {b: true}], nested: {s: "x"} } } },`, func(t *testing.T, c *Config) {
			p := c.Plugins["git"]
			if p.Config["n"] != 1.0 || p.Config["list"].([]any)[1].(map[string]any)["b"] != true || p.Config["nested"].(map[string]any)["s"] != "x" {
				t.Errorf("%#v", p.Config)
			}
			if len(c.PluginOrder) != 1 || c.PluginOrder[0] != "git" {
				t.Errorf("order %v", c.PluginOrder)
			}
		}},
		{"skills", "", `skills: ["review"],`, `skills: { review: { path: "./skills/review" } },`, func(t *testing.T, c *Config) {
			s := c.Skills["review"]
			if s.Path != filepath.Join(f.dir, "skills/review") || s.Manifest.Description != "Code review checklists" || s.Manifest.ContextFile != "README.md" {
				t.Errorf("%+v %+v", s, s.Manifest)
			}
			if c.Agents["a1"].Skills[0] != "review" {
				t.Error(c.Agents["a1"].Skills)
			}
		}},
		{"model thinking and compaction", "", `fallbackModels: [{provider: "anthropic", model: "f", thinkingLevel: "xhigh", compactionThreshold: 5000}],`, "", func(t *testing.T, c *Config) {
			fm := c.Agents["a1"].FallbackModels[0]
			if fm.Model != "f" || fm.ThinkingLevel != "xhigh" || fm.CompactionThreshold != 5000 {
				t.Errorf("%+v", fm)
			}
		}},
		{"tools and pluginConfigs", "", `tools: ["git", "exec"], pluginConfigs: { git: { allowForcePush: ["del"] } },`, `plugins: { git: { path: "plugins/git" } },`, func(t *testing.T, c *Config) {
			a := c.Agents["a1"]
			if len(a.Tools) != 2 || a.PluginConfigs["git"]["allowForcePush"].([]any)[0] != "del" {
				t.Errorf("%+v", a)
			}
		}},
		{"workspaceDir", "", `workspaceDir: "~/projects/x",`, "", func(t *testing.T, c *Config) {
			home, _ := os.UserHomeDir()
			if got := c.Agents["a1"].WorkspaceDir; got != filepath.Join(home, "projects/x") {
				t.Error(got)
			}
		}},
		{"sandbox everything", "", ``, "", nil},
		{"gateway", "", "", `gateway: { host: "0.0.0.0", port: 8080, logFile: "logs/gw.log", log: { maxSizeBytes: 2048, maxFiles: 2 }, authToken: "tok" },`, func(t *testing.T, c *Config) {
			g := c.Gateway
			if g.Host != "0.0.0.0" || g.Port != 8080 || g.LogFile != filepath.Join(f.dir, "logs/gw.log") || g.Log.MaxSizeBytes != 2048 || g.Log.MaxFiles != 2 || g.AuthToken.Reveal() != "tok" {
				t.Errorf("%+v", g)
			}
			if g.Audit.MaxFiles != 0 || g.Audit.MaxSizeBytes != 0 || g.HTTP.MaxConnections != DefaultMaxConns {
				t.Errorf("defaults: audit %+v, http %+v", g.Audit, g.HTTP)
			}
		}},
		{"gateway audit and http", "", "", `gateway: { audit: { maxSizeBytes: 4096, maxFiles: 30 }, http: { maxConnections: 64 } },`, func(t *testing.T, c *Config) {
			if g := c.Gateway; g.Audit.MaxSizeBytes != 4096 || g.Audit.MaxFiles != 30 || g.HTTP.MaxConnections != 64 {
				t.Errorf("audit %+v, http %+v", g.Audit, g.HTTP)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.check == nil {
				return
			}
			tc.check(t, f.mustParse(minimal(tc.provider, tc.agent, tc.root)))
		})
	}

	t.Run("sandbox fields", func(t *testing.T) {
		src := strings.Replace(minimal("", "", ""), `sandbox: { image: "img" }`, `sandbox: {
        image: "img", memoryLimit: "2g", cpus: 1.5, pidsLimit: 256, network: "none", runtime: "runsc",
        extraMounts: ["./data:/data:ro", { source: "/srv/x", target: "/x" }],
        extraEnv: { TZ: "UTC", LANG: "C.UTF-8" },
        capAdd: ["NET_BIND_SERVICE"], capDrop: ["ALL"], securityOpt: [],
        egress: { allow: ["*.pypi.org", "10.0.0.0/8"], deny: [] },
      }`, 1)
		s := f.mustParse(src).Agents["a1"].Sandbox
		if s.Image != "img" || s.MemoryLimit != 2<<30 || s.CPUs != 1.5 || s.PidsLimit != 256 || s.Network != "none" || s.Runtime != "runsc" {
			t.Errorf("%+v", s)
		}
		want := []Mount{{Source: filepath.Join(f.dir, "data"), Target: "/data", ReadOnly: true}, {Source: "/srv/x", Target: "/x"}}
		if fmt.Sprint(s.ExtraMounts) != fmt.Sprint(want) {
			t.Errorf("mounts = %+v, want %+v", s.ExtraMounts, want)
		}
		if fmt.Sprint(s.Egress.Allow) != "[*.pypi.org 10.0.0.0/8]" || s.Egress.Deny == nil || len(s.Egress.Deny) != 0 {
			t.Errorf("egress = %#v", s.Egress)
		}
		if s.ExtraEnv["TZ"] != "UTC" || s.CapAdd[0] != "NET_BIND_SERVICE" || s.CapDrop[0] != "ALL" || s.SecurityOpt == nil || len(s.SecurityOpt) != 0 {
			t.Errorf("%+v", s)
		}
	})

	t.Run("sandbox user, cpus and read-only root", func(t *testing.T) {
		for _, tc := range []struct {
			fields, user string
			cpus         float64
			ro           bool
		}{
			{``, "", DefaultCPUs, false}, // defaults: the sandbox picks the non-root user; 1 CPU
			{`user: "root", cpus: -1`, "0:0", -1, false},
			{`user: "0:0", readOnlyRootfs: true`, "0:0", DefaultCPUs, true},
			{`user: "1000:1000", cpus: 0.5`, "1000:1000", 0.5, false},
		} {
			src := strings.Replace(minimal("", "", ""), `sandbox: { image: "img" }`, `sandbox: { image: "img", `+tc.fields+` }`, 1)
			s := f.mustParse(src).Agents["a1"].Sandbox
			if s.User != tc.user || s.CPUs != tc.cpus || s.ReadOnlyRootfs != tc.ro {
				t.Errorf("%s: user %q cpus %v readOnlyRootfs %v, want %q %v %v", tc.fields, s.User, s.CPUs, s.ReadOnlyRootfs, tc.user, tc.cpus, tc.ro)
			}
		}
	})
}

func TestInterpolation(t *testing.T) {
	env := map[string]string{"A": "alpha", "EMPTY": "", "B": "beta"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cases := []struct {
		in, want, err string
	}{
		{"plain", "plain", ""},
		{"${A}", "alpha", ""},
		{"x-${A}-y", "x-alpha-y", ""},
		{"${A}${B}", "alphabeta", ""},
		{"${UNSET:-fallback}", "fallback", ""},
		{"${UNSET:-}", "", ""},
		{"${EMPTY:-d}", "d", ""},
		{"${EMPTY}", "", ""},
		{"${A:-d}", "alpha", ""},
		{"${UNSET:-a:b-c}", "a:b-c", ""},
		{"costs $5", "costs $5", ""},
		{"$A", "$A", ""},
		{"$$", "$$", ""},
		{"a $ b", "a $ b", ""},
		{"${UNSET}", "", "environment variable UNSET is not set"},
		{"${A", "", "unterminated ${"},
		{"${}", "", "invalid variable reference ${}"},
		{"${1X}", "", "invalid variable reference ${1X}"},
		{"${A B}", "", "invalid variable reference"},
	}
	for _, tc := range cases {
		got, err := interpolate(tc.in, lookup)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("interpolate(%q) error = %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("interpolate(%q) error = %v", tc.in, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("interpolate(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestInterpolationInNestedValues(t *testing.T) {
	f := newFixture(t)
	f.env["HOST"] = "example.org"
	cfg := f.mustParse(minimal("", "", `plugins: { git: { path: "plugins/git", config: { urls: ["https://${HOST}", { deep: "${HOST:-none}" }], price: "$5" } } },`))
	c := cfg.Plugins["git"].Config
	if got := c["urls"].([]any)[0]; got != "https://example.org" {
		t.Errorf("array item = %v", got)
	}
	if got := c["urls"].([]any)[1].(map[string]any)["deep"]; got != "example.org" {
		t.Errorf("nested = %v", got)
	}
	if c["price"] != "$5" {
		t.Errorf("literal $ = %v", c["price"])
	}
	// An unset variable deep inside is reported where it is used.
	_, err := f.parse(minimal("", "", `plugins: { git: { path: "plugins/git", config: {
    list: [1, { key: "${NOPE}" }] } } },`))
	wantErrors(t, err, `:11:22: plugins.git.config.list[1].key: environment variable NOPE is not set`)
}

func TestDuplicateKey(t *testing.T) {
	f := newFixture(t)
	_, err := f.parse(minimal("", `sandbox: { image: "other" },`, ""))
	wantErrors(t, err, `agents.a1.sandbox: duplicate key "sandbox"`)
}

func TestErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown key with suggestion", strings.Replace(minimal("", "", ""), `model: "m"`, `modle: "m"`, 1),
			[]string{`config.json5:5:39: agents.a1.model.modle: unknown key "modle" (did you mean "model"?)`}},
		{"unknown key without suggestion", minimal("", "", "frobnicate: 1,"),
			[]string{`config.json5:10:3: frobnicate: unknown key "frobnicate" (known: $schema, llm, plugins, skills, agents, gateway)`}},
		{"missing required", strings.Replace(minimal("", "", ""), `sandbox: { image: "img" },`, `sandbox: {},`, 1),
			[]string{`config.json5:6:16: agents.a1.sandbox.image: missing required field "image"`}},
		{"missing agents", `{ llm: { providers: { anthropic: {} } } }`,
			[]string{`agents: missing required field "agents"`}},
		{"wrong type", minimal("", "", `gateway: { port: "7433" },`),
			[]string{`gateway.port: want an integer, got string`}},
		{"not an integer", minimal("", "", `gateway: { port: 74.5 },`),
			[]string{`gateway.port: want an integer, got 74.5`}},
		{"port range", minimal("", "", `gateway: { port: 70000 },`),
			[]string{`gateway.port: want a port between 1 and 65535, got 70000`}},
		{"metrics listen without port", minimal("", "", `gateway: { metrics: { listen: "127.0.0.1" } },`),
			[]string{`gateway.metrics.listen: want host:port (e.g. "127.0.0.1:9464"), got "127.0.0.1"`}},
		{"metrics listen port range", minimal("", "", `gateway: { metrics: { listen: "127.0.0.1:99999" } },`),
			[]string{`gateway.metrics.listen: want a port between 1 and 65535, got "99999"`}},
		{"metrics listen on the API's address", minimal("", "", `gateway: { metrics: { listen: "127.0.0.1:7433" } },`),
			[]string{`gateway.metrics.listen: "127.0.0.1:7433" is the API's own address`}},
		{"unknown provider", strings.Replace(minimal("", "", ""), `provider: "anthropic"`, `provider: "antropic"`, 1),
			[]string{`config.json5:5:26: agents.a1.model.provider: unknown provider "antropic" (known: anthropic); did you mean "anthropic"?`}},
		{"unknown api", minimal(`api: "openai-completion"`, "", ""),
			[]string{`llm.providers.anthropic.api: unknown api "openai-completion" (did you mean "openai-completions"?)`}},
		{"api required", strings.Replace(minimal("", "", ""), "anthropic: {", "acme: {", 1),
			[]string{`llm.providers.acme: missing required field "api"`, `unknown provider "anthropic" (known: acme)`}},
		{"bad baseUrl", minimal(`baseUrl: "api.example.com"`, "", ""),
			[]string{`llm.providers.anthropic.baseUrl: want an http(s) URL`}},
		{"concurrency zero", minimal(`concurrency: 0`, "", ""),
			[]string{`llm.providers.anthropic.concurrency: want a positive number of requests, or -1`}},
		{"thinking level", strings.Replace(minimal("", "", ""), `model: "m"`, `model: "m", thinkingLevel: "max"`, 1),
			[]string{`agents.a1.model.thinkingLevel: unknown thinking level "max"`}},
		{"agent name", strings.Replace(minimal("", "", ""), "a1:", `"My.Agent":`, 1),
			[]string{`agents["My.Agent"]: invalid agent name "My.Agent"`}},
		{"unknown tool", minimal("", `tools: ["browser"],`, ""),
			[]string{`agents.a1.tools[0]: unknown tool "browser": no configured plugin provides it`}},
		{"tool twice", minimal("", `tools: ["git", "git"],`, `plugins: { git: { path: "plugins/git" } },`),
			[]string{`agents.a1.tools[1]: tool "git" is listed twice`}},
		{"unknown skill", minimal("", `skills: ["reveiw"],`, `skills: { review: { path: "skills/review" } },`),
			[]string{`agents.a1.skills[0]: unknown skill "reveiw" (known: review); did you mean "review"?`}},
		{"unknown pluginConfigs", minimal("", `pluginConfigs: { gti: {} },`, `plugins: { git: { path: "plugins/git" } },`),
			[]string{`agents.a1.pluginConfigs.gti: unknown plugin "gti" (known: git); did you mean "git"?`}},
		{"plugin folder missing", minimal("", "", `plugins: { web: { path: "./plugins/web" } },`),
			[]string{`plugins.web.path: plugin "web" is not installed: folder does not exist: ` + filepath.Join(f.dir, "plugins/web")}},
		{"plugin.json missing", minimal("", "", `plugins: { web: { path: "./skills" } },`),
			[]string{`plugins.web.path: no plugin.json in`}},
		{"skill.json missing", minimal("", "", `skills: { s: { path: "./plugins" } },`),
			[]string{`skills.s.path: no skill.json in`}},
		{"memory", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", memoryLimit: "lots"`, 1),
			[]string{`agents.a1.sandbox.memoryLimit: invalid size "lots"`}},
		{"memory too small", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", memoryLimit: 1024`, 1),
			[]string{`below Docker's minimum`}},
		{"reserved mount", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", extraMounts: ["/etc:/beige/x"]`, 1),
			[]string{`agents.a1.sandbox.extraMounts[0]: target "/beige/x" overlaps /beige`}},
		{"relative mount target", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", extraMounts: [{source: "/a", target: "data"}]`, 1),
			[]string{`must be an absolute path`}},
		{"bad mount string", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", extraMounts: ["/a"]`, 1),
			[]string{`want "hostPath:containerPath[:ro|rw]"`}},
		{"user name", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", user: "node"`, 1),
			[]string{`agents.a1.sandbox.user: want a numeric "uid:gid" (e.g. "1000:1000") or "root", got "node"`}},
		{"user without gid", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", user: "1000"`, 1),
			[]string{`agents.a1.sandbox.user: want a numeric "uid:gid"`}},
		{"negative user", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", user: "-1:0"`, 1),
			[]string{`agents.a1.sandbox.user: want a numeric "uid:gid"`}},
		{"negative cpus", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", cpus: -2`, 1),
			[]string{`agents.a1.sandbox.cpus: want a positive number of CPUs, or -1 for no limit`}},
		{"extraEnv PATH", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", extraEnv: { PATH: "/x" }`, 1),
			[]string{`agents.a1.sandbox.extraEnv.PATH: PATH is set by beige`}},
		{"host network", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", network: "host"`, 1),
			[]string{`agents.a1.sandbox.network: network "host" shares a network namespace with the host or another container`}},
		{"container network", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", network: "container:beige-b"`, 1),
			[]string{`agents.a1.sandbox.network: network "container:beige-b" shares a network namespace`}},
		{"bad network name", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", network: "my net"`, 1),
			[]string{`agents.a1.sandbox.network: want "proxy", "none", "open" or a Docker network name, got "my net"`}},
		{"egress rules", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", egress: { allow: ["ok.org", "x.org:99999"], deny: ["[::1"] }`, 1),
			[]string{`agents.a1.sandbox.egress.allow[1]: rule "x.org:99999": invalid port "99999"`, `agents.a1.sandbox.egress.deny[0]: rule "[::1": missing ']'`}},
		{"egress credentials", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", egress: { credentials: [{ host: "*.github.com", header: "Authorization", value: "x" }, { host: "10.0.0.1", header: "Host", value: "" }, { host: "api.github.com:443", header: "bad header", value: "a\nb" }] }`, 1),
			[]string{`agents.a1.sandbox.egress.credentials[0].host: want a host name without wildcard or port, got "*.github.com"`, `agents.a1.sandbox.egress.credentials[1].host: want a host name (not an address), got "10.0.0.1"`, `agents.a1.sandbox.egress.credentials[1].header: want an HTTP header name other than Host, got "Host"`, `agents.a1.sandbox.egress.credentials[1].value: want a non-empty value`, `agents.a1.sandbox.egress.credentials[2].host: want a host name without wildcard or port`, `agents.a1.sandbox.egress.credentials[2].header: want an HTTP header name`, `agents.a1.sandbox.egress.credentials[2].value: want a non-empty value without line breaks`}},
		{"proxy env in proxy mode", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", extraEnv: { https_proxy: "http://x" }`, 1),
			[]string{`agents.a1.sandbox.extraEnv.https_proxy: https_proxy is set by beige in the "proxy" network mode`}},
		{"approval rules", minimal("", `approval: { exec: ["git push*", "", "a\nb"], tools: ["  "], egress: ["*", "*.github.com", "example.com:443", "[fd00::*]:*", "", "http://x.org/"], timeoutSeconds: -1 },`, ""),
			[]string{`config.json5:7:39: agents.a1.approval.exec[1]: want a non-empty pattern`, `agents.a1.approval.exec[2]: pattern "a\nb" has control characters`, `agents.a1.approval.tools[0]: want a non-empty pattern`, `agents.a1.approval.egress[4]: want a non-empty pattern`, `agents.a1.approval.egress[5]: pattern "http://x.org/": want a host or host:port pattern`, `agents.a1.approval.timeoutSeconds: want a number of seconds between 0 (the default, 300) and 86400`}},
		{"approval unknown key", minimal("", `approval: { exec: ["x"], timeout: 5 },`, ""),
			[]string{`agents.a1.approval.timeout: unknown key "timeout" (known: exec, tools, egress, timeoutSeconds)`}},
		{"log sizes", minimal("", "", `gateway: { log: { maxSizeBytes: 10, maxFiles: 0 } },`),
			[]string{`gateway.log.maxSizeBytes: want at least 1024 bytes`}},
		{"audit and http bounds", minimal("", "", `gateway: { audit: { maxSizeBytes: 10, maxFiles: -1 }, http: { maxConnections: 2 } },`),
			[]string{`gateway.audit.maxSizeBytes: want at least 1024 bytes`, `gateway.audit.maxFiles: want 0 (keep every file) or more`, `gateway.http.maxConnections: want at least 8`}},
		{"syntax error", "{\n  llm: {,\n}",
			[]string{`config.json5:2:9: syntax error: invalid character ','`}},
		{"root not object", `["a"]`,
			[]string{`config.json5:1:1: the config must be an object`}},
		{"three independent errors", strings.NewReplacer(`model: "m"`, `modle: "m"`, `gateway: {}`, ``, `image: "img"`, `image: 5`).Replace(minimal("", "", `gateway: { port: 0.5 },`)),
			[]string{`agents.a1.model.modle: unknown key "modle" (did you mean "model"?)`, `agents.a1.sandbox.image: want a string, got number`, `gateway.port: want an integer, got 0.5`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.parse(tc.src)
			wantErrors(t, err, tc.want...)
		})
	}
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json5")
	if err := os.WriteFile(big, bytes.Repeat([]byte(" "), 50<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{filepath.Join(dir, "missing.json5"), "config file not found"},
		{dir, "is a directory, not a config file"},
		{big, "config file is too large (50.0 MB; the limit is 4.0 MB)"},
	}
	for _, tc := range cases {
		_, err := Load(tc.path, nil)
		wantErrors(t, err, tc.path+": "+tc.want)
	}
	if os.Geteuid() != 0 { // root reads anything
		p := filepath.Join(dir, "secret.json5")
		os.WriteFile(p, []byte("{}"), 0o000)
		_, err := Load(p, nil)
		wantErrors(t, err, "permission denied")
	}
}

func TestJSON5Syntax(t *testing.T) {
	f := newFixture(t)
	src := `// leading comment
{
  /* block */ llm: { 'providers': { "anthropic": { apiKey: 'single', concurrency: 0x10, }, }, },
  agents: { a1: { model: { provider: "anthropic", model: "m\
n" }, sandbox: { image: "img", cpus: .5, memoryLimit: 1e9 }, }, },
  gateway: { port: +7433, },
}`
	cfg := f.mustParse(src)
	if cfg.LLM.Providers["anthropic"].Concurrency != 16 || cfg.Agents["a1"].Model.Model != "mn" || cfg.Agents["a1"].Sandbox.CPUs != 0.5 || cfg.Agents["a1"].Sandbox.MemoryLimit != 1e9 {
		t.Errorf("%+v", cfg)
	}
	_, err := f.parse(strings.Replace(src, "cpus: .5", "cpus: Infinity", 1))
	wantErrors(t, err, "agents.a1.sandbox.cpus: want a finite number, got +Inf")
}

func TestBuiltinPlugins(t *testing.T) {
	f := newFixture(t)
	src := minimal("", `tools: ["web.fetch"],`, `plugins: { web: {}, local: { path: "plugins/git" } },`)
	p := f.write("config.json5", src)
	builtins := map[string]*Manifest{"web": {Name: "web", Provides: Provides{Tools: []string{"web.fetch"}}}}
	if _, err := Load(p, &LoadOptions{Builtins: builtins}); err == nil {
		t.Fatal("a path plugin with no run command and no built-in of its name should fail")
	} else {
		wantErrors(t, err, `plugins.local.path: plugin.json of "local" has no "run" command, its folder no index.ts or index.js, and no plugin "git" is built into beige`)
	}
	builtins["git"] = &Manifest{Name: "git"}
	cfg, err := Load(p, &LoadOptions{Builtins: builtins})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Plugins["web"].Manifest != builtins["web"] {
		t.Error("built-in manifest not attached")
	}
	delete(builtins, "web")
	_, err = Load(p, &LoadOptions{Builtins: builtins})
	wantErrors(t, err, `plugins.web: plugin "web" has no path and is not built into beige (built-in: git)`)
}

// TestScriptPlugins: a folder with index.ts (the original's format) is a
// plugin of its own kind; without a usable Node.js the config fails,
// naming the plugin and what to install. A folder named like a built-in is
// the built-in and needs no Node.js.
func TestScriptPlugins(t *testing.T) {
	f := newFixture(t)
	src := minimal("", `tools: ["ts", "git"],`, `plugins: { ts: { path: "plugins/ts", node: "/opt/node22/bin/node" }, git: { path: "plugins/git" } },`)
	p := f.write("config.json5", src)
	f.write("plugins/ts/plugin.json", `{"name":"ts","description":"d"}`)
	f.write("plugins/ts/index.ts", `export function createPlugin() {}`)
	f.write("plugins/git/index.ts", `export function createPlugin() {}`)
	builtins := map[string]*Manifest{"git": {Name: "git"}}
	var asked []string
	opts := &LoadOptions{Builtins: builtins, CheckNode: func(node string) error {
		asked = append(asked, node)
		return errors.New("no node in PATH")
	}}
	_, err := Load(p, opts)
	wantErrors(t, err, `plugins.ts: plugin "ts" is a TypeScript/JavaScript plugin and needs Node.js 22 or later: no node in PATH (install it, or set plugins.ts.node to its path)`)
	if len(asked) != 1 || asked[0] != "/opt/node22/bin/node" {
		t.Errorf("CheckNode asked for %q; want only plugins.ts.node", asked)
	}
	opts.CheckNode = func(string) error { return nil }
	cfg, err := Load(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Plugins["ts"].Node != "/opt/node22/bin/node" {
		t.Errorf("plugins.ts.node = %q", cfg.Plugins["ts"].Node)
	}
}

func TestSecretNeverShows(t *testing.T) {
	s := Secret("sk-canary-123")
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "key", s)
	j, _ := json.Marshal(struct{ K Secret }{s})
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %s %+v %#v", s, s, s, s), buf.String(), string(j)} {
		if strings.Contains(out, "canary") {
			t.Errorf("secret leaked: %s", out)
		}
	}
	if s.Reveal() != "sk-canary-123" {
		t.Error("Reveal")
	}
}

func TestParseByteSize(t *testing.T) {
	cases := []struct {
		in   string
		want ByteSize
		ok   bool
	}{
		{"512", 512, true}, {"1k", 1024, true}, {"2g", 2 << 30, true}, {"2G", 2 << 30, true},
		{"3gb", 3 << 30, true}, {"1.5m", 3 << 19, true}, {"1t", 1 << 40, true},
		{"", 0, false}, {"g", 0, false}, {"-1g", 0, false}, {"lots", 0, false}, {"1x", 0, false}, {"inf", 0, false},
		{"0", 0, true}, {"1048576", 1 << 20, true}, {"512b", 512, true}, {"1K", 1 << 10, true}, {"64mb", 64 << 20, true},
		{"64MiB", 64 << 20, true}, {"3G", 3 << 30, true}, {" 2g ", 2 << 30, true}, {"1.5g", 3 << 29, true},
		{"-1", 0, false}, {"0x10", 0, false}, {"1e3", 0, false}, {"1e3m", 0, false}, {"+5", 0, false}, {"NaN", 0, false},
		{"5i", 0, false}, {".", 0, false}, {"1.2.3", 0, false},
		// Too large for 63 bits: refused, not wrapped to a negative size.
		{"99999999999999999999", 0, false}, {"9999999999t", 0, false}, {"8388608t", 0, false}, {"8388607t", 8388607 << 40, true},
	}
	for _, tc := range cases {
		got, err := ParseByteSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseByteSize(%q) = %d, %v", tc.in, got, err)
		}
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"model", "fallbackModels", "tools", "skills", "sandbox"}
	for in, want := range map[string]string{"modle": "model", "tool": "tools", "sandbx": "sandbox", "fallbackModel": "fallbackModels", "zzz": "", "image": ""} {
		if got := suggest(in, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(specExample))
	f.Add([]byte(minimal("", "", "")))
	f.Add([]byte(`{a: [1, 'x', {b: null}], c: 0x1f, d: -Infinity, e: "\u0041"}`))
	f.Add([]byte(`{llm: {providers: {p: {apiKey: "${X:-y}"}}}, agents: {a: {model: {provider: "p", model: 1}}}}`))
	f.Add([]byte("{\"\\u0061\": /* c */ 1,}"))
	f.Add([]byte(minimal("", `pluginConfigs: { p: { a: [1, {b: "x"}], o: null } },`, `plugins: { p: { config: { a: [{c: 1}], typo: 1, o: { n: "1" } } } },`)))
	// p's schema exercises the mapping of schema errors back to the file.
	builtins := map[string]*Manifest{"p": {Name: "p", DefaultConfig: map[string]any{"o": map[string]any{"n": 1.0}},
		ConfigSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"a"}, "properties": map[string]any{
			"a": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "number"}}, "additionalProperties": false}},
			"o": map[string]any{"type": "object", "required": []any{"n"}, "properties": map[string]any{"n": map[string]any{"type": "number"}}},
		}}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.json5", data, &LoadOptions{LookupEnv: func(string) (string, bool) { return "v", true }, Builtins: builtins})
		if err == nil && cfg == nil {
			t.Fatal("nil config without error")
		}
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v is not a non-empty ErrorList", err)
			}
		}
	})
}

// TestPluginEgress: plugins.<p>.egress has sandbox.egress's shape and rules,
// errors point at the key in the file, and it is refused on a plugin the
// egress proxy does not serve (a built-in, a "run" plugin), where it would
// only look like a confinement.
func TestPluginEgress(t *testing.T) {
	cases := []struct {
		name   string
		plugin string // plugins.ts or plugins.git
		want   []string
	}{
		{"absent", `ts: { path: "plugins/ts" }`, nil},
		{"valid", `ts: { path: "plugins/ts", egress: { allow: ["api.github.com:443", "*.npmjs.org", "10.0.0.0/8"], deny: ["evil.example"], credentials: [{ host: "api.github.com", header: "Authorization", value: "Bearer x" }] } }`, nil},
		{"empty allow", `ts: { path: "plugins/ts", egress: { allow: [] } }`, nil},
		{"bad rules", `ts: { path: "plugins/ts", egress: { allow: ["ok.org", "x.org:99999"], deny: ["[::1"] } }`,
			[]string{`plugins.ts.egress.allow[1]: rule "x.org:99999": invalid port "99999"`, `plugins.ts.egress.deny[0]: rule "[::1": missing ']'`}},
		{"position", `ts: { path: "plugins/ts", egress: { allow: [""] } }`,
			[]string{`config.json5:11:45: plugins.ts.egress.allow[0]: empty rule`}},
		{"bad credentials", `ts: { path: "plugins/ts", egress: { credentials: [{ host: "*.github.com", header: "Host", value: "" }] } }`,
			[]string{`plugins.ts.egress.credentials[0].host: want a host name without wildcard or port, got "*.github.com"`, `plugins.ts.egress.credentials[0].header: want an HTTP header name other than Host, got "Host"`, `plugins.ts.egress.credentials[0].value: want a non-empty value`}},
		{"not a script plugin", `git: { path: "plugins/git", egress: { allow: ["x.org"] } }`,
			[]string{`plugins.git.egress: plugin "git" is not a TypeScript/JavaScript plugin; egress applies only to those`}},
		{"built-in", `web: { egress: { deny: [] } }`,
			[]string{`plugins.web.egress: plugin "web" is not a TypeScript/JavaScript plugin; egress applies only to those`}},
		{"unknown key", `ts: { path: "plugins/ts", egress: { alow: ["x.org"] } }`,
			[]string{`plugins.ts.egress.alow: unknown key "alow" (did you mean "allow"?)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.write("plugins/ts/plugin.json", `{"name":"ts","description":"d"}`)
			f.write("plugins/ts/index.ts", `export function createPlugin() {}`)
			f.write("plugins/git/plugin.json", `{"name":"git","description":"d"}`)
			p := f.write("config.json5", minimal("", "", "plugins: {\n"+c.plugin+" },"))
			opts := &LoadOptions{Builtins: map[string]*Manifest{"git": {Name: "git"}, "web": {Name: "web"}},
				CheckNode: func(string) error { return nil }}
			cfg, err := Load(p, opts)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("loaded %+v; want errors %q", cfg.Plugins, c.want)
			}
			wantErrors(t, err, c.want...)
		})
	}
}

// TestPluginConfineKeys: plugins.<p>.confine and allowChildProcess load as
// written; a wrong type is an error at its key.
func TestPluginConfineKeys(t *testing.T) {
	f := newFixture(t)
	f.write("plugins/ts/plugin.json", `{"name":"ts","description":"d"}`)
	f.write("plugins/ts/index.ts", `export function createPlugin() {}`)
	opts := &LoadOptions{CheckNode: func(string) error { return nil }}
	p := f.write("config.json5", minimal("", `tools: ["ts"],`, `plugins: { ts: { path: "plugins/ts", confine: false, allowChildProcess: true } },`))
	cfg, err := Load(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Plugins["ts"]; c.Confine == nil || *c.Confine || !c.AllowChildProcess {
		t.Errorf("confine = %v, allowChildProcess = %v; want false, true", c.Confine, c.AllowChildProcess)
	}
	p = f.write("config.json5", minimal("", `tools: ["ts"],`, `plugins: { ts: { path: "plugins/ts", confine: "no" } },`))
	if _, err := Load(p, opts); err == nil || !strings.Contains(err.Error(), "confine") {
		t.Errorf("confine: \"no\" loaded: %v", err)
	}
}
