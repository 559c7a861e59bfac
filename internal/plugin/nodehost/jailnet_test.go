package nodehost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/egress/trust"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/plugin/jail"
	"github.com/beige-dev/beige/internal/testutil"
)

// netPlugin's tool runs each named probe and reports "ok <body>" or
// "fail <error>" (an HTTP status other than 200 is "status <code> <body>").
const netPlugin = `
import http from "node:http";
import https from "node:https";
import { Agent as HttpsAgent } from "node:https";
import { createRequire } from "node:module";
import net from "node:net";
import { spawnSync } from "node:child_process";
const require = createRequire(import.meta.url);
const collect = (res, resolve) => {
  let b = "";
  res.setEncoding("utf8");
  res.on("data", (d) => b += d);
  res.on("end", () => resolve(res.statusCode === 200 ? "ok " + b : "status " + res.statusCode + " " + b.trim()));
};
const get = (mod, url, opts) => new Promise((resolve) => {
  const req = mod.get(url, opts ?? {}, (res) => collect(res, resolve));
  req.setTimeout(10000, () => req.destroy(new Error("timeout")));
  req.on("error", (e) => resolve("fail " + (e.code ? e.code + " " : "") + e.message));
});
// What a library does: https.request with default options, a body.
const lib = () => new Promise((resolve) => {
  const req = https.request({ hostname: "example.com", path: "/lib", method: "POST", headers: { "content-type": "application/json" } }, (res) => collect(res, resolve));
  req.setTimeout(10000, () => req.destroy(new Error("timeout")));
  req.on("error", (e) => resolve("fail " + (e.code ? e.code + " " : "") + e.message));
  req.end(JSON.stringify({ q: 1 }));
});
const ws = () => new Promise((resolve) => {
  const w = new WebSocket("ws://ws.test/ws");
  const t = setTimeout(() => { w.close(); resolve("fail timeout"); }, 10000);
  w.onopen = () => { clearTimeout(t); w.close(); resolve("ok open"); };
  w.onerror = (e) => { clearTimeout(t); resolve("fail " + (e.message || e.error?.message || "error")); };
});
const child = (argv) => {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: "utf8", timeout: 20000 });
  if (r.error) return "fail " + r.error.message;
  return (r.status === 0 ? "ok " : "fail exit " + r.status + " ") + (r.stdout + r.stderr).trim();
};
const probes = {
  http: () => get(http, "http://pub.test/h"),
  https: () => get(https, "https://example.com/s"),
  lib,
  fetch: async () => { const r = await fetch("http://pub.test/f", { signal: AbortSignal.timeout(10000) }); return (r.status === 200 ? "ok " : "status " + r.status + " ") + await r.text(); },
  httpRefused: () => get(http, "http://lo.test/x"),
  httpsRefused: () => get(https, "https://lo.test/x"),
  // Agents a library makes (grammy: new https.Agent({ keepAlive: true })),
  // by the default export, a named import or require.
  ownAgent: () => get(http, "http://pub.test/own", { agent: new http.Agent() }),
  namedAgent: () => get(https, "https://example.com/named", { agent: new HttpsAgent({ keepAlive: true }) }),
  requireAgent: () => get(https, "https://example.com/req", { agent: new (require("https").Agent)() }),
  instance: async () => String(http.globalAgent instanceof http.Agent && https.globalAgent instanceof HttpsAgent && new http.Agent() instanceof http.Agent),
  agentFalse: () => get(http, "http://pub.test/nope", { agent: false }),
  // A library that proxies by itself (axios from HTTP_PROXY): an
  // absolute-form request to the proxy.
  selfProxied: () => new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port: 3128, path: "http://pub.test/self", headers: { host: "pub.test" } }, (res) => collect(res, resolve));
    req.on("error", (e) => resolve("fail " + (e.code ? e.code + " " : "") + e.message));
  }),
  ownConnection: () => get(http, "http://pub.test/conn", { createConnection: (o) => net.connect(o.port, o.host) }),
  ws,
  childNode: () => child([process.execPath, "-e", "require('node:http').get('http://pub.test/child', (r) => { let b = ''; r.on('data', (d) => b += d); r.on('end', () => console.log(b)); }).on('error', (e) => { console.log('fail', e.message); process.exit(1); })"]),
  childCurl: () => child(["curl", "-sS", "--max-time", "10", "http://pub.test/curl"]),
  childCurlTLS: () => child(["curl", "-sS", "--max-time", "10", "https://example.com/curl"]),
  childGitTLS: () => child(["git", "ls-remote", "https://example.com/repo.git"]),
  childCurlDirect: () => child(["curl", "-sS", "--noproxy", "*", "--max-time", "5", "http://8.8.4.4/"]),
  childGit: () => child(["git", "ls-remote", "http://pub.test/repo.git"]),
};
export function createPlugin() {
  return {
    register(r) {
      r.tool({ name: "net", description: "", handler: async (args) => {
        const out = {};
        for (const a of args) {
          try { out[a] = String(await probes[a]()).slice(0, 300); } catch (e) { out[a] = "fail " + (e.cause?.code || e.code || e.message); }
        }
        return { output: JSON.stringify(out), exitCode: 0 };
      }});
    },
  };
}
`

