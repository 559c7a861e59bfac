package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
)

// memAudit collects the records the proxy writes.
type memAudit struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *memAudit) Log(r audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return nil
}

// wait returns the records once there are n of them (or fails after 3 s).
func (m *memAudit) wait(t *testing.T, n int) []audit.Record {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		m.mu.Lock()
		got := append([]audit.Record(nil), m.recs...)
		m.mu.Unlock()
		if len(got) >= n {
			if len(got) > n {
				t.Errorf("%d audit records, want %d: %+v", len(got), n, got)
			}
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d audit records after 3 s, want %d: %+v", len(got), n, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeNet is the outside world of a test: names resolve to made-up public
// addresses, and a dial to one of those reaches a loopback test server.
// Loopback addresses are dialled for real (to test that they are refused,
// or allowed by address). Nothing else can be reached.
type fakeNet struct {
	mu     sync.Mutex
	names  map[string][]netip.Addr
	routes map[string]string // "ip:port" -> loopback server address
	dials  []string
}

func (f *fakeNet) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (f *fakeNet) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.dials = append(f.dials, addr)
	to, ok := f.routes[addr]
	f.mu.Unlock()
	if !ok {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || !ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("fakeNet: no route to %s", addr)
		}
		to = addr
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (f *fakeNet) dialed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.dials...)
}

// Made-up public addresses of the test hosts.
var (
	pubAllowed = netip.MustParseAddr("93.184.215.14")
	pubOther   = netip.MustParseAddr("93.184.215.15")
	pubHost    = netip.MustParseAddr("93.184.215.99") // "the gateway host's own address"
)

type env struct {
	net   *fakeNet
	audit *memAudit
	proxy *Proxy
	sock  string
	http  *httptest.Server // reached as allowed.test:80
	https *httptest.Server // reached as allowed.test:443
}

