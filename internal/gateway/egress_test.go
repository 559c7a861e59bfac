package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/egress/trust"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
	"github.com/beige-dev/beige/internal/testutil"
)

// TestEgressThroughGateway: an agent in the default "proxy" mode reaches an
// allowed host through its egress socket and gets the 403 for another, each
// attempt in audit.jsonl; "bridge", "open" and a Docker network's name
// start with their warning, and a sandbox on a network (one this test
// makes: the engine's default bridge, docker0, may be missing) has one.
func TestEgressThroughGateway(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from the host") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	network := testNetwork(t)
	var logs testutil.SyncBuffer
	g := startGatewayWith(t, gatewaySetup{
		docker: true, // the sandbox's network is the subject
		names:  []string{"px", "br", "op", "nt"},
		sandbox: map[string]string{
			"px": `egress: { allow: ["svc.test", "127.0.0.1"] }`,
			"br": `network: "bridge"`,
			"op": `network: "open"`,
			"nt": fmt.Sprintf("network: %q", network),
		},
		options: func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			o.Egress = &egress.Options{Resolver: testutil.Resolver{
				"svc.test":   {netip.MustParseAddr("127.0.0.1")},
				"other.test": {netip.MustParseAddr("127.0.0.1")},
			}}
		},
	})
	px, br, op, nt := g.agents[0], g.agents[1], g.agents[2], g.agents[3]

	text, isErr := g.tool(t, px, "exec", map[string]any{"command": "wget -qO- http://svc.test:" + port + "/"})
	if isErr || !strings.Contains(text, "hello from the host") {
		t.Errorf("allowed host: %q", text)
	}
	text, isErr = g.tool(t, px, "exec", map[string]any{"command": "wget -qO- http://other.test:" + port + "/"})
	if !isErr || !strings.Contains(text, "403") {
		t.Errorf("host not allowed: %q", text)
	}
	text, _ = g.tool(t, px, "exec", map[string]any{"command": "wget -qO- -T 3 http://" + srv.Listener.Addr().String() + "/ 2>&1; ls /sys/class/net"})
	if strings.Contains(text, "hello from the host") || strings.Contains(text, "eth0") {
		t.Errorf("proxy mode reached the host directly or has a network: %q", text)
	}

	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	var nets []audit.Record
	for _, r := range recs {
		if r.Type == audit.TypeNet {
			nets = append(nets, r)
		}
	}
	if len(nets) < 2 || nets[0].Agent != px || nets[0].Host != "svc.test" || nets[0].Decision != audit.DecisionAllowed || nets[0].Rule != "127.0.0.1" || *nets[0].BytesDown == 0 ||
		nets[1].Host != "other.test" || nets[1].Decision != audit.DecisionDenied {
		t.Errorf("net records = %+v", nets)
	}

	l := logs.String()
	if !strings.Contains(l, `"bridge\" is the old name of \"open\""`) && !strings.Contains(l, `old name of`) {
		t.Errorf("no note for bridge in the log:\n%s", l)
	}
	for _, a := range []string{br, op} {
		if !strings.Contains(l, "agent="+a) || strings.Count(l, `reaches the internet, the other agents`) < 2 {
			t.Errorf("no warning for %s in the log:\n%s", a, l)
		}
	}
	if !strings.Contains(l, "sandbox.network is a Docker network") || !strings.Contains(l, "network="+network) {
		t.Errorf("no warning for %s on network %s in the log:\n%s", nt, network, l)
	}
	networked := func(t *testing.T, a string) {
		text, _ := g.tool(t, a, "exec", map[string]any{"command": "ls /sys/class/net; echo \"[$HTTP_PROXY]\""})
		if !strings.Contains(text, "eth0") || !strings.Contains(text, "[]") {
			t.Errorf("%s: %q, want eth0 and no proxy", a, text)
		}
	}
	t.Run("a Docker network", func(t *testing.T) { networked(t, nt) })
	for mode, a := range map[string]string{"bridge": br, "open": op} {
		t.Run(mode, func(t *testing.T) {
			if p := g.Health(context.Background()).Agents[a]; strings.Contains(p, "could not find bridge") {
				// Open mode is Docker's default bridge: nothing else of
				// ours needs it, and a test must not make it.
				t.Skipf("the engine has no default bridge (docker0), which open mode uses: %s", p)
			}
			networked(t, a)
		})
	}
}

// testNetwork makes an internal bridge network of the engine for the test
// and returns its name; it is removed when the test ends.
func testNetwork(t *testing.T) string {
	t.Helper()
	c := dockertest.RequireDocker(t)
	name := "beige-test-" + dockertest.Suffix()
	ctx := context.Background()
	if _, err := c.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Internal: true,
		Labels: map[string]string{"beige.test": "1"}}); err != nil {
		t.Fatalf("create network %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := c.NetworkRemove(context.Background(), name, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("remove network %s: %v", name, err)
		}
	})
	return name
}

// TestEgressCredentialsWiring: an agent with sandbox.egress.credentials
// gets the home's CA (made at start, key 0600, outside every mount), its
// certificate at /beige/egress-ca.pem and the variables that trust it;
// the token itself is nowhere in the sandbox.
func TestEgressCredentialsWiring(t *testing.T) {
	t.Setenv("BEIGE_TEST_CRED_TOKEN", "tok-WiringS3cret-42")
	g := startGatewayWith(t, gatewaySetup{
		docker: true, // the sandbox's network is the subject
		names:  []string{"cr"},
		sandbox: map[string]string{
			"cr": `egress: { allow: ["creds.test"], credentials: [{ host: "creds.test", header: "Authorization", value: "Bearer ${BEIGE_TEST_CRED_TOKEN}" }] }`,
		},
	})
	cr := g.agents[0]
	fi, err := os.Stat(filepath.Join(g.home.EgressCADir(), egress.CAKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", fi, err)
	}
	pemOnHost, err := os.ReadFile(filepath.Join(g.home.EgressCADir(), egress.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	text, isErr := g.tool(t, cr, "exec", map[string]any{"command": "cat /beige/egress-ca.pem; echo $NODE_EXTRA_CA_CERTS $DENO_CERT; echo bundle=$SSL_CERT_FILE,$CURL_CA_BUNDLE,$REQUESTS_CA_BUNDLE,$GIT_SSL_CAINFO; echo bundle:; cat $SSL_CERT_FILE; echo :bundle; env; cat /proc/*/environ; grep -rl WiringS3cret /beige /workspace /home /tmp /etc /run 2>/dev/null; ls /beige"})
	if isErr || !strings.Contains(text, string(pemOnHost)) || !strings.Contains(text, "/beige/egress-ca.pem /beige/egress-ca.pem\n") {
		t.Errorf("sandbox: %q", text)
	}
	// The variables that replace a client's bundle name the combined one
	// (the busybox image has no bundle of its own: the CA alone).
	b := trust.BundlePath
	if !strings.Contains(text, "bundle="+b+","+b+","+b+","+b+"\n") || !strings.Contains(text, "bundle:\n"+string(pemOnHost)+":bundle") {
		t.Errorf("the bundle variables or the bundle: %q", text)
	}
	if strings.Contains(text, "WiringS3cret") || strings.Contains(text, "ca.key") || strings.Contains(text, "PRIVATE KEY") {
		t.Errorf("the sandbox sees the token or the CA key: %q", text)
	}
}