// recAuditor keeps the egress proxy's records.
type recAuditor struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (a *recAuditor) Log(r audit.Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
	return nil
}

// has waits until a record of host with method and decision is there.
func (a *recAuditor) has(host, method, decision string) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		a.mu.Lock()
		ok := slices.ContainsFunc(a.recs, func(r audit.Record) bool {
			return r.Host == host && r.Method == method && r.Decision == decision
		})
		a.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

func (a *recAuditor) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, r := range a.recs {
		fmt.Fprintf(&b, "%s %s %s:%d %s %s; ", r.Agent, r.Method, r.Host, r.Port, r.Decision, r.Injected)
	}
	return b.String()
}

// egressNet is a real egress proxy on a Unix socket in front of two test
// servers: pub.test (plain HTTP, port 80) and example.com (HTTPS, port
// 443, whose requests get an Authorization header injected, with the
// proxy's CA written beside the socket as the gateway does). lo.test
// resolves to loopback, which the proxy refuses.
type egressNet struct {
	sock  string
	audit *recAuditor
	*testutil.Upstreams
}

func startEgressNet(t *testing.T) *egressNet {
	t.Helper()
	en := &egressNet{audit: &recAuditor{}, Upstreams: testutil.NewUpstreams(t)}
	public := en.Public
	res := testutil.Resolver{"pub.test": {public}, "example.com": {public}, "ws.test": {public}, "lo.test": {netip.MustParseAddr("127.0.0.1")}}
	ca, err := egress.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	// The socket's folder must be reachable by the jail's init.
	dir, err := os.MkdirTemp("", "jailnet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, egressCAFile), ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The gateway writes the bundle too (the host's roots and the CA).
	if _, err := trust.Write(filepath.Join(dir, egressCAFile), filepath.Join(dir, egressBundleFile), trust.SystemBundles); err != nil {
		t.Fatal(err)
	}
	en.sock = filepath.Join(dir, "egress.sock")
	pol, err := egress.NewPolicy(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := egress.New("plugin:net", pol, &egress.Options{
		Audit: en.audit, Resolver: res, CA: ca, RootCAs: en.Roots, LocalAddrs: []netip.Prefix{},
		Credentials: []egress.Credential{{Host: "example.com", Header: "Authorization", Value: "Bearer injected-tok"}},
		Dial:        en.Dial,
	})
	ln, err := net.Listen("unix", en.sock)
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	t.Cleanup(func() { p.Close() })
	return en
}

// netPluginEnv writes netPlugin into a folder and returns its Env.
func netPluginEnv(t *testing.T, node, sock string) plugin.Env {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the plugin jail needs Linux")
	}
	if err := jail.Available(); err != nil {
		t.Skipf("no plugin jail here: %v", err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "net")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"net","description":"test"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "index.js"), []byte(netPlugin), 0o644)
	man, err := config.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return plugin.Env{
		Name: "net", Dir: dir, Manifest: man, Config: map[string]any{}, DataDir: filepath.Join(root, "data"), Node: node,
		Logger: slog.New(slog.DiscardHandler), EgressSocket: sock,
	}
}