func newEnv(t *testing.T, allow, deny []string, tweak func(*Options)) *env {
	t.Helper()
	e := &env{audit: &memAudit{}}
	e.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "hello %s %s %d", r.Method, r.URL.Path, len(body))
	}))
	t.Cleanup(e.http.Close)
	e.https = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure hello %s", r.URL.Path)
	}))
	t.Cleanup(e.https.Close)
	e.net = &fakeNet{
		names: map[string][]netip.Addr{
			"allowed.test": {pubAllowed},
			"other.test":   {pubOther},
			"evil.test":    {pubOther},
			"a.evil.test":  {pubOther},
			"local.test":   {netip.MustParseAddr("127.0.0.1")},
			"local6.test":  {netip.MustParseAddr("::1")},
			"mapped.test":  {netip.MustParseAddr("::ffff:127.0.0.1")},
			"private.test": {netip.MustParseAddr("10.1.2.3")},
			"meta.test":    {netip.MustParseAddr("169.254.169.254")},
			"ll6.test":     {netip.MustParseAddr("fe80::1")},
			"zero.test":    {netip.MustParseAddr("0.0.0.0")},
			"cgnat.test":   {netip.MustParseAddr("100.64.0.1")},
			"host.test":    {pubHost},
			"mixed.test":   {netip.MustParseAddr("127.0.0.1"), pubAllowed},
		},
		routes: map[string]string{
			netip.AddrPortFrom(pubAllowed, 80).String():  e.http.Listener.Addr().String(),
			netip.AddrPortFrom(pubAllowed, 443).String(): e.https.Listener.Addr().String(),
			netip.AddrPortFrom(pubOther, 80).String():    e.http.Listener.Addr().String(),
			netip.AddrPortFrom(pubOther, 443).String():   e.https.Listener.Addr().String(),
			netip.AddrPortFrom(pubHost, 80).String():     e.http.Listener.Addr().String(),
		},
	}
	pol, err := NewPolicy(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	opts := &Options{Audit: e.audit, Resolver: e.net, Dial: e.net.Dial, LocalAddrs: []netip.Prefix{netip.PrefixFrom(pubHost, 32)}}
	if tweak != nil {
		tweak(opts)
	}
	dir := filepath.Join(t.TempDir(), "sock")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.sock = filepath.Join(dir, SocketName)
	ln, err := Listen(e.sock)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = New("a", pol, opts)
	done := make(chan error, 1)
	go func() { done <- e.proxy.Serve(ln) }()
	t.Cleanup(func() {
		e.proxy.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// client is what a program in the sandbox does with HTTP_PROXY set.
func (e *env) client(t *testing.T) *http.Client {
	t.Helper()
	pu, _ := url.Parse("http://127.0.0.1:3128")
	tr := &http.Transport{
		Proxy: http.ProxyURL(pu),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.sock)
		},
		TLSClientConfig: &tls.Config{RootCAs: rootsOf(e.https), ServerName: "example.com"},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func rootsOf(s *httptest.Server) *x509.CertPool {
	return s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
}

// raw sends one request as written and returns the proxy's answer.
func (e *env) raw(t *testing.T, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer to %q: %v", req, err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestForwardHTTP(t *testing.T) {
	e := newEnv(t, nil, nil, nil)
	c := e.client(t)
	code, body := get(t, c, "http://allowed.test/x")
	if code != 200 || body != "hello GET /x 0" {
		t.Fatalf("GET = %d %q", code, body)
	}
	resp, err := c.Post("http://Allowed.Test./up", "text/plain", strings.NewReader("twelve bytes"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello POST /up 12" {
		t.Fatalf("POST = %q", b)
	}
	recs := e.audit.wait(t, 2)
	for i, want := range []struct {
		method   string
		up, down int64
	}{{"GET", 0, int64(len(body))}, {"POST", 12, int64(len(b))}} {
		r := recs[i]
		if r.Type != audit.TypeNet || r.Agent != "a" || r.Decision != audit.DecisionAllowed || r.Host != "allowed.test" || r.Port != 80 ||
			r.Method != want.method || *r.BytesUp != want.up || *r.BytesDown != want.down || r.Rule != "*" || r.DurationMs == nil {
			t.Errorf("record %d = %+v (up %d down %d)", i, r, *r.BytesUp, *r.BytesDown)
		}
	}
	// The two requests went over one upstream connection.
	if d := e.net.dialed(); len(d) != 1 {
		t.Errorf("upstream dials %v, want one kept-alive connection", d)
	}
}

func TestConnectHTTPS(t *testing.T) {
	e := newEnv(t, []string{"allowed.test:443"}, nil, nil)
	c := e.client(t)
	for range 3 {
		if code, body := get(t, c, "https://allowed.test/s"); code != 200 || body != "secure hello /s" {
			t.Fatalf("GET = %d %q", code, body)
		}
	}
	c.CloseIdleConnections()
	recs := e.audit.wait(t, 1) // one kept-alive tunnel for the three requests
	r := recs[0]
	if r.Method != "CONNECT" || r.Decision != audit.DecisionAllowed || r.Host != "allowed.test" || r.Port != 443 ||
		*r.BytesUp < 100 || *r.BytesDown < 100 || r.Rule != "allowed.test:443" {
		t.Errorf("record = %+v (up %d down %d)", r, *r.BytesUp, *r.BytesDown)
	}
}

func TestDenied(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		req         string
		want        string // in the 403 text
		rule        string
	}{
		{"not on the allow list (http)", []string{"allowed.test"}, nil,
			"GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n",
			`other.test:80 matches no rule of sandbox.egress.allow ("allowed.test")`, ""},
		{"not on the allow list (CONNECT)", []string{"allowed.test"}, nil,
			"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n",
			`other.test:443 matches no rule of sandbox.egress.allow ("allowed.test")`, ""},
		{"wrong port", []string{"allowed.test:443"}, nil,
			"CONNECT allowed.test:22 HTTP/1.1\r\nHost: allowed.test:22\r\n\r\n",
			`allowed.test:22 matches no rule`, ""},
		{"deny wins", []string{"*"}, []string{"*.evil.test"},
			"CONNECT a.evil.test:443 HTTP/1.1\r\nHost: a.evil.test:443\r\n\r\n",
			`a.evil.test:443 is denied by rule "*.evil.test" in sandbox.egress.deny`, "*.evil.test"},
		{"empty allow list", []string{}, nil,
			"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			`the list is empty`, ""},
		{"deny by address", []string{"*"}, []string{"93.184.215.0/24"},
			"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			`allowed.test:80 (93.184.215.14) is denied by rule "93.184.215.0/24"`, "93.184.215.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.allow, tt.deny, nil)
			resp, body := e.raw(t, tt.req)
			if resp.StatusCode != 403 || !strings.Contains(body, tt.want) {
				t.Errorf("answer %d %q, want 403 with %q", resp.StatusCode, body, tt.want)
			}
			if tt.rule != "" && resp.Header.Get("X-Beige-Egress-Rule") != tt.rule {
				t.Errorf("rule header %q", resp.Header.Get("X-Beige-Egress-Rule"))
			}
			recs := e.audit.wait(t, 1)
			if recs[0].Decision != audit.DecisionDenied || !strings.Contains(recs[0].Error, tt.want) || recs[0].Rule != tt.rule || *recs[0].BytesUp != 0 {
				t.Errorf("record %+v", recs[0])
			}
			if tt.name != "deny by address" && len(e.net.dialed()) != 0 {
				t.Errorf("denied request dialled %v", e.net.dialed())
			}
			if len(e.net.dialed()) != 0 && tt.name == "deny by address" {
				t.Errorf("address-denied request dialled %v", e.net.dialed())
			}
		})
	}
}

// TestSpecialAddresses: a name that resolves to loopback, a private or
// link-local range, or the host's own address is refused (DNS rebinding),
// even with allow "*", unless an address rule allows it; so is such an
// address asked for directly.
func TestSpecialAddresses(t *testing.T) {
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host service") }))
	defer loop.Close()
	_, port, _ := net.SplitHostPort(loop.Listener.Addr().String())
	tests := []struct {
		host string
		kind string
	}{
		{"local.test", "a loopback address"},
		{"local6.test", "a loopback address"},
		{"mapped.test", "a loopback address"},
		{"private.test", "a private address"},
		{"meta.test", "a link-local address"},
		{"ll6.test", "a link-local address"},
		{"zero.test", "the unspecified address"},
		{"cgnat.test", "a shared (CGNAT) address"},
		{"host.test", "the gateway host's own address"},
		{"127.0.0.1", "a loopback address"},
		{"[::1]", "a loopback address"},
		{"[::ffff:127.0.0.1]", "a loopback address"},
		{"10.0.0.1", "a private address"},
	}
	e := newEnv(t, []string{"*"}, nil, nil)
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			resp, body := e.raw(t, "CONNECT "+tt.host+":"+port+" HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp.StatusCode != 403 || !strings.Contains(body, tt.kind) || !strings.Contains(body, "sandbox.egress.allow names it by address") {
				t.Errorf("CONNECT %s = %d %q, want 403 naming %q", tt.host, resp.StatusCode, body, tt.kind)
			}
			resp, body = e.raw(t, "GET http://"+tt.host+":"+port+"/ HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp.StatusCode != 403 || !strings.Contains(body, tt.kind) {
				t.Errorf("GET %s = %d %q, want 403 naming %q", tt.host, resp.StatusCode, body, tt.kind)
			}
		})
	}
	if d := e.net.dialed(); len(d) != 0 {
		t.Errorf("refused destinations were dialled: %v", d)
	}
	// Allowed by address, loopback is reachable.
	e2 := newEnv(t, []string{"*", "127.0.0.1"}, nil, nil)
	c := e2.client(t)
	if code, body := get(t, c, "http://local.test:"+port+"/"); code != 200 || body != "host service" {
		t.Errorf("allowed by address: %d %q", code, body)
	}
	recs := e2.audit.wait(t, 1)
	if recs[0].Rule != "127.0.0.1" || recs[0].Decision != audit.DecisionAllowed {
		t.Errorf("record %+v", recs[0])
	}
	// A port in the address rule limits it.
	e3 := newEnv(t, []string{"*", "127.0.0.1:1"}, nil, nil)
	if resp, _ := e3.raw(t, "GET http://local.test:"+port+"/ HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 403 {
		t.Errorf("address rule with another port: %d", resp.StatusCode)
	}
}

