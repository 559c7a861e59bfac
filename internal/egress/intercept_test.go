package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

const testSecret = "Bearer ghp_s3cr3tT0kenValue0123456789"

var pubCreds = netip.MustParseAddr("93.184.215.20")

type credsWorld struct {
	*env
	ca       *CA // the proxy's CA (what the sandbox trusts)
	hits     atomic.Int64
	upstream *httptest.Server
}

// newCredsWorld is a proxy with a credential for creds.test, whose real
// server (on loopback) has a certificate of its own test root.
func newCredsWorld(t *testing.T, trustUpstream bool) *credsWorld {
	t.Helper()
	w := &credsWorld{}
	upCA, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := upCA.Leaf("creds.test")
	if err != nil {
		t.Fatal(err)
	}
	w.upstream = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		got := r.Header.Get("Authorization")
		rw.Header().Set("X-Echo", strings.TrimPrefix(got, "Bearer ")) // the token alone
		fmt.Fprintf(rw, "host=%s received=%v echo=%s", r.Host, got == testSecret, got)
	}))
	w.upstream.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	w.upstream.StartTLS()
	t.Cleanup(w.upstream.Close)
	w.ca, err = NewCA()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if trustUpstream {
		roots = upCA.Pool()
	}
	w.env = newEnv(t, []string{"creds.test:443", "allowed.test:443"}, nil, func(o *Options) {
		o.CA = w.ca
		o.RootCAs = roots
		o.Credentials = []Credential{{Host: "creds.test", Header: "Authorization", Value: testSecret}}
	})
	w.net.names["creds.test"] = []netip.Addr{pubCreds}
	w.net.routes[netip.AddrPortFrom(pubCreds, 443).String()] = w.upstream.Listener.Addr().String()
	return w
}

// sandboxClient trusts only the proxy's CA, as SSL_CERT_FILE makes a
// sandbox program do.
func (w *credsWorld) sandboxClient(t *testing.T, roots *x509.CertPool) *http.Client {
	pu, _ := url.Parse("http://127.0.0.1:3128")
	tr := &http.Transport{
		Proxy: http.ProxyURL(pu),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", w.sock)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func TestCredentialInjected(t *testing.T) {
	w := newCredsWorld(t, true)
	c := w.sandboxClient(t, w.ca.Pool())
	for range 2 { // a kept-alive intercepted connection serves several requests
		req, _ := http.NewRequest("GET", "https://creds.test/echo-headers", nil)
		req.Header.Set("Authorization", "Bearer planted-by-the-sandbox")
		req.Host = "evil.test" // the credential goes to creds.test only
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "host=creds.test received=true") {
			t.Errorf("server did not receive the credential: %q", body)
		}
		if bytes.Contains(body, []byte("s3cr3t")) || resp.Header.Get("X-Echo") != strings.Repeat("*", len(testSecret)-len("Bearer ")) {
			t.Errorf("the sandbox saw the secret: %q %q", body, resp.Header.Get("X-Echo"))
		}
		if !strings.Contains(string(body), "echo="+strings.Repeat("*", len(testSecret))) {
			t.Errorf("echo not masked: %q", body)
		}
	}
	c.CloseIdleConnections()
	r := w.audit.wait(t, 1)[0]
	if r.Injected != "Authorization" || r.Host != "creds.test" || r.Error != "" {
		t.Errorf("record = %+v", r)
	}
	b, _ := json.Marshal(r)
	if bytes.Contains(b, []byte("s3cr3t")) {
		t.Errorf("the audit record holds the secret: %s", b)
	}
}

// Hosts without a credential stay opaque tunnels: the sandbox sees the
// real server's certificate, not one of the proxy's CA.
func TestOtherHostsNotIntercepted(t *testing.T) {
	w := newCredsWorld(t, true)
	c := w.client(t) // trusts the upstream httptest root, ServerName example.com
	if code, body := get(t, c, "https://allowed.test/s"); code != 200 || body != "secure hello /s" {
		t.Fatalf("GET = %d %q", code, body)
	}
	c.CloseIdleConnections()
	if r := w.audit.wait(t, 1)[0]; r.Injected != "" {
		t.Errorf("record = %+v", r)
	}
}

// The upstream of an intercepted host must verify against the roots: a
// server the roots do not vouch for never gets the credential.
func TestInterceptVerifiesUpstream(t *testing.T) {
	w := newCredsWorld(t, false)
	c := w.sandboxClient(t, w.ca.Pool())
	resp, err := c.Get("https://creds.test/echo-headers")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got %d from an unverified upstream", resp.StatusCode)
	}
	if w.hits.Load() != 0 {
		t.Errorf("an unverified upstream got %d requests", w.hits.Load())
	}
	if r := w.audit.wait(t, 1)[0]; !strings.Contains(r.Error, "TLS to creds.test") {
		t.Errorf("record = %+v", r)
	}
}

func TestRedactReaderSplitSecret(t *testing.T) {
	secret := []byte("TOKEN123")
	for _, in := range []string{"xxTOKEN123yy", "TOKEN123", "aTOKEN12", "TOKEN123TOKEN123", "", "TOKTOKEN123"} {
		want := strings.ReplaceAll(in, "TOKEN123", "********")
		r := &redactReader{r: iotest.OneByteReader(strings.NewReader(in)), c: io.NopCloser(nil), secrets: [][]byte{secret}, keep: len(secret) - 1}
		got, err := io.ReadAll(r)
		if err != nil || string(got) != want {
			t.Errorf("redact(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestLoadOrCreateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "egress-ca")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode = %v, %v", fi.Mode(), err)
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil || !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
		t.Fatalf("reload gave another CA (%v)", err)
	}
	leaf, err := again.Leaf("creds.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "creds.test", Roots: ca.Pool()}); err != nil {
		t.Errorf("leaf does not verify: %v", err)
	}
	os.Remove(filepath.Join(dir, CAKeyFile))
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Error("a CA without its key was accepted")
	}
}

// FuzzRedactReader: however the upstream's bytes are split, the stream
// the sandbox gets is the whole body with every secret masked.
func FuzzRedactReader(f *testing.F) {
	f.Add([]byte("xxTOKEN123yyTOKEN123"), uint8(1))
	f.Add([]byte("TOKETOKEN123N123"), uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		secrets := [][]byte{[]byte("TOKEN123"), []byte("N12")}
		want := redact(append([]byte(nil), in...), secrets)
		var src io.Reader = bytes.NewReader(in)
		if chunk%2 == 0 {
			src = iotest.OneByteReader(src)
		} else {
			src = iotest.HalfReader(src)
		}
		r := &redactReader{r: src, c: io.NopCloser(nil), secrets: secrets, keep: maxLen(secrets) - 1}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
		if bytes.Contains(got, []byte("TOKEN123")) {
			t.Fatalf("secret left in %q", got)
		}
	})
}