// runJailedTool launches the plugin's host and calls its tool once; the
// tool's output is a JSON object of strings.
func runJailedTool(t *testing.T, env plugin.Env, tool string, args []string) map[string]string {
	t.Helper()
	out, _ := jailedTool(t, env, tool, args, env.DataDir)
	got := map[string]string{}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	t.Logf("%v", got)
	return got
}

// jailedTool launches the plugin's host and calls its tool once, in a
// session whose workspace is ws; it returns the output and exit code.
func jailedTool(t *testing.T, env plugin.Env, tool string, args []string, ws string) (string, int) {
	t.Helper()
	pl, err := New(env)
	if err != nil {
		t.Fatal(err)
	}
	pr, _, err := pl.(*Plugin).launch()
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	defer func() { pr.kill("test over"); <-pr.done }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, err := pr.call(ctx, "tool", map[string]any{
		"tool": tool, "args": args, "config": map[string]any{},
		"session": session{SessionKey: "tui:a1:default", Channel: "tui", AgentName: "a1", WorkspaceDir: ws},
	})
	if err != nil {
		t.Fatalf("tool: %v", err)
	}
	var res struct {
		Output   string
		ExitCode int
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return res.Output, res.ExitCode
}

// TestJailedNodeHTTPThroughEgress: in the jail, node:http and node:https
// requests with the default agent (http.get, https.get, a library-style
// https.request) reach public hosts through the plugin's egress proxy and
// are audited there; https to a host with egress credentials gets them
// injected (Node trusts the egress CA); a refused host gives an error
// that says why. With NODE_USE_ENV_PROXY (Node 22.21+) Node routes them
// itself (plain HTTP as an absolute-form request) and the host adds
// nothing; without it (as on an older Node) the host's own agents tunnel
// them (CONNECT). An agent the plugin makes itself has no route.
func TestJailedNodeHTTPThroughEgress(t *testing.T) {
	node := testNode(t)
	for _, tc := range []struct {
		name       string
		envProxy   bool
		httpMethod string // how plain HTTP reaches the proxy
	}{
		{"node proxies", true, http.MethodGet},
		{"host agents", false, http.MethodConnect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := useEnvProxy
			useEnvProxy = tc.envProxy
			t.Cleanup(func() { useEnvProxy = old })
			en := startEgressNet(t)
			env := netPluginEnv(t, node, en.sock)
			logs := &testutil.SyncBuffer{}
			env.Logger = slog.New(slog.NewTextHandler(logs, nil))
			probes := []string{"http", "https", "lib", "httpRefused", "httpsRefused", "ownAgent", "namedAgent", "requireAgent", "instance", "agentFalse", "ownConnection", "selfProxied"}
			if tc.envProxy {
				probes = append(probes, "fetch", "ws")
			}
			got := runJailedTool(t, env, "net", probes)
			want := map[string]string{
				"http":         "ok plain pub.test/h",
				"https":        "ok tls example.com/s",
				"lib":          "ok tls example.com/lib",
				"ownAgent":     "ok plain pub.test/own",
				"namedAgent":   "ok tls example.com/named",
				"requireAgent": "ok tls example.com/req",
				"instance":     "true",
				"agentFalse":   "ok plain pub.test/nope",
				"selfProxied":  "ok plain pub.test/self",
				// A connection the plugin makes itself has no route (no
				// DNS even).
				"ownConnection": "fail EAI_AGAIN",
			}
			if tc.envProxy {
				want["fetch"] = "ok plain pub.test/f"
				// Node's WebSocket goes through the proxy too: the
				// upgrade is refused by the test server, not the jail.
				want["ws"] = "fail Received network error or non-101 status code"
			}
			for k, w := range want {
				if !strings.HasPrefix(got[k], w) {
					t.Errorf("%s = %q, want %q…", k, got[k], w)
				}
			}
			// The credentials reached the intercepted host (and its
			// answer never shows them to the plugin).
			for _, p := range []string{"tls /s", "tls /lib", "tls /named", "tls /req"} {
				if a := en.Auth(p); a != "Bearer injected-tok" {
					t.Errorf("%s saw Authorization %q", p, a)
				}
			}
			if en.Auth("plain /h") != "" {
				t.Errorf("pub.test got credentials: %q", en.Auth("plain /h"))
			}
			// A refusal says so: the host's agents and Node's absolute-form
			// request carry the proxy's reason; Node's own CONNECT error
			// only the status (the reason is in the audit record).
			refusals := map[string][]string{"httpRefused": {"403", "loopback"}, "httpsRefused": {"403", "loopback"}}
			if tc.envProxy {
				refusals["httpsRefused"] = []string{"ERR_PROXY_TUNNEL", "lo.test:443", "403 Forbidden"}
			}
			for k, subs := range refusals {
				for _, sub := range subs {
					if !strings.Contains(got[k], sub) {
						t.Errorf("%s = %q, want it to say %q", k, got[k], sub)
					}
				}
			}
			if !en.audit.has("pub.test", tc.httpMethod, audit.DecisionAllowed) {
				t.Errorf("no %s record of pub.test: %s", tc.httpMethod, en.audit)
			}
			if !en.audit.has("example.com", http.MethodConnect, audit.DecisionAllowed) || !en.audit.has("lo.test", tc.httpMethod, audit.DecisionDenied) {
				t.Errorf("records: %s", en.audit)
			}
			if tc.envProxy && !en.audit.has("ws.test", http.MethodConnect, audit.DecisionAllowed) {
				t.Errorf("no record of the WebSocket's tunnel: %s", en.audit)
			}
			// Node's warning that its proxy agent is experimental is not
			// in the gateway's log, on every start of every plugin.
			if strings.Contains(logs.String(), "EnvHttpProxyAgent") {
				t.Errorf("the log has Node's proxy warning:\n%s", logs)
			}
		})
	}
}

