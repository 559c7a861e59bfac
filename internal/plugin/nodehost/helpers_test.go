package nodehost

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/testutil"
)

// testNode finds a Node.js >= 22 for the tests: $BEIGE_NODE, the cache of
// scripts/ensure-node22.sh, or node in PATH; it skips the test without one.
func testNode(t testing.TB) string {
	t.Helper()
	cands := []string{os.Getenv(NodeEnv)}
	if c := os.Getenv("BEIGE_NODE_CACHE"); c != "" {
		cands = append(cands, filepath.Join(c, "bin", "node"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(h, ".cache", "beige", "node22", "bin", "node"))
	}
	if p, err := exec.LookPath("node"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if n, err := FindNode(context.Background(), c); err == nil {
			return n.Path
		}
	}
	t.Skip("no Node.js 22 or later: run scripts/ensure-node22.sh or set BEIGE_NODE")
	return ""
}

// logBuf collects log records as text, safe for concurrent use.
type logBuf struct{ testutil.SyncBuffer }

// waitLog waits until the log contains s.
func (l *logBuf) waitLog(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", s, l.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tsPlugin is a plugin folder written for a test, in the original's format.
type tsPlugin struct {
	name     string
	manifest string // plugin.json; default: a minimal one
	file     string // index.ts, or index.js when it ends in .js
	source   string
	// dir, when set, is an existing plugin folder (the toolkit's) used as is.
	dir       string
	config    map[string]any // plugins.<name>.config; default {"greeting":"hi"}
	allowRead []string
	timeout   float64 // plugins.<name>.timeout
	node      string  // plugins.<name>.node; default the tests' Node.js
}

type fixture struct {
	host *plugin.Host
	home home.Home
	log  *logBuf
	dirs map[string]string // plugin folders
}

// newFixture writes the plugins and starts a Host with them; agents maps an
// agent to its tools.
func newFixture(t *testing.T, agents map[string][]string, plugins ...tsPlugin) (*fixture, error) {
	t.Helper()
	node := testNode(t)
	root := t.TempDir()
	hm := home.Home{Dir: filepath.Join(root, "home")}
	cfg := &config.Config{Plugins: map[string]*config.Plugin{}, Agents: map[string]*config.Agent{}}
	f := &fixture{home: hm, log: &logBuf{}, dirs: map[string]string{}}
	for _, p := range plugins {
		dir := filepath.Join(root, "plugins", p.name)
		if p.dir != "" {
			dir = p.dir
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		m := p.manifest
		if m == "" {
			m = fmt.Sprintf(`{"name":%q,"description":"test plugin"}`, p.name)
		}
		file := p.file
		if file == "" {
			file = "index.ts"
		}
		if p.dir == "" {
			if err := os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(m), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, file), []byte(p.source), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		man, err := config.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		pcfg := p.config
		if pcfg == nil {
			pcfg = map[string]any{"greeting": "hi"}
		}
		pnode := node
		if p.node != "" {
			pnode = p.node
		}
		cfg.Plugins[p.name] = &config.Plugin{Path: dir, Manifest: man, Node: pnode, Config: pcfg, AllowRead: p.allowRead, Timeout: p.timeout}
		cfg.PluginOrder = append(cfg.PluginOrder, p.name)
		f.dirs[p.name] = dir
	}
	for a, tools := range agents {
		ws := filepath.Join(root, "ws-"+a)
		os.MkdirAll(ws, 0o755)
		cfg.Agents[a] = &config.Agent{Tools: tools, WorkspaceDir: ws}
		cfg.AgentOrder = append(cfg.AgentOrder, a)
	}
	lg, err := audit.Open(filepath.Join(root, "audit.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	h, err := plugin.NewHost(cfg, &plugin.Options{
		Home: hm, Audit: lg, Builtins: map[string]plugin.Builtin{},
		Logger: slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		h.Close(ctx)
	})
	f.host = h
	return f, nil
}

func mustFixture(t *testing.T, agents map[string][]string, plugins ...tsPlugin) *fixture {
	t.Helper()
	f, err := newFixture(t, agents, plugins...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) call(agent, tool string, args ...string) proto.ToolResponse {
	return f.host.Handle(context.Background(), agent, proto.ToolRequest{
		Type: proto.ToolRequestType, Tool: tool, Args: args,
		SessionContext: &proto.SessionContext{SessionKey: "tui:" + agent + ":default", Channel: "tui"},
	})
}

// shortTimeouts makes restarts and timeouts fast for a test.
func shortTimeouts(t *testing.T, call time.Duration) {
	oc, ob := DefaultCallTimeout, backoffMin
	DefaultCallTimeout, backoffMin = call, 50*time.Millisecond
	t.Cleanup(func() { DefaultCallTimeout, backoffMin = oc, ob })
}

func (l *logBuf) reset() { l.Reset() }
