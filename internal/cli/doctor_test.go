package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/beige-dev/beige/internal/audit"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/doctor"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// fakeEngine answers as a healthy engine holding the images in has.
type fakeEngine struct {
	down bool
	has  map[string]bool
}

func (e fakeEngine) EngineVersion(context.Context) (string, string, error) {
	if e.down {
		return "", "", errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")
	}
	return "20.10.24", "1.41", nil
}

func (e fakeEngine) HasImage(_ context.Context, img string) (bool, error) { return e.has[img], nil }

// okDoctorDeps are checks that all pass: an engine with the default image,
// the helper binary found, node on $PATH, every key accepted, room on disk.
func okDoctorDeps() doctorDeps {
	return doctorDeps{
		engine: func() (doctor.Engine, func(), error) {
			return fakeEngine{has: map[string]bool{config.DefaultSandboxImage: true}}, nil, nil
		},
		helper:        func(home.Home) (string, error) { return "/opt/beige/bin/beige-sandbox", nil },
		lookPath:      func(p string) (string, error) { return "/usr/bin/" + p, nil },
		providerCheck: func(context.Context, string, *config.Provider, *config.Config) error { return nil },
		diskFree:      func(string) (uint64, error) { return 50 << 30, nil },
		jailProbe:     func() error { return nil },
	}
}

// addTSPlugin puts a TypeScript plugin named tsplug into the template's
// config, with more keys of its entry, run by a fake Node.js 22.
func (e *doctorEnv) addTSPlugin(keys string) {
	e.t.Helper()
	dir := filepath.Join(e.home, "plugins", "tsplug")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"tsplug","description":"d"}`), 0o600)
	os.WriteFile(filepath.Join(dir, "index.ts"), []byte("export function createPlugin() { return { register() {} }; }\n"), 0o600)
	node := filepath.Join(e.home, "fake-node")
	os.WriteFile(node, []byte("#!/bin/sh\necho v22.12.0\n"), 0o700)
	e.edit(`// plugins: {`, fmt.Sprintf(`plugins: { tsplug: { path: "./plugins/tsplug", node: %q, %s } },
  // plugins: {`, node, keys))
}

// doctorEnv is a fresh $BEIGE_HOME set up from the template, a fake $HOME
// with ~/.ssh and ~/.aws, and the template's one variable set.
type doctorEnv struct {
	t              *testing.T
	home, userHome string
	h              home.Home
}