// TestJailedChildProcessThroughEgress: with allowChildProcess a child of
// the plugin (node itself, curl, git) inherits the proxy variables and
// reaches a public host only through the plugin's egress proxy (audited
// there); there is no other way out.
func TestJailedChildProcessThroughEgress(t *testing.T) {
	node := testNode(t)
	en := startEgressNet(t)
	env := netPluginEnv(t, node, en.sock)
	env.AllowChildProcess = true
	probes := []string{"childNode"}
	for _, c := range []string{"curl", "git"} {
		if _, err := os.Stat("/usr/bin/" + c); err == nil {
			name := "child" + strings.ToUpper(c[:1]) + c[1:]
			probes = append(probes, name, name+"TLS")
			if c == "curl" {
				probes = append(probes, "childCurlDirect")
			}
		} else {
			t.Logf("no /usr/bin/%s: not tried", c)
		}
	}
	got := runJailedTool(t, env, "net", probes)
	want := map[string]string{
		"childNode": "ok plain pub.test/child",
		"childCurl": "ok plain pub.test/curl",
		// git asks for the refs; the test server's text is an empty
		// dumb-HTTP repository.
		"childGit": "ok ",
		// https to a host with egress credentials: the proxy terminates
		// TLS with the egress CA, which the children trust through
		// SSL_CERT_FILE, CURL_CA_BUNDLE, GIT_SSL_CAINFO (the bundle).
		"childCurlTLS": "ok tls example.com/curl",
		"childGitTLS":  "ok ",
		// Past the proxy there is no route (curl: couldn't connect).
		"childCurlDirect": "fail exit 7 ",
	}
	for _, k := range probes {
		if !strings.HasPrefix(got[k], want[k]) {
			t.Errorf("%s = %q, want %q…", k, got[k], want[k])
		}
	}
	if !en.audit.has("pub.test", http.MethodGet, audit.DecisionAllowed) {
		t.Errorf("records: %s", en.audit)
	}
	if slices.Contains(probes, "childGit") && !en.Saw("plain /repo.git/info/refs") {
		t.Errorf("git's request never reached the server: %s", en.audit)
	}
	for _, p := range []string{"tls /curl", "tls /repo.git/info/refs"} {
		if a := en.Auth(p); slices.Contains(probes, "childCurlTLS") && a != "Bearer injected-tok" {
			t.Errorf("%s saw Authorization %q", p, a)
		}
	}
}

// standInGH is a stand-in for the GitHub CLI: it shows what it was given
// and calls the "API" with curl, as gh would, through the proxy variables.
const standInGH = `#!/bin/sh
echo "gh $*"
echo "token=$GH_TOKEN"
echo "cwd=$(pwd)"
exec curl -sS --max-time 10 http://pub.test/gh-api
`

