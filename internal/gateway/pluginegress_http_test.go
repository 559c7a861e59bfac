package gateway

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/plugin/jail"
	"github.com/beige-dev/beige/internal/testutil"
)

// nodeHTTPPlugin makes, in its start(), the requests a plugin's libraries
// make with node:http/node:https and their default agents, and writes what
// came back into its data folder.
const nodeHTTPPlugin = `
import http from "node:http";
import https from "node:https";
import fs from "node:fs";
import { spawnSync } from "node:child_process";
const collect = (req, resolve) => {
  req.setTimeout(10000, () => req.destroy(new Error("timeout")));
  req.on("error", (e) => resolve("fail " + (e.code ? e.code + " " : "") + e.message));
  req.on("response", (res) => { let b = ""; res.setEncoding("utf8"); res.on("data", (d) => b += d); res.on("end", () => resolve(res.statusCode + " " + b.trim())); });
};
const get = (mod, url) => new Promise((resolve) => collect(mod.get(url), resolve));
export function createPlugin(config, ctx) {
  return {
    register() {},
    async start() {
      const out = {
        http: await get(http, "http://pub.test/h"),
        https: await get(https, "https://example.com/s"),
        lib: await new Promise((resolve) => { const r = https.request({ hostname: "example.com", path: "/lib", method: "POST" }); collect(r, resolve); r.end("{}"); }),
        refused: await get(http, "http://lo.test/x"),
      };
      // A child (allowChildProcess) trusts the egress CA through the bundle.
      const c = spawnSync("curl", ["-sS", "--max-time", "10", "https://example.com/curl"], { encoding: "utf8" });
      out.curl = c.error ? "fail " + c.error.message : c.status + " " + (c.stdout + c.stderr).trim();
      fs.writeFileSync(ctx.dataDir + "/result.json", JSON.stringify(out));
    },
  };
}
`

// TestPluginNodeHTTPEgress: a jailed plugin's node:http and node:https
// requests with the default agents (http.get, https.get, a library's
// https.request) reach public hosts through its egress proxy, audited as
// plugin:<name>; plugins.<p>.egress.credentials are injected into its
// https requests (the host trusts the egress CA); a host the policy
// refuses answers 403 saying why.
func TestPluginNodeHTTPEgress(t *testing.T) {
	node := tsNode(t)
	if runtime.GOOS != "linux" {
		t.Skip("the plugin jail needs Linux")
	}
	if err := jail.Available(); err != nil {
		t.Skipf("no plugin jail here: %v", err)
	}
	t.Setenv("BEIGE_TEST_PLUGIN_TOKEN", "tok-PluginS3cret")
	up := testutil.NewUpstreams(t)

	dir := filepath.Join(t.TempDir(), "net")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"net","description":"d"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.js"), []byte(nodeHTTPPlugin), 0o644)
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"ag"},
		plugins: fmt.Sprintf(`net: { path: %q, node: %q, allowChildProcess: true, egress: { allow: ["pub.test", "example.com", "lo.test"],
			credentials: [{ host: "example.com", header: "Authorization", value: "Bearer ${BEIGE_TEST_PLUGIN_TOKEN}" }] } }`, dir, node),
		options: func(o *Options) {
			o.Egress = &egress.Options{
				RootCAs:  up.Roots,
				Resolver: testutil.Resolver{"pub.test": {up.Public}, "example.com": {up.Public}, "lo.test": {netip.MustParseAddr("127.0.0.1")}},
				Dial:     up.Dial,
			}
		},
	})
	resFile := filepath.Join(g.home.DataDir(), "net", "result.json")
	var data []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(resFile); err == nil && len(b) > 0 {
			data = b
			break
		}
	}
	got := map[string]string{}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("the plugin's results %q: %v", data, err)
	}
	want := map[string]string{"http": "200 plain pub.test/h", "https": "200 tls example.com/s", "lib": "200 tls example.com/lib", "curl": "0 tls example.com/curl"}
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		delete(want, "curl")
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	if !strings.HasPrefix(got["refused"], "403 ") || !strings.Contains(got["refused"], "loopback") {
		t.Errorf("refused = %q, want a 403 that says loopback", got["refused"])
	}
	if up.Auth("tls /s") != "Bearer tok-PluginS3cret" || up.Auth("tls /lib") != "Bearer tok-PluginS3cret" || up.Auth("plain /h") != "" || (want["curl"] != "" && up.Auth("tls /curl") != "Bearer tok-PluginS3cret") {
		t.Errorf("the Authorization headers upstream saw: %v", up.Auths())
	}
	// The bundle beside the socket: the host's roots, then the CA.
	sockDir := filepath.Dir(filepath.Join(g.home.SocketsDir(), "_plugins", "net", egress.SocketName))
	bundle, err := os.ReadFile(filepath.Join(sockDir, PluginCABundleFile))
	caPEM, _ := os.ReadFile(filepath.Join(sockDir, EgressCAFile))
	if err != nil || len(caPEM) == 0 || !strings.HasSuffix(string(bundle), string(caPEM)) {
		t.Errorf("the plugin's CA bundle: %v, %d bytes", err, len(bundle))
	}
	nets := netRecords(t, g, 4)
	seen := map[string]string{}
	for _, r := range nets {
		if r.Agent != PluginEgressAgent("net") {
			t.Errorf("a record of %q: %+v", r.Agent, r)
		}
		seen[r.Host+" "+r.Method] = r.Decision
	}
	for k, d := range map[string]string{"pub.test GET": audit.DecisionAllowed, "example.com CONNECT": audit.DecisionAllowed, "lo.test GET": audit.DecisionDenied} {
		if seen[k] != d {
			t.Errorf("record %s = %q, want %q (all: %v)", k, seen[k], d, seen)
		}
	}
}
