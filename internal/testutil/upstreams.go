package testutil

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// Resolver answers the names it holds with their addresses and any other
// name as not found: the DNS of a test (an egress proxy's Resolver).
type Resolver map[string][]netip.Addr

// LookupNetIP implements the egress proxy's resolver.
func (r Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Upstreams stand for public web servers behind an egress proxy under
// test: a plain HTTP server and a TLS one (its certificate names
// example.com, trusted by Roots), reached at Public's ports 80 and 443
// through Dial. Each answers "<plain|tls> <host><path>" (/ws: 400, no
// WebSocket here) and records the Authorization header of each request,
// as Auth("tls /path") tells.
type Upstreams struct {
	Public netip.Addr
	Roots  *x509.CertPool

	plain, tls *httptest.Server
	mu         sync.Mutex
	auths      map[string]string // "plain /path" or "tls /path" -> Authorization
}

// NewUpstreams starts the servers; they stop when the test ends.
func NewUpstreams(t testing.TB) *Upstreams {
	u := &Upstreams{Public: netip.MustParseAddr("8.8.4.4"), Roots: x509.NewCertPool(), auths: map[string]string{}}
	echo := func(kind string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.mu.Lock()
			u.auths[kind+" "+r.URL.Path] = r.Header.Get("Authorization")
			u.mu.Unlock()
			if r.URL.Path == "/ws" {
				http.Error(w, "no websocket here", http.StatusBadRequest)
				return
			}
			host, _, _ := strings.Cut(r.Host, ":")
			fmt.Fprintf(w, "%s %s%s", kind, host, r.URL.Path)
		})
	}
	u.plain = httptest.NewServer(echo("plain"))
	t.Cleanup(u.plain.Close)
	u.tls = httptest.NewTLSServer(echo("tls"))
	t.Cleanup(u.tls.Close)
	u.Roots.AddCert(u.tls.Certificate())
	return u
}

// Dial connects as the proxy's dialer would, Public:80 and Public:443
// to the servers and any other address as it is.
func (u *Upstreams) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	switch addr {
	case netip.AddrPortFrom(u.Public, 80).String():
		addr = u.plain.Listener.Addr().String()
	case netip.AddrPortFrom(u.Public, 443).String():
		addr = u.tls.Listener.Addr().String()
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Saw reports whether a request for "<plain|tls> /path" arrived.
func (u *Upstreams) Saw(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.auths[key]
	return ok
}

// Auth is the Authorization header the request for "<plain|tls> /path"
// carried ("" when none, or no such request).
func (u *Upstreams) Auth(key string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.auths[key]
}

// Auths are all the requests seen and their Authorization headers, for a
// test's failure message.
func (u *Upstreams) Auths() map[string]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.auths)
}
