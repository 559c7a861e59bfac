package egress_test

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// world is the outside world of a Docker test: the proxy resolves the test
// names to made-up public addresses and "dials" those by connecting to
// servers on the host's loopback. Nothing leaves the machine.
type world struct {
	names  map[string][]netip.Addr
	routes map[string]string
}

func (w *world) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := w.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (w *world) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	to, ok := w.routes[addr]
	if !ok {
		return nil, fmt.Errorf("test world: no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

type dockerEnv struct {
	rt        sandbox.Runtime
	sb        sandbox.Sandbox
	spec      sandbox.Spec
	auditPath string
	ca        string // path of the test CA in the sandbox
}

var pub = netip.MustParseAddr("93.184.215.14")

// startProxied starts a sandbox in the given network mode whose egress
// proxy (in "proxy" mode) allows allow, with netclient at /opt/netclient
// and the HTTPS test server's CA at /workspace/ca.pem.
func startProxied(t testing.TB, network string, allow []string, httpSrv, httpsSrv *httptest.Server, tweak ...func(*egress.Options, *world)) *dockerEnv {
	t.Helper()
	rt := dockertest.NewRuntime(t, docker.Options{})
	netclient := dockertest.StaticBinary(t, "./internal/egress/testdata/netclient")
	spec := dockertest.NewSpec(t, "egress")
	spec.Network = network
	spec.ExtraMounts = []sandbox.Mount{{Source: netclient, Target: "/opt/netclient", ReadOnly: true}}
	if err := os.MkdirAll(spec.SocketDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(spec.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &dockerEnv{rt: rt, spec: spec, auditPath: filepath.Join(t.TempDir(), "audit.jsonl"), ca: "/workspace/ca.pem"}
	if httpsSrv != nil {
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: httpsSrv.Certificate().Raw})
		if err := os.WriteFile(filepath.Join(spec.Workspace, "ca.pem"), ca, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if network == sandbox.NetworkProxy {
		al, err := audit.Open(e.auditPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := &world{
			names: map[string][]netip.Addr{"allowed.test": {pub}, "other.test": {pub}, "local.test": {netip.MustParseAddr("127.0.0.1")}},
			routes: map[string]string{
				netip.AddrPortFrom(pub, 80).String():  httpSrv.Listener.Addr().String(),
				netip.AddrPortFrom(pub, 443).String(): httpsSrv.Listener.Addr().String(),
			},
		}
		pol, err := egress.NewPolicy(allow, nil)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := egress.Listen(filepath.Join(spec.SocketDir, egress.SocketName))
		if err != nil {
			t.Fatal(err)
		}
		opts := &egress.Options{Audit: al, Resolver: w, Dial: w.Dial}
		for _, f := range tweak {
			f(opts, w)
		}
		if opts.CA != nil { // as the gateway does: the certificate in the socket folder
			if err := os.WriteFile(filepath.Join(spec.SocketDir, "egress-ca.pem"), opts.CA.CertPEM(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p := egress.New(spec.Agent, pol, opts)
		go p.Serve(ln)
		t.Cleanup(func() { p.Close(); al.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := rt.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	e.sb = sb
	return e
}

func (e *dockerEnv) sh(t testing.TB, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return string(res.Output)
}

func (e *dockerEnv) records(t *testing.T, n int) []audit.Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs, err := audit.ReadFile(e.auditPath)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if len(recs) >= n || time.Now().After(deadline) {
			if len(recs) != n {
				t.Errorf("%d audit records, want %d: %+v", len(recs), n, recs)
				return nil
			}
			return recs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testServers(t testing.TB) (*httptest.Server, *httptest.Server) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.URL.Path) })
	hs, hss := httptest.NewServer(h), httptest.NewTLSServer(h)
	t.Cleanup(hs.Close)
	t.Cleanup(hss.Close)
	return hs, hss
}

// TestProxyMode is the acceptance of the "proxy" network mode: http and
// https through the proxy work for an allowed host and get the proxy's 403
// otherwise; every way around the proxy fails; each attempt through the
// proxy is one audit record.
func TestProxyMode(t *testing.T) {
	httpSrv, httpsSrv := testServers(t)
	// A service on the host, on every address (as a careless one would be).
	hostSvc, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostSvc.Close()
	go func() {
		for {
			c, err := hostSvc.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "host service\n")
			c.Close()
		}
	}()
	svcPort := strconv.Itoa(hostSvc.Addr().(*net.TCPAddr).Port)

	e := startProxied(t, sandbox.NetworkProxy, []string{"allowed.test", "local.test"}, httpSrv, httpsSrv)

	if got := strings.Fields(e.sh(t, "ls /sys/class/net")); len(got) != 1 || got[0] != "lo" {
		t.Errorf("interfaces = %q, want only lo", got)
	}
	if got := e.sh(t, "echo $HTTP_PROXY $https_proxy $NO_PROXY"); got != "http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1\n" {
		t.Errorf("proxy env = %q", got)
	}
	// busybox wget honours http_proxy.
	if got := e.sh(t, "wget -qO- http://allowed.test/plain"); got != "hello /plain" {
		t.Errorf("wget http through the proxy = %q", got)
	}
	if got := e.sh(t, "/opt/netclient get https://allowed.test/tls "+e.ca); got != "200 hello /tls" {
		t.Errorf("https through the proxy = %q", got)
	}
	got := e.sh(t, "/opt/netclient get http://other.test/")
	if !strings.HasPrefix(got, "403 ") || !strings.Contains(got, `other.test:80 matches no rule of sandbox.egress.allow ("allowed.test", "local.test")`) {
		t.Errorf("http to a host not allowed = %q", got)
	}
	got = e.sh(t, "/opt/netclient get https://other.test/ "+e.ca)
	if !strings.Contains(got, "Forbidden") {
		t.Errorf("https to a host not allowed = %q", got)
	}
	recs := e.records(t, 4)
	want := []struct {
		host, method, decision string
		port                   int
	}{
		{"allowed.test", "GET", audit.DecisionAllowed, 80},
		{"allowed.test", "CONNECT", audit.DecisionAllowed, 443},
		{"other.test", "GET", audit.DecisionDenied, 80},
		{"other.test", "CONNECT", audit.DecisionDenied, 443},
	}
	for i, w := range want {
		if recs == nil {
			break
		}
		r := recs[i]
		if r.Type != audit.TypeNet || r.Agent != e.spec.Agent || r.Host != w.host || r.Method != w.method || r.Decision != w.decision || r.Port != w.port {
			t.Errorf("record %d = %+v, want %+v", i, r, w)
		}
		if w.decision == audit.DecisionAllowed && (*r.BytesDown == 0 || (w.method == "CONNECT" && *r.BytesUp == 0)) {
			t.Errorf("record %d counts up %d down %d", i, *r.BytesUp, *r.BytesDown)
		}
		if w.decision == audit.DecisionDenied && (*r.BytesUp != 0 || *r.BytesDown != 0) {
			t.Errorf("denied record %d counts bytes: %+v", i, r)
		}
	}

	// Around the proxy: a direct connection to an address, to the host's
	// service on each of the host's addresses, DNS to an outside resolver.
	bypass := []string{"/opt/netclient dial 198.51.100.1:443", "/opt/netclient dns 198.51.100.53:53 example.com", "/opt/netclient dial 127.0.0.1:" + svcPort}
	for _, p := range egress.HostAddrs() {
		bypass = append(bypass, "/opt/netclient dial "+net.JoinHostPort(p.Addr().String(), svcPort))
	}
	for _, cmd := range bypass {
		if got := e.sh(t, cmd); strings.Contains(got, "connected") || strings.Contains(got, "resolved") {
			t.Errorf("%s: %q", cmd, got)
		}
	}
	// …and through the proxy, the host's service is refused by address.
	for _, p := range egress.HostAddrs() {
		if p.Addr().IsLoopback() {
			continue // NO_PROXY: the client does not ask the proxy (and loopback is the sandbox's own)
		}
		u := "http://" + net.JoinHostPort(p.Addr().String(), svcPort) + "/"
		if got := e.sh(t, "/opt/netclient get "+u); !strings.HasPrefix(got, "403 ") {
			t.Errorf("the host's service at %s through the proxy: %q", u, got)
		}
	}
	if got := e.sh(t, "/opt/netclient get http://local.test:"+svcPort+"/"); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "loopback") {
		t.Errorf("a name resolving to loopback: %q", got)
	}
}

// TestOtherAgentUnreachable: an agent on the bridge ("open") listening on
// its bridge address is reached neither directly nor through the proxy
// from a "proxy" agent. Skipped when the engine has no default bridge.
func TestOtherAgentUnreachable(t *testing.T) {
	httpSrv, httpsSrv := testServers(t)
	bridgeIP(t)
	open := startProxied(t, sandbox.NetworkOpen, nil, nil, nil)
	peer := strings.TrimSpace(open.sh(t, "/opt/netclient myip -"))
	if peer == "" {
		t.Skip("the open sandbox has no bridge address")
	}
	open.sh(t, "(/opt/netclient listen 8080 >/dev/null 2>&1 &) ; sleep 0.3")
	// The host (which is on the bridge) reaches the listener: the test is real.
	if c, err := net.DialTimeout("tcp", peer+":8080", 3*time.Second); err != nil {
		t.Fatalf("the open agent's listener is not up: %v", err)
	} else {
		c.Close()
	}
	e := startProxied(t, sandbox.NetworkProxy, nil, httpSrv, httpsSrv)
	if got := e.sh(t, "/opt/netclient dial "+peer+":8080"); strings.Contains(got, "connected") {
		t.Errorf("direct to the other agent: %q", got)
	}
	if got := e.sh(t, "/opt/netclient get http://"+peer+":8080/"); !strings.HasPrefix(got, "403 ") {
		t.Errorf("the other agent through the proxy: %q", got)
	}
}

// bridgeIP returns the gateway address of the engine's default bridge,
// or skips the test when there is none: no "bridge" network, or no host
// interface (docker0) holding its address, which the engine then cannot
// attach a container to.
func bridgeIP(t testing.TB) string {
	t.Helper()
	c := dockertest.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	if err != nil {
		t.Skipf("the engine has no default bridge network: %v", err)
	}
	for _, cfg := range n.Network.IPAM.Config {
		// The host has one address in the subnet, docker0's (engine 20.10
		// may leave Gateway out; a Gateway without it is a missing docker0).
		for _, p := range egress.HostAddrs() {
			if cfg.Subnet.IsValid() && cfg.Subnet.Contains(p.Addr()) && p.Addr().Is4() &&
				(!cfg.Gateway.IsValid() || cfg.Gateway == p.Addr()) {
				return p.Addr().String()
			}
		}
	}
	t.Skip("the engine's default bridge has no IPv4 address on this host (docker0 is missing)")
	return ""
}

// TestNoneMode: "none" has no network, no proxy variables, and no egress
// socket is needed.
func TestNoneMode(t *testing.T) {
	e := startProxied(t, sandbox.NetworkNone, nil, nil, nil)
	if got := strings.Fields(e.sh(t, "ls /sys/class/net")); len(got) != 1 || got[0] != "lo" {
		t.Errorf("interfaces = %q", got)
	}
	if got := e.sh(t, "echo \"[$HTTP_PROXY$http_proxy]\""); got != "[]\n" {
		t.Errorf("proxy env in none mode: %q", got)
	}
	if got := e.sh(t, "/opt/netclient dial 198.51.100.1:443"); strings.Contains(got, "connected") {
		t.Errorf("dial in none mode: %q", got)
	}
}

// BenchmarkEgress: 100 HTTPS requests on one kept-alive connection from
// the sandbox to a server on the host, directly ("open", to the bridge
// address) and through the egress proxy ("proxy"); it reports each p50 and
// their ratio. The "open" half is skipped when there is no default bridge.
//
//	go test -run XXX -bench Egress -benchtime 1x ./internal/egress/
func BenchmarkEgress(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	p50 := map[string]float64{}
	b.Run("proxy", func(b *testing.B) {
		srv := httptest.NewTLSServer(h)
		defer srv.Close()
		e := startProxied(b, sandbox.NetworkProxy, nil, srv, srv)
		for b.Loop() {
			p50["proxy"] = e.bench(b, "https://allowed.test/")
		}
		b.ReportMetric(p50["proxy"], "p50-µs")
	})
	b.Run("open", func(b *testing.B) {
		ip := bridgeIP(b)
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			b.Skipf("listen on the bridge address %s: %v", ip, err)
		}
		srv := httptest.NewUnstartedServer(h)
		srv.Listener = ln
		srv.StartTLS()
		defer srv.Close()
		e := startProxied(b, sandbox.NetworkOpen, nil, nil, srv)
		for b.Loop() {
			p50["open"] = e.bench(b, "https://"+ln.Addr().String()+"/")
		}
		b.ReportMetric(p50["open"], "p50-µs")
	})
	if p50["open"] > 0 && p50["proxy"] > 0 {
		fmt.Printf("egress p50 of 100 kept-alive HTTPS requests: open %.0f µs, proxy %.0f µs, ratio %.2f, the proxy adds %.0f µs\n",
			p50["open"], p50["proxy"], p50["proxy"]/p50["open"], p50["proxy"]-p50["open"])
	} else if p50["proxy"] > 0 {
		fmt.Printf("egress p50 of 100 kept-alive HTTPS requests through the proxy: %.0f µs (no default bridge: the open half was skipped)\n", p50["proxy"])
	}
}

func (e *dockerEnv) bench(b testing.TB, u string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := e.sb.Exec(ctx, sandbox.ExecRequest{Command: "/opt/netclient bench " + u + " " + e.ca + " 100"})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("bench: %v %s", err, res.Output)
	}
	us, err := strconv.ParseFloat(strings.TrimSpace(string(res.Output)), 64)
	if err != nil {
		b.Fatalf("bench output %q", res.Output)
	}
	return us
}

// TestCredentialInSandbox is the acceptance of credential injection: a
// sandbox program that trusts the egress CA (SSL_CERT_FILE) reaches
// creds.test, whose server gets the header; the echo is masked, and no
// trace of the token is in the sandbox's env, processes' environ or files.
func TestCredentialInSandbox(t *testing.T) {
	const secret = "Bearer ghp_InSandboxT0ken9876543210"
	httpSrv, httpsSrv := testServers(t)
	upCA, err := egress.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := upCA.Leaf("creds.test")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		fmt.Fprintf(w, "received=%v echo=%s", got == secret, got)
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	up.StartTLS()
	t.Cleanup(up.Close)
	ca, err := egress.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	credsIP := netip.MustParseAddr("93.184.215.20")
	e := startProxied(t, sandbox.NetworkProxy, []string{"allowed.test", "creds.test"}, httpSrv, httpsSrv, func(o *egress.Options, w *world) {
		o.CA, o.RootCAs = ca, upCA.Pool()
		o.Credentials = []egress.Credential{{Host: "creds.test", Header: "Authorization", Value: secret}}
		w.names["creds.test"] = []netip.Addr{credsIP}
		w.routes[netip.AddrPortFrom(credsIP, 443).String()] = up.Listener.Addr().String()
	})
	got := e.sh(t, "SSL_CERT_FILE=/beige/egress-ca.pem /opt/netclient get https://creds.test/echo-headers")
	if got != "200 received=true echo="+strings.Repeat("*", len(secret)) {
		t.Errorf("curl creds.test = %q", got)
	}
	// Other hosts stay opaque tunnels: the real server's certificate.
	if got := e.sh(t, "/opt/netclient get https://allowed.test/tls "+e.ca); got != "200 hello /tls" {
		t.Errorf("https to a host without credentials = %q", got)
	}
	trace := e.sh(t, "env; cat /proc/*/environ; grep -rl InSandboxT0ken /beige /workspace /opt /home /tmp /etc 2>/dev/null; echo done")
	if strings.Contains(trace, "InSandboxT0ken") || !strings.Contains(trace, "done") {
		t.Errorf("the sandbox holds a trace of the token:\n%s", trace)
	}
	recs := e.records(t, 2)
	if recs[0].Host != "creds.test" || recs[0].Injected != "Authorization" || recs[1].Injected != "" {
		t.Errorf("records = %+v", recs)
	}
}