// TestToolkitGitHubInJail: the toolkit's github plugin, unmodified, runs
// jailed with allowChildProcess; its gh (a stand-in the test writes, named
// by the plugin's binPath and bound in with allowRead) runs in the agent's
// workspace (allowRead), gets the token as GH_TOKEN and reaches the "API"
// through the plugin's egress proxy. Without the workspace in allowRead
// gh cannot start (the folder does not exist in the jail).
func TestToolkitGitHubInJail(t *testing.T) {
	node := testNode(t)
	tk := toolkitDir(t, "github")
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("no /usr/bin/curl for the stand-in gh")
	}
	en := startEgressNet(t)
	env := netPluginEnv(t, node, en.sock) // the jail checks
	bin, err := os.MkdirTemp("", "jailnet-gh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	if err := os.WriteFile(filepath.Join(bin, "gh"), []byte(standInGH), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "workspace")
	os.MkdirAll(ws, 0o755)
	man, err := config.ReadManifest(filepath.Join(tk, "github"))
	if err != nil {
		t.Fatal(err)
	}
	env.Name, env.Dir, env.Manifest = "github", filepath.Join(tk, "github"), man
	env.Config = map[string]any{"binPath": filepath.Join(bin, "gh"), "token": "ghp_standin"}
	env.AllowChildProcess = true
	// The plugin imports ../_shared: the toolkit's shared folder is read too.
	base := []string{filepath.Join(tk, "_shared"), bin}

	env.AllowRead = append(base, ws)
	out, code := jailedTool(t, env, "github", []string{"repo", "view", "o/r"}, ws)
	want := []string{"gh repo view o/r\n", "token=ghp_standin\n", "cwd=" + ws + "\n", "plain pub.test/gh-api"}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output %q (exit %d) does not say %q", out, code, w)
		}
	}
	if code != 0 || !en.audit.has("pub.test", http.MethodGet, audit.DecisionAllowed) {
		t.Errorf("exit %d; records: %s", code, en.audit)
	}

	env.AllowRead = base
	out, code = jailedTool(t, env, "github", []string{"repo", "view", "o/r"}, ws)
	if code == 0 || !strings.Contains(out, "Failed to spawn gh") {
		t.Errorf("without the workspace: %q (exit %d)", out, code)
	}
}

// TestProxiesFetch: NODE_USE_ENV_PROXY routes fetch from Node 22.21 and
// 24.0 on (older ones get a warning: only node:http/https go out of the
// jail).
func TestProxiesFetch(t *testing.T) {
	for _, tc := range []struct {
		n    Node
		want bool
	}{
		{Node{Major: 22, Minor: 0}, false},
		{Node{Major: 22, Minor: 20, Patch: 9}, false},
		{Node{Major: 22, Minor: 21}, true},
		{Node{Major: 22, Minor: 23, Patch: 5}, true},
		{Node{Major: 23, Minor: 11}, false},
		{Node{Major: 24, Minor: 1}, true},
	} {
		if got := tc.n.proxiesFetch(); got != tc.want {
			t.Errorf("%d.%d.%d: %v, want %v", tc.n.Major, tc.n.Minor, tc.n.Patch, got, tc.want)
		}
	}
}

// TestOldNodeWarned: a jailed plugin with an egress socket on a Node whose
// fetch knows no proxy is warned about at start; on 22.21 it is not.
func TestOldNodeWarned(t *testing.T) {
	for _, tc := range []struct {
		version string
		warned  bool
	}{{"v22.20.0", true}, {"v22.21.0", false}} {
		bin := filepath.Join(t.TempDir(), "node")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\necho "+tc.version+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"net","description":"test"}`), 0o644)
		os.WriteFile(filepath.Join(dir, "index.js"), []byte(netPlugin), 0o644)
		man, err := config.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		logs := &logBuf{}
		if _, err := New(plugin.Env{Name: "net", Dir: dir, Manifest: man, DataDir: filepath.Join(dir, "data"), Node: bin,
			Logger: slog.New(slog.NewTextHandler(logs, nil)), EgressSocket: "/nonexistent/egress.sock"}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "fetch and WebSocket know no proxy"); got != tc.warned {
			t.Errorf("%s: warned %v, want %v:\n%s", tc.version, got, tc.warned, logs)
		}
	}
}