// TestDialsOnlyCheckedAddresses: of the addresses a name resolves to, only
// those that pass are dialled.
func TestDialsOnlyCheckedAddresses(t *testing.T) {
	e := newEnv(t, nil, nil, nil)
	code, _ := get(t, e.client(t), "http://mixed.test/")
	if code != 200 {
		t.Fatalf("GET = %d", code)
	}
	if d := e.net.dialed(); len(d) != 1 || d[0] != "93.184.215.14:80" {
		t.Errorf("dialled %v, want only 93.184.215.14:80", d)
	}
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, nil, nil, nil)
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n",                        // not a proxy request
		"GET ftp://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",        // another scheme
		"GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",      // https without CONNECT
		"CONNECT allowed.test HTTP/1.1\r\nHost: allowed.test\r\n\r\n",           // no port
		"CONNECT allowed.test:0 HTTP/1.1\r\nHost: allowed.test:0\r\n\r\n",       // bad port
		"CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\nHost: x\r\n\r\n",              // zone
		"GET http://bad_host!/ HTTP/1.1\r\nHost: bad_host!\r\n\r\n",             // not a name
		"CONNECT allowed.test:443:1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",     // junk
		"GET http://allowed.test:99999/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", // port out of range
	} {
		resp, body := e.raw(t, req)
		if resp.StatusCode != 400 {
			t.Errorf("%q = %d %q, want 400", req, resp.StatusCode, body)
		}
	}
	if d := e.net.dialed(); len(d) != 0 {
		t.Errorf("bad requests dialled %v", d)
	}
	// A header above the limit is refused before anything is dialled.
	e2 := newEnv(t, nil, nil, func(o *Options) { o.MaxHeaderBytes = 1024 })
	resp, _ := e2.raw(t, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX: "+strings.Repeat("a", 8<<10)+"\r\n\r\n")
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("huge header: %d", resp.StatusCode)
	}
}

