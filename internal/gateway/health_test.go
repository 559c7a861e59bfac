package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
)

type diskProblem string

func (d diskProblem) Problem() string { return string(d) }

// A full or low disk under $BEIGE_HOME makes /api/health degraded, saying so.
func TestHealthReportsDisk(t *testing.T) {
	for _, c := range []struct {
		disk, status string
	}{
		{"", "ok"},
		{"disk full/low: 3 MB free on /srv", "degraded"},
	} {
		g := &Gateway{opts: Options{Disk: diskProblem(c.disk)}}
		g.ready.Store(true)
		h := g.Health(t.Context())
		if h.Status != c.status || h.Disk != c.disk {
			t.Errorf("disk %q: health %+v, want status %q", c.disk, h, c.status)
		}
	}
}

// getHealth reads GET /api/health as a client does.
func getHealth(t *testing.T, g *testGateway) proto.Health {
	t.Helper()
	resp, err := http.Get(g.URL() + "/api/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h proto.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHealthNamesPluginWithoutNode: a TypeScript plugin whose Node.js is
// missing does not keep the gateway from serving; /api/health is degraded
// and names the plugin and why.
func TestHealthNamesPluginWithoutNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nonode")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"nonode","description":"Needs Node."}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.js"), []byte(`export function createPlugin() { return { register() {} }; }`), 0o644)
	g := startGatewayWith(t, gatewaySetup{names: []string{"a"}, plugins: fmt.Sprintf("nonode: { path: %q, node: %q }", dir, "/nonexistent/node")})
	h := getHealth(t, g)
	if h.Status != "degraded" || !strings.Contains(h.Plugins["nonode"], "/nonexistent/node") || !strings.Contains(h.Plugins["nonode"], "needs Node.js 22 or later") || len(h.Agents) != 0 {
		t.Errorf("health %+v", h)
	}
}

// TestHealthNamesPluginsThatCannotRun: a TypeScript plugin whose
// createPlugin throws (retried with backoff) is named in /api/health with
// the error and makes it degraded; one that runs is not named.
func TestHealthNamesPluginsThatCannotRun(t *testing.T) {
	node := tsNode(t)
	dir := t.TempDir()
	for name, src := range map[string]string{
		"fine":   `export function createPlugin() { return { register(r) { r.tool({ name: "fine", description: "d", handler: async () => ({ output: "ok", exitCode: 0 }) }); } }; }`,
		"broken": `export function createPlugin() { throw new Error("boom"); }`,
	} {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, "plugin.json"), []byte(`{"name":"`+name+`","description":"d"}`), 0o644)
		os.WriteFile(filepath.Join(dir, name, "index.js"), []byte(src), 0o644)
	}
	g := startGatewayWith(t, gatewaySetup{
		names:   []string{"a"},
		plugins: fmt.Sprintf("fine: { path: %q, node: %q }, broken: { path: %q, node: %q }", filepath.Join(dir, "fine"), node, filepath.Join(dir, "broken"), node),
	})
	h := getHealth(t, g)
	if h.Status != "degraded" || len(h.Plugins) != 1 || !strings.Contains(h.Plugins["broken"], "plugin broken is restarting") || !strings.Contains(h.Plugins["broken"], "boom") {
		t.Errorf("health %+v", h)
	}
}
