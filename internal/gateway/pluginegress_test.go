package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/testutil"
)

// connectVia asks the egress proxy on the Unix socket sock for a tunnel to
// target and, when it is given, sends one GET through it; it returns the
// CONNECT status and the GET's body.
func connectVia(t *testing.T, sock, target string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatalf("dial the egress socket: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	r2, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET through the tunnel to %s: %v", target, err)
	}
	b, _ := io.ReadAll(r2.Body)
	return resp.StatusCode, string(b)
}

// netRecords waits until the audit log has n records of type net and
// returns them.
func netRecords(t *testing.T, g *testGateway, n int) []audit.Record {
	t.Helper()
	var nets []audit.Record
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		recs, err := audit.ReadFile(g.home.AuditLog())
		if err != nil {
			t.Fatal(err)
		}
		nets = nets[:0]
		for _, r := range recs {
			if r.Type == audit.TypeNet {
				nets = append(nets, r)
			}
		}
		if len(nets) >= n {
			break
		}
	}
	return nets
}

// TestPluginEgress: each TypeScript/JavaScript plugin gets an egress proxy
// on $BEIGE_HOME/sockets/_plugins/<plugin>/egress.sock (a folder no agent
// name can produce). By default a public destination is reached on any
// port, while 127.0.0.1 (the gateway's own API port) is refused; with
// plugins.<p>.egress.allow only the listed hosts are. Every attempt is in
// audit.jsonl under agent "plugin:<name>"; the socket goes with the
// gateway.
func TestPluginEgress(t *testing.T) {
	node := tsNode(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from the internet") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	// pub.test and other.test are public addresses; the test's dialer takes
	// that address to the test server (and dials any other for real).
	public := netip.MustParseAddr("8.8.4.4")
	dir := t.TempDir()
	mk := func(name string) string {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "plugin.json"), []byte(fmt.Sprintf(`{"name":%q,"description":"d"}`, name)), 0o644)
		os.WriteFile(filepath.Join(d, "index.js"), []byte(`export function createPlugin() { return { register() {} }; }`), 0o644)
		return d
	}
	g := startGatewayWith(t, gatewaySetup{
		names: []string{"ag"},
		plugins: fmt.Sprintf(`net: { path: %q, node: %q }, narrow: { path: %q, node: %q, egress: { allow: ["pub.test"] } }`,
			mk("net"), node, mk("narrow"), node),
		options: func(o *Options) {
			// A CA and bundle left from a config with credentials.
			stale := filepath.Join(o.Home.SocketsDir(), "_plugins", "net")
			os.MkdirAll(stale, 0o700)
			os.WriteFile(filepath.Join(stale, EgressCAFile), []byte("old CA"), 0o644)
			os.WriteFile(filepath.Join(stale, PluginCABundleFile), []byte("old bundle"), 0o444)
			o.Egress = &egress.Options{
				Resolver: testutil.Resolver{"pub.test": {public}, "other.test": {public}, "lo.test": {netip.MustParseAddr("127.0.0.1")}},
				Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
					if strings.HasPrefix(addr, public.String()+":") {
						addr = srv.Listener.Addr().String()
					}
					var d net.Dialer
					return d.DialContext(ctx, network, addr)
				},
			}
		},
	})
	sock := filepath.Join(g.home.SocketsDir(), "_plugins", "net", egress.SocketName)
	narrow := filepath.Join(g.home.SocketsDir(), "_plugins", "narrow", egress.SocketName)
	// Without credentials the host trusts no egress CA.
	for _, f := range []string{EgressCAFile, PluginCABundleFile} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(sock), f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s beside the socket of a plugin without credentials: %v", f, err)
		}
	}
	_, apiPort, _ := net.SplitHostPort(g.Addr())

	// (a) a public host, any port: through.
	if code, body := connectVia(t, sock, "pub.test:"+port); code != 200 || body != "hello from the internet" {
		t.Errorf("public host: %d %q", code, body)
	}
	// (b) the gateway's API on loopback, by address and by a name that
	// resolves there: refused.
	if code, body := connectVia(t, sock, "127.0.0.1:"+apiPort); code != http.StatusForbidden || !strings.Contains(body, "loopback") {
		t.Errorf("the gateway's API port: %d %q", code, body)
	}
	if code, body := connectVia(t, sock, "lo.test:"+apiPort); code != http.StatusForbidden || !strings.Contains(body, "loopback") {
		t.Errorf("a name that resolves to loopback: %d %q", code, body)
	}
	// (c) plugins.narrow.egress.allow: the listed host only.
	if code, body := connectVia(t, narrow, "other.test:"+port); code != http.StatusForbidden || !strings.Contains(body, "matches no rule") {
		t.Errorf("host not in allow: %d %q", code, body)
	}
	if code, body := connectVia(t, narrow, "pub.test:"+port); code != 200 || body != "hello from the internet" {
		t.Errorf("host in allow: %d %q", code, body)
	}

	nets := netRecords(t, g, 5)
	type want struct{ agent, host, decision string }
	wants := []want{
		{"plugin:net", "pub.test", audit.DecisionAllowed},
		{"plugin:net", "127.0.0.1", audit.DecisionDenied},
		{"plugin:net", "lo.test", audit.DecisionDenied},
		{"plugin:narrow", "other.test", audit.DecisionDenied},
		{"plugin:narrow", "pub.test", audit.DecisionAllowed},
	}
	// An allowed connection is recorded when it closes, a refused one at
	// once: compare the records in any order.
	var got []want
	for _, r := range nets {
		got = append(got, want{r.Agent, r.Host, r.Decision})
	}
	key := func(a, b want) int {
		return strings.Compare(a.agent+" "+a.host+" "+a.decision, b.agent+" "+b.host+" "+b.decision)
	}
	slices.SortFunc(got, key)
	slices.SortFunc(wants, key)
	if !slices.Equal(got, wants) {
		t.Errorf("net records = %+v; want %+v", got, wants)
	}

	fi, err := os.Stat(filepath.Dir(sock))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket folder: %v %v", fi, err)
	}
	g.Shutdown(context.Background())
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		c.Close()
		t.Error("the plugin's egress socket still answers after Shutdown")
	}
}