func newDoctorEnv(t *testing.T) *doctorEnv {
	t.Helper()
	e := &doctorEnv{t: t, home: withHome(t), userHome: t.TempDir()}
	e.h = home.Home{Dir: e.home}
	t.Setenv("HOME", e.userHome)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
	for _, d := range []string{".ssh", ".aws"} {
		if err := os.Mkdir(filepath.Join(e.userHome, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := setupHome(e.h); err != nil {
		t.Fatal(err)
	}
	return e
}

// edit replaces old (which must be in the config) by new.
func (e *doctorEnv) edit(old, new string) {
	e.t.Helper()
	b, err := os.ReadFile(e.h.Config())
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		e.t.Fatalf("the template has no %q", old)
	}
	if err := os.WriteFile(e.h.Config(), []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// sandboxAdd adds JSON5 members to the template agent's sandbox.
func (e *doctorEnv) sandboxAdd(members string) {
	e.edit(`image: "beige-sandbox:latest",`, `image: "beige-sandbox:latest", `+members+`,`)
}

// runDoctor runs `beige doctor --json [args]` with deps and returns the
// exit code and the findings.
func runDoctor(t *testing.T, deps doctorDeps, args ...string) (int, []doctor.Finding, string) {
	t.Helper()
	saved := defaultDoctorDeps
	defaultDoctorDeps = deps
	defer func() { defaultDoctorDeps = saved }()
	code, out, errOut := run(t, append([]string{"doctor", "--json"}, args...)...)
	var fs []doctor.Finding
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("doctor --json printed no findings array (%v): %q, stderr %q", err, out, errOut)
	}
	return code, fs, errOut
}

// TestDoctorTemplateClean: the config `beige setup` writes has nothing
// worse than a warning (with the engine checked, through a fake).
func TestDoctorTemplateClean(t *testing.T) {
	newDoctorEnv(t)
	code, fs, errOut := runDoctor(t, okDoctorDeps())
	if code != ExitOK {
		t.Errorf("exit %d, want 0; stderr %q", code, errOut)
	}
	for _, f := range fs {
		if f.Severity == doctor.Error || f.Severity == doctor.Warning {
			t.Errorf("the template gives a %s: %+v", f.Severity, f)
		}
	}
	if !hasFinding(fs, doctor.Info, "engine.version") {
		t.Errorf("no engine version among %+v", fs)
	}
}

func hasFinding(fs []doctor.Finding, sev doctor.Severity, id string) bool {
	for _, f := range fs {
		if f.Severity == sev && f.ID == id {
			return true
		}
	}
	return false
}

// TestDoctorFindsEachUnsafeSetting sets one unsafe setting (or one broken
// piece of the installation) at a time on the template and checks that
// doctor reports it, with its severity and a fix, and exits accordingly.
func TestDoctorFindsEachUnsafeSetting(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *doctorEnv, d *doctorDeps)
		args  []string
		sev   doctor.Severity
		id    string
	}{
		{"engine down", func(e *doctorEnv, d *doctorDeps) {
			d.engine = func() (doctor.Engine, func(), error) { return fakeEngine{down: true}, nil, nil }
		}, nil, doctor.Error, "engine.unreachable"},
		{"image missing", func(e *doctorEnv, d *doctorDeps) {
			d.engine = func() (doctor.Engine, func(), error) { return fakeEngine{}, nil, nil }
		}, nil, doctor.Error, "image.missing"},
		{"helper missing", func(e *doctorEnv, d *doctorDeps) {
			d.helper = func(home.Home) (string, error) {
				return "", errors.New("the in-sandbox binary beige-sandbox was not found")
			}
		}, nil, doctor.Error, "helper.missing"},
		{"node missing for a plugin", func(e *doctorEnv, d *doctorDeps) {
			dir := filepath.Join(e.home, "plugins", "tsplug")
			os.MkdirAll(dir, 0o700)
			os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"tsplug","description":"d","provides":{"tools":["tsplug"]},"run":{"command":["node","index.js"]}}`), 0o600)
			os.WriteFile(filepath.Join(dir, "index.js"), []byte("//\n"), 0o600)
			e.edit(`// plugins: {`, `plugins: { tsplug: { path: "./plugins/tsplug" } },
  // plugins: {`)
			d.lookPath = func(p string) (string, error) { return "", errors.New("not found") }
		}, nil, doctor.Error, "node.missing"},
		{"no jail for a confined TypeScript plugin", func(e *doctorEnv, d *doctorDeps) {
			e.addTSPlugin("")
			d.jailProbe = func() error { return errors.New("probe plugin jail: start in new namespaces: operation not permitted") }
		}, nil, doctor.Error, "jail.unavailable"},
		{"a TypeScript plugin without its jail", func(e *doctorEnv, d *doctorDeps) {
			e.addTSPlugin("confine: false")
		}, nil, doctor.Warning, "plugin.unconfined"},
		{"API beyond loopback without a token", func(e *doctorEnv, d *doctorDeps) {
			e.edit(`host: "127.0.0.1",`, `host: "0.0.0.0",`)
		}, nil, doctor.Error, "api.open-without-token"},
		{"metrics beyond loopback without a token", func(e *doctorEnv, d *doctorDeps) {
			e.edit(`host: "127.0.0.1",`, `host: "127.0.0.1", metrics: { listen: "0.0.0.0:9464" },`)
		}, nil, doctor.Error, "metrics.open-without-token"},
		{"a key written into the file", func(e *doctorEnv, d *doctorDeps) {
			e.edit(`apiKey: "${ANTHROPIC_API_KEY}"`, `apiKey: "sk-ant-literal-0123456789"`)
		}, nil, doctor.Warning, "secret.in-file"},
		{"a token written into the file", func(e *doctorEnv, d *doctorDeps) {
			e.edit(`// authToken: "${BEIGE_TOKEN}",`, `authToken: "literal-token-0123456789",`)
		}, nil, doctor.Warning, "secret.in-file"},
		{"an egress credential written into the file", func(e *doctorEnv, d *doctorDeps) {
			e.sandboxAdd(`egress: { credentials: [{ host: "api.github.com", header: "Authorization", value: "Bearer ghp_literal0123456789" }] }`)
		}, nil, doctor.Warning, "secret.in-file"},
		{"home open to others", func(e *doctorEnv, d *doctorDeps) {
			os.Chmod(e.home, 0o755)
		}, nil, doctor.Warning, "perms.home"},
		{"sockets open to others", func(e *doctorEnv, d *doctorDeps) {
			os.Chmod(e.h.SocketsDir(), 0o755)
		}, nil, doctor.Error, "perms.sockets"},
		{"config readable by others", func(e *doctorEnv, d *doctorDeps) {
			os.Chmod(e.h.Config(), 0o644)
		}, nil, doctor.Error, "perms.config"},
		{"network open", func(e *doctorEnv, d *doctorDeps) { e.sandboxAdd(`network: "open"`) }, nil, doctor.Warning, "agent.network-open"},
		{"network bridge", func(e *doctorEnv, d *doctorDeps) { e.sandboxAdd(`network: "bridge"`) }, nil, doctor.Warning, "agent.network-open"},
		{"user root", func(e *doctorEnv, d *doctorDeps) { e.sandboxAdd(`user: "root"`) }, nil, doctor.Warning, "agent.user-root"},
		{"user 0:0", func(e *doctorEnv, d *doctorDeps) { e.sandboxAdd(`user: "0:0"`) }, nil, doctor.Warning, "agent.user-root"},
		{"no CPU limit", func(e *doctorEnv, d *doctorDeps) { e.sandboxAdd(`cpus: -1`) }, nil, doctor.Warning, "agent.no-cpu-limit"},
		{"no process limit", func(e *doctorEnv, d *doctorDeps) { e.sandboxAdd(`pidsLimit: -1`) }, nil, doctor.Warning, "agent.no-pids-limit"},
		{"mount of /", func(e *doctorEnv, d *doctorDeps) { e.sandboxAdd(`extraMounts: ["/:/host:ro"]`) }, nil, doctor.Error, "agent.mount-sensitive"},
		{"mount of the Docker socket", func(e *doctorEnv, d *doctorDeps) {
			e.sandboxAdd(`extraMounts: [{ source: "/var/run/docker.sock", target: "/var/run/docker.sock" }]`)
		}, nil, doctor.Error, "agent.mount-sensitive"},
		{"mount of ~/.ssh", func(e *doctorEnv, d *doctorDeps) {
			e.sandboxAdd(`extraMounts: ["` + filepath.Join(e.userHome, ".ssh") + `:/keys:ro"]`)
		}, nil, doctor.Error, "agent.mount-sensitive"},
		{"mount of ~/.aws", func(e *doctorEnv, d *doctorDeps) {
			e.sandboxAdd(`extraMounts: ["` + filepath.Join(e.userHome, ".aws") + `:/aws:ro"]`)
		}, nil, doctor.Error, "agent.mount-sensitive"},
		{"mount of the folder holding ~/.ssh", func(e *doctorEnv, d *doctorDeps) {
			e.sandboxAdd(`extraMounts: ["` + e.userHome + `:/home-ro:ro"]`)
		}, nil, doctor.Error, "agent.mount-sensitive"},
		{"mount of a symlink to ~/.ssh", func(e *doctorEnv, d *doctorDeps) {
			link := filepath.Join(t.TempDir(), "innocent")
			os.Symlink(filepath.Join(e.userHome, ".ssh"), link)
			e.sandboxAdd(`extraMounts: ["` + link + `:/data:ro"]`)
		}, nil, doctor.Error, "agent.mount-sensitive"},
		{"mount of BEIGE_HOME", func(e *doctorEnv, d *doctorDeps) {
			e.sandboxAdd(`extraMounts: ["` + e.h.DataDir() + `:/data:ro"]`)
		}, nil, doctor.Error, "agent.mount-sensitive"},
		{"rw mount outside the workspace", func(e *doctorEnv, d *doctorDeps) {
			e.sandboxAdd(`extraMounts: ["` + t.TempDir() + `:/data"]`)
		}, nil, doctor.Warning, "agent.mount-rw-outside"},
		{"a key the provider rejects", func(e *doctorEnv, d *doctorDeps) {
			d.providerCheck = func(context.Context, string, *config.Provider, *config.Config) error {
				return errors.Join(doctor.ErrKeyRejected, errors.New("HTTP 401: invalid x-api-key"))
			}
		}, []string{"--online"}, doctor.Error, "provider.key-rejected"},
		{"audit chain broken", func(e *doctorEnv, d *doctorDeps) {
			// A real chained log with one byte of its second record edited.
			l, err := audit.Open(e.h.AuditLog(), &audit.Options{HeadPath: e.h.AuditHead()})
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range []string{"exec", "read", "write"} {
				if err := l.Log(audit.Record{Agent: "a", Type: audit.TypeCoreTool, Tool: tool, Phase: audit.PhaseFinished, Decision: audit.DecisionAllowed}); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
			b, _ := os.ReadFile(e.h.AuditLog())
			i := bytes.Index(b, []byte(`"read"`))
			b[i+1] = 'R'
			os.WriteFile(e.h.AuditLog(), b, 0o600)
		}, nil, doctor.Error, "audit.chain-broken"},
		{"disk nearly full", func(e *doctorEnv, d *doctorDeps) {
			d.diskFree = func(string) (uint64, error) { return 100 << 20, nil }
		}, nil, doctor.Error, "disk.low"},
		{"disk low", func(e *doctorEnv, d *doctorDeps) {
			d.diskFree = func(string) (uint64, error) { return 1 << 30, nil }
		}, nil, doctor.Warning, "disk.low"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newDoctorEnv(t)
			deps := okDoctorDeps()
			tt.setup(e, &deps)
			code, fs, errOut := runDoctor(t, deps, tt.args...)
			var got *doctor.Finding
			for i := range fs {
				if fs[i].ID == tt.id {
					got = &fs[i]
				}
			}
			if got == nil {
				t.Fatalf("no %s finding; got %+v (stderr %q)", tt.id, fs, errOut)
			}
			if got.Severity != tt.sev || got.Fix == "" || got.Message == "" {
				t.Errorf("finding %+v, want severity %s with a message and a fix", *got, tt.sev)
			}
			for _, f := range fs {
				if f.ID != tt.id && (f.Severity == doctor.Error || f.Severity == doctor.Warning) {
					t.Errorf("another finding besides %s: %+v", tt.id, f)
				}
			}
			want := ExitOK
			if tt.sev == doctor.Error {
				want = ExitFailure
			}
			if code != want {
				t.Errorf("exit %d, want %d", code, want)
			}
		})
	}
}