// TestTunnelIdle: a tunnel that moves no byte is closed after IdleTimeout,
// and one that is busy in one direction only is not.
func TestTunnelIdle(t *testing.T) {
	e := newEnv(t, nil, nil, func(o *Options) { o.IdleTimeout = 300 * time.Millisecond })
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("read a byte from an idle tunnel")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("idle tunnel closed after %v", d)
	}
	recs := e.audit.wait(t, 1)
	if !strings.Contains(recs[0].Error, "idle") {
		t.Errorf("record %+v", recs[0])
	}
}

// TestMaxConns: past MaxConns, a new connection waits for one to close.
func TestMaxConns(t *testing.T) {
	e := newEnv(t, nil, nil, func(o *Options) { o.MaxConns = 1 })
	c1, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c1, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c1), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v %v", resp, err)
	}
	c2, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	io.WriteString(c2, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	c2.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	br := bufio.NewReader(c2)
	if _, err := br.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("second connection answered while the first is open: %v", err)
	}
	c1.Close()
	c2.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("second after the first closed: %v %v", resp, err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	os.Mkdir(dir, 0o700)
	p := filepath.Join(dir, SocketName)
	os.WriteFile(p, []byte("x"), 0o600)
	if _, err := Listen(p); err == nil {
		t.Error("Listen replaced a regular file")
	}
	os.Chmod(dir, 0o777)
	os.Remove(p)
	if _, err := Listen(p); err == nil {
		t.Error("Listen in a world-writable folder")
	}
}

type failingAudit struct {
	mu   sync.Mutex
	fail bool
	n    int
}

func (f *failingAudit) Log(audit.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.fail {
		return errors.New("disk full")
	}
	return nil
}

// TestAuditBroken: once a record cannot be written, new connections are
// refused (503) until the audit log works again.
func TestAuditBroken(t *testing.T) {
	fa := &failingAudit{fail: true}
	e := newEnv(t, nil, nil, func(o *Options) { o.Audit = fa })
	if resp, _ := e.raw(t, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode) // its record is written after it ran, and fails
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		fa.mu.Lock()
		n := fa.n
		fa.mu.Unlock()
		if n > 0 {
			break
		}
	}
	resp, body := e.raw(t, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if resp.StatusCode != 503 || !strings.Contains(body, "audit log") {
		t.Errorf("with a broken audit log: %d %q", resp.StatusCode, body)
	}
	if n := len(e.net.dialed()); n != 1 {
		t.Errorf("%d upstream dials, want only the first request's", n)
	}
	fa.mu.Lock()
	fa.fail = false
	fa.mu.Unlock()
	if resp, _ := e.raw(t, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n"); resp.StatusCode != 200 {
		t.Errorf("after the audit log recovered: %d", resp.StatusCode)
	}
}
