package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Credential is a header the proxy adds to every request the sandbox sends
// to Host (sandbox.egress.credentials). The sandbox never sees Value: the
// proxy terminates TLS for Host with a leaf of the home's CA, sets the
// header and forwards over TLS verified against the real roots.
type Credential struct {
	Host   string // a DNS name, normalised; port 443
	Header string
	Value  string
}

// credsFor returns the credentials of host t, if it is intercepted.
func (p *Proxy) credsFor(t Target) []Credential {
	if p.opts.CA == nil || t.Name == "" || t.Port != 443 {
		return nil
	}
	var out []Credential
	for _, c := range p.opts.Credentials {
		if c.Host == t.Name {
			out = append(out, c)
		}
	}
	return out
}

// prefixConn is a conn whose first bytes were already read into a buffer.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// intercept serves the tunnel to t as TLS terminated here: each request
// of the sandbox gets the credentials' headers and goes to up (dialled,
// checked) over TLS verified for t.Name; each response has every
// credential value masked before the sandbox gets it. HTTP/1.1 only.
func (p *Proxy) intercept(client net.Conn, br *bufio.Reader, up net.Conn, t Target, creds []Credential, rc *rec) error {
	idle := p.opts.IdleTimeout
	leaf, err := p.opts.CA.Leaf(t.Name)
	if err != nil {
		return err
	}
	cc := &countConn{Conn: &prefixConn{Conn: client, r: io.MultiReader(bytes.NewReader(peekAll(br)), client)}, up: &rc.up, down: &rc.down}
	ctls := tls.Server(cc, &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	defer ctls.Close()
	ctls.SetDeadline(time.Now().Add(p.opts.HeaderTimeout))
	if err := ctls.Handshake(); err != nil {
		return fmt.Errorf("TLS with the sandbox for %s: %w", t.Name, err)
	}
	roots := p.opts.RootCAs // nil: the gateway host's roots
	utls := tls.Client(up, &tls.Config{ServerName: t.Name, RootCAs: roots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	defer utls.Close()
	utls.SetDeadline(time.Now().Add(p.opts.DialTimeout))
	if err := utls.HandshakeContext(context.Background()); err != nil {
		return fmt.Errorf("TLS to %s: %w", t.Name, err)
	}
	secrets := secretsOf(p.opts.Credentials)
	cr := bufio.NewReader(ctls)
	ur := bufio.NewReader(utls)
	host := t.Name
	for {
		ctls.SetDeadline(time.Now().Add(idle))
		req, err := http.ReadRequest(cr)
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("read request from the sandbox: %w", err)
		}
		// The credential goes to the verified host only, whatever Host the
		// sandbox wrote.
		req.Host = host
		req.Header.Del("Accept-Encoding") // an encoded echo could not be redacted
		// No protocol switch (the relay after it would not be redacted) and
		// no 100 Continue (this loop reads one response per request).
		req.Header.Del("Upgrade")
		req.Header.Del("Connection")
		req.Header.Del("Expect")
		for _, c := range creds {
			req.Header.Set(c.Header, c.Value)
		}
		utls.SetDeadline(time.Now().Add(idle))
		if err := req.Write(utls); err != nil {
			return fmt.Errorf("send request to %s: %w", t.Name, err)
		}
		resp, err := http.ReadResponse(ur, req)
		if err != nil {
			return fmt.Errorf("read response from %s: %w", t.Name, err)
		}
		if resp.StatusCode < 200 {
			resp.Body.Close()
			return fmt.Errorf("%s answered %s, which an intercepted connection does not relay", t.Name, resp.Status)
		}
		for k, vs := range resp.Header {
			for i, v := range vs {
				vs[i] = string(redact([]byte(v), secrets))
			}
			resp.Header[k] = vs
		}
		resp.Body = &redactReader{r: resp.Body, c: resp.Body, secrets: secrets, keep: maxLen(secrets) - 1}
		ctls.SetDeadline(time.Now().Add(idle))
		err = resp.Write(ctls)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("send response to the sandbox: %w", err)
		}
		if resp.Close || req.Close {
			return nil
		}
	}
}

func peekAll(br *bufio.Reader) []byte {
	n := br.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := br.Peek(n)
	return append([]byte(nil), b...)
}

// countConn counts the TLS bytes of the sandbox's side.
type countConn struct {
	net.Conn
	up, down interface{ Add(int64) int64 }
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.up.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.down.Add(int64(n))
	return n, err
}

// secretsOf lists what is masked in responses: each credential value and
// each space-separated word of it of 8 bytes or more (the token of
// "Bearer <token>", which a server may echo alone).
func secretsOf(creds []Credential) [][]byte {
	var out [][]byte
	for _, c := range creds {
		if c.Value == "" {
			continue
		}
		out = append(out, []byte(c.Value))
		if f := strings.Fields(c.Value); len(f) > 1 {
			for _, w := range f {
				if len(w) >= 8 {
					out = append(out, []byte(w))
				}
			}
		}
	}
	return out
}

func maxLen(ss [][]byte) int {
	m := 1
	for _, s := range ss {
		m = max(m, len(s))
	}
	return m
}

// redact replaces every occurrence of every secret in b (found in the
// original bytes, overlaps included) with as many '*': same length, so a
// Content-Length stays right.
func redact(b []byte, secrets [][]byte) []byte {
	mask := make([]bool, len(b))
	markSecrets(b, mask, secrets)
	applyMask(b, mask)
	return b
}

func markSecrets(b []byte, mask []bool, secrets [][]byte) {
	for _, s := range secrets {
		for off := 0; ; {
			i := bytes.Index(b[off:], s)
			if i < 0 {
				break
			}
			for j := off + i; j < off+i+len(s); j++ {
				mask[j] = true
			}
			off += i + 1
		}
	}
}

func applyMask(b []byte, mask []bool) {
	for i, m := range mask {
		if m {
			b[i] = '*'
		}
	}
}

// redactReader masks secrets in a stream. It keeps the original bytes of
// the last keep (longest secret - 1) bytes until more arrive, so that a
// secret split across reads, or overlapping another, is found as in the
// whole body.
type redactReader struct {
	r       io.Reader
	c       io.Closer
	secrets [][]byte
	keep    int
	buf     []byte // original bytes not yet given out
	mask    []bool // which of buf are part of a secret
	out     []byte
	eof     bool
}

func (r *redactReader) Read(b []byte) (int, error) {
	for len(r.out) == 0 {
		if r.eof {
			if len(r.buf) == 0 {
				return 0, io.EOF
			}
			r.emit(len(r.buf))
			break
		}
		chunk := make([]byte, 32<<10)
		n, err := r.r.Read(chunk)
		r.buf = append(r.buf, chunk[:n]...)
		r.mask = append(r.mask, make([]bool, n)...)
		markSecrets(r.buf, r.mask, r.secrets)
		if err == io.EOF {
			r.eof = true
		} else if err != nil {
			return 0, err
		}
		if safe := len(r.buf) - r.keep; safe > 0 && !r.eof {
			r.emit(safe)
		}
	}
	n := copy(b, r.out)
	r.out = r.out[n:]
	return n, nil
}

// emit gives out the first n bytes of buf, masked.
func (r *redactReader) emit(n int) {
	out := append([]byte(nil), r.buf[:n]...)
	applyMask(out, r.mask[:n])
	r.out = out
	r.buf = append(r.buf[:0:0], r.buf[n:]...)
	r.mask = append(r.mask[:0:0], r.mask[n:]...)
}

func (r *redactReader) Close() error { return r.c.Close() }

// injectedHeaders names the headers added, for the audit record.
func injectedHeaders(creds []Credential) string {
	hs := make([]string, 0, len(creds))
	for _, c := range creds {
		hs = append(hs, http.CanonicalHeaderKey(c.Header))
	}
	return strings.Join(hs, ",")
}

// CredentialHost checks the host of a credential: a DNS name (no address,
// wildcard or port), returned normalised.
func CredentialHost(s string) (string, error) {
	if strings.ContainsAny(s, ":*/[]") {
		return "", fmt.Errorf("want a host name without wildcard or port, got %q", s)
	}
	t, err := parseHostPort(s, 443)
	if err != nil || t.Name == "" {
		return "", fmt.Errorf("want a host name (not an address), got %q", s)
	}
	return t.Name, nil
}