// TestDoctorBadConfig: a config that does not load is an error finding
// (exit 1), not a failure of doctor itself.
func TestDoctorBadConfig(t *testing.T) {
	e := newDoctorEnv(t)
	e.edit(`model: "claude-sonnet-4-6",`, `model: "claude-sonnet-4-6", bogus: 1,`)
	code, fs, _ := runDoctor(t, okDoctorDeps())
	if code != ExitFailure || !hasFinding(fs, doctor.Error, "config.invalid") {
		t.Errorf("exit %d, findings %+v; want 1 and config.invalid", code, fs)
	}
}

// TestDoctorText: without --json the findings are printed with their fixes.
func TestDoctorText(t *testing.T) {
	e := newDoctorEnv(t)
	e.edit(`host: "127.0.0.1",`, `host: "0.0.0.0",`)
	saved := defaultDoctorDeps
	defaultDoctorDeps = okDoctorDeps()
	defer func() { defaultDoctorDeps = saved }()
	code, out, _ := run(t, "doctor")
	if code != ExitFailure || !strings.Contains(out, "error   api.open-without-token") || !strings.Contains(out, "fix: set gateway.authToken") || !strings.Contains(out, "1 errors, 0 warnings") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

// TestCheckProviderKey: --online's check sends one request with the
// configured key; a 401 is a rejected key, a 200 an accepted one, and a
// 500 says nothing about the key.
func TestCheckProviderKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resp     llmtest.Response
		rejected bool
		ok       bool
	}{
		{"accepted", llmtest.Text("pong"), false, true},
		{"rejected", llmtest.Error(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, nil), true, false},
		{"forbidden", llmtest.Error(403, `{"type":"error","error":{"type":"permission_error","message":"no"}}`, nil), true, false},
		{"server error", llmtest.Error(500, `{"type":"error","error":{"type":"api_error","message":"boom"}}`, nil), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewAnthropic(t)
			srv.Enqueue(tc.resp, tc.resp, tc.resp, tc.resp)
			p := &config.Provider{API: "anthropic-messages", BaseURL: srv.URL(), APIKey: "sk-ant-checked"}
			cfg := &config.Config{
				LLM:        config.LLM{Providers: map[string]*config.Provider{"scripted": p}},
				Agents:     map[string]*config.Agent{"a": {Model: config.ModelRef{Provider: "scripted", Model: "m1"}}},
				AgentOrder: []string{"a"},
			}
			err := checkProviderKey(context.Background(), "scripted", p, cfg)
			if got := errors.Is(err, doctor.ErrKeyRejected); got != tc.rejected {
				t.Errorf("rejected = %v (%v), want %v", got, err, tc.rejected)
			}
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want ok %v", err, tc.ok)
			}
			if srv.Count() < 1 || srv.Last().APIKey() != "sk-ant-checked" {
				t.Errorf("requests %d; the check did not send the configured key", srv.Count())
			}
		})
	}
}
