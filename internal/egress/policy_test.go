package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestParseRule(t *testing.T) {
	good := []string{"*", "*:443", "api.github.com", "API.GitHub.com.", "*.pypi.org", "registry.npmjs.org:443",
		"10.0.0.0/8", "10.1.2.3", "[::1]:8080", "[fd00::/8]:5432", "fd00::/8", "::1", "127.0.0.1:80", "::ffff:10.0.0.0/104"}
	for _, s := range good {
		if _, err := ParseRule(s); err != nil {
			t.Errorf("ParseRule(%q): %v", s, err)
		}
	}
	bad := []string{"", " ", "host:0", "host:65536", "host:x", "*.", "*.*.x", "a..b", "-x!", "http://x", "x/y",
		"10.0.0.0/33", "[::1", "[::1]x", "fe80::1%eth0", "a:b:c", "*x.org", strings.Repeat("a", 64) + ".org"}
	for _, s := range bad {
		if _, err := ParseRule(s); err == nil {
			t.Errorf("ParseRule(%q) accepted", s)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	name := func(n string, port int) Target { return Target{Name: n, Port: port} }
	addr := func(a string, port int) Target { return Target{Addr: netip.MustParseAddr(a), Port: port} }
	tests := []struct {
		allow, deny []string
		t           Target
		want        bool
		rule        string
	}{
		{nil, nil, name("example.com", 443), true, "*"},
		{nil, nil, addr("93.184.215.14", 443), true, "*"},
		{[]string{}, nil, name("example.com", 443), false, ""},
		{[]string{"api.github.com"}, nil, name("api.github.com", 443), true, "api.github.com"},
		{[]string{"API.GitHub.com."}, nil, name("api.github.com", 80), true, "API.GitHub.com."},
		{[]string{"api.github.com"}, nil, name("github.com", 443), false, ""},
		{[]string{"api.github.com"}, nil, name("xapi.github.com", 443), false, ""},
		{[]string{"*.pypi.org"}, nil, name("files.pypi.org", 443), true, "*.pypi.org"},
		{[]string{"*.pypi.org"}, nil, name("a.b.pypi.org", 443), true, "*.pypi.org"},
		{[]string{"*.pypi.org"}, nil, name("pypi.org", 443), false, ""},
		{[]string{"*.pypi.org"}, nil, name("evilpypi.org", 443), false, ""},
		{[]string{"registry.npmjs.org:443"}, nil, name("registry.npmjs.org", 443), true, "registry.npmjs.org:443"},
		{[]string{"registry.npmjs.org:443"}, nil, name("registry.npmjs.org", 80), false, ""},
		{[]string{"*:443"}, nil, name("x.org", 443), true, "*:443"},
		{[]string{"*:443"}, nil, name("x.org", 22), false, ""},
		{[]string{"*"}, []string{"*.evil.org"}, name("a.evil.org", 443), false, "*.evil.org"},
		{[]string{"*"}, []string{"evil.org:22"}, name("evil.org", 443), true, "*"},
		{[]string{"*"}, []string{"evil.org:22"}, name("evil.org", 22), false, "evil.org:22"},
		// Name rules never match an address literal, address rules never a name.
		{[]string{"example.com"}, nil, addr("93.184.215.14", 443), false, ""},
		{[]string{"93.184.215.0/24"}, nil, name("example.com", 443), false, ""},
		{[]string{"93.184.215.0/24"}, nil, addr("93.184.215.14", 443), true, "93.184.215.0/24"},
		{[]string{"*"}, []string{"93.184.215.14"}, addr("93.184.215.14", 443), false, "93.184.215.14"},
	}
	for _, tt := range tests {
		p, err := NewPolicy(tt.allow, tt.deny)
		if err != nil {
			t.Fatal(err)
		}
		d := p.Check(tt.t)
		if d.Allowed != tt.want || d.Rule != tt.rule || (!d.Allowed && d.Reason == "") {
			t.Errorf("allow %q deny %q: Check(%s) = %+v, want allowed %v by %q", tt.allow, tt.deny, tt.t, d, tt.want, tt.rule)
		}
	}
}

func TestPolicyCheckAddr(t *testing.T) {
	local := []netip.Prefix{netip.MustParsePrefix("93.184.215.99/32")}
	tests := []struct {
		allow, deny []string
		a           string
		port        int
		want        bool
	}{
		{nil, nil, "93.184.215.14", 443, true},
		{nil, nil, "127.0.0.1", 443, false},
		{nil, nil, "127.1.2.3", 443, false},
		{nil, nil, "::1", 443, false},
		{nil, nil, "::ffff:127.0.0.1", 443, false},
		{nil, nil, "10.0.0.1", 443, false},
		{nil, nil, "172.17.0.1", 443, false}, // docker0's usual address
		{nil, nil, "192.168.1.1", 443, false},
		{nil, nil, "169.254.169.254", 80, false}, // cloud metadata
		{nil, nil, "fe80::1", 443, false},
		{nil, nil, "fd00::1", 443, false},
		{nil, nil, "0.0.0.0", 443, false},
		{nil, nil, "100.64.0.1", 443, false},
		{nil, nil, "224.0.0.1", 443, false},
		{nil, nil, "255.255.255.255", 443, false},
		{nil, nil, "64:ff9b::7f00:1", 443, false},
		{nil, nil, "93.184.215.99", 443, false}, // the host's own
		{[]string{"*", "127.0.0.1"}, nil, "127.0.0.1", 443, true},
		{[]string{"*", "127.0.0.0/8"}, nil, "127.0.0.1", 443, true},
		{[]string{"*", "127.0.0.1:80"}, nil, "127.0.0.1", 443, false},
		{[]string{"*", "::ffff:127.0.0.1"}, nil, "127.0.0.1", 443, true},
		{[]string{"*", "10.0.0.0/8"}, nil, "10.9.9.9", 443, true},
		{[]string{"*", "93.184.215.99"}, nil, "93.184.215.99", 443, true},
		{[]string{"*"}, []string{"93.184.215.0/24"}, "93.184.215.14", 443, false},
		{[]string{"*", "10.0.0.0/8"}, []string{"10.0.0.5"}, "10.0.0.5", 443, false},
	}
	for _, tt := range tests {
		p, err := NewPolicy(tt.allow, tt.deny)
		if err != nil {
			t.Fatal(err)
		}
		tg := Target{Name: "x.test", Port: tt.port}
		d := p.CheckAddr(tg, netip.MustParseAddr(tt.a), local)
		if d.Allowed != tt.want || (!d.Allowed && d.Reason == "") {
			t.Errorf("allow %q deny %q: CheckAddr(%s:%d) = %+v, want %v", tt.allow, tt.deny, tt.a, tt.port, d, tt.want)
		}
	}
}

func TestNewPolicyErrors(t *testing.T) {
	_, err := NewPolicy([]string{"ok.org", "bad:x"}, []string{"[::1"})
	if err == nil || !strings.Contains(err.Error(), "allow[1]") || !strings.Contains(err.Error(), "deny[0]") {
		t.Errorf("err = %v", err)
	}
}

func TestParseHostPort(t *testing.T) {
	tests := []struct {
		in      string
		def     int
		want    string // Target.String(), "" for an error
		literal bool
	}{
		{"example.com:443", -1, "example.com:443", false},
		{"Example.COM.:443", -1, "example.com:443", false},
		{"example.com", 80, "example.com:80", false},
		{"example.com", -1, "", false},
		{"[::1]:443", -1, "[::1]:443", true},
		{"[::1]", 80, "[::1]:80", true},
		{"[::ffff:127.0.0.1]:80", -1, "127.0.0.1:80", true},
		{"127.0.0.1:80", -1, "127.0.0.1:80", true},
		{"::1", 80, "", false},
		{"example.com:0", -1, "", false},
		{"example.com:080", -1, "", false},
		{"example.com:+80", -1, "", false},
		{"example.com:65536", -1, "", false},
		{"[fe80::1%eth0]:443", -1, "", false},
		{"exa mple.com:443", -1, "", false},
		{"a@b.com:443", -1, "", false},
		{":443", -1, "", false},
	}
	for _, tt := range tests {
		got, err := parseHostPort(tt.in, tt.def)
		if tt.want == "" {
			if err == nil {
				t.Errorf("parseHostPort(%q) = %s, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got.String() != tt.want || got.Addr.IsValid() != tt.literal {
			t.Errorf("parseHostPort(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// FuzzPolicy: rules and targets from outside input never panic; a rule
// that parses matches what it names; a deny rule always wins.
func FuzzPolicy(f *testing.F) {
	for _, s := range []string{"*", "*.pypi.org", "api.github.com:443", "10.0.0.0/8", "[::1]:80", "[fd00::/8]"} {
		f.Add(s, "files.pypi.org:443")
	}
	f.Fuzz(func(t *testing.T, rule, target string) {
		r, err := ParseRule(rule)
		if err == nil && r.name != "" {
			if !r.matchName(r.name, max(r.port, 1)) {
				t.Errorf("rule %q does not match its own name", rule)
			}
		}
		tg, err := parseHostPort(target, 80)
		if err != nil {
			return
		}
		if tg.Port < 1 || tg.Port > 65535 || (tg.Name == "") == !tg.Addr.IsValid() {
			t.Fatalf("parseHostPort(%q) = %+v", target, tg)
		}
		p, err := NewPolicy([]string{"*", rule}, []string{rule})
		if err != nil {
			return
		}
		d := p.Check(tg)
		if d.Allowed && d.Rule == rule && rule != "*" {
			t.Errorf("rule %q allowed %s although it is also a deny rule", rule, tg)
		}
		if tg.Addr.IsValid() && Special(tg.Addr, nil) != "" {
			open, _ := NewPolicy(nil, nil)
			if open.CheckAddr(tg, tg.Addr, nil).Allowed {
				t.Errorf("the default policy lets %s reach a special address", tg)
			}
		}
	})
}

// FuzzProxyRequest feeds arbitrary bytes to the proxy as a sandbox would:
// it must never panic, and it must never dial an address the policy
// refuses (here: everything but the one allowed test host).
func FuzzProxyRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\nhello",
		"CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n",
		"GET http://local.test:80/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"POST http://allowed.test/ HTTP/1.1\r\nHost: local.test\r\nContent-Length: 3\r\n\r\nabcGET http://other.test/ HTTP/1.1\r\n\r\n",
		"GET http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"CONNECT [::ffff:7f00:1]:80 HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	allowed := netip.MustParseAddr("93.184.215.14")
	res := &fakeNet{names: map[string][]netip.Addr{
		"allowed.test": {allowed},
		"other.test":   {netip.MustParseAddr("93.184.215.15")},
		"local.test":   {netip.MustParseAddr("127.0.0.1")},
	}}
	pol, _ := NewPolicy([]string{"allowed.test"}, nil)
	f.Fuzz(func(t *testing.T, req []byte) {
		dialed := make(chan string, 16)
		p := New("fuzz", pol, &Options{
			Resolver: res, LocalAddrs: []netip.Prefix{}, IdleTimeout: 200 * time.Millisecond, HeaderTimeout: 200 * time.Millisecond,
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dialed <- addr
				c1, c2 := net.Pipe()
				go func() { io.Copy(io.Discard, c2); c2.Close() }()
				return c1, nil
			},
		})
		defer p.Close()
		ln := newPipeListener()
		go p.Serve(ln)
		c := ln.dial()
		c.SetDeadline(time.Now().Add(time.Second))
		go func() { c.Write(req); time.Sleep(20 * time.Millisecond); c.Close() }()
		io.Copy(io.Discard, bufio.NewReader(c))
		p.Close()
		close(dialed)
		for a := range dialed {
			ap, err := netip.ParseAddrPort(a)
			if err != nil || ap.Addr() != allowed {
				t.Errorf("request %q dialled %s", req, a)
			}
		}
	})
}

// pipeListener is a net.Listener of in-memory connections.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial() net.Conn {
	c1, c2 := net.Pipe()
	select {
	case l.conns <- c2:
	case <-time.After(time.Second):
	}
	return c1
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
