// Package egress owns every connection out of a sandbox: the gateway's
// egress proxy (HTTP forward proxying and CONNECT tunnels), the per-agent
// policy of sandbox.egress, and the per-agent Unix socket the proxy serves.
//
// In the "proxy" network mode a sandbox has no network but loopback; the
// in-sandbox forwarder (package egress/forwarder, run by `beige-sandbox
// idle`) relays each connection made to 127.0.0.1:3128 to the agent's
// socket, $BEIGE_HOME/sockets/<agent>/egress.sock. The proxy knows the agent
// from the socket it accepted on, never from anything the sandbox sends. It
// resolves names itself and checks every resolved address, dials only
// checked addresses, and writes one audit record (type "net") per tunnel or
// forwarded request.
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/audit"
)

// Auditor receives one record per connection; *audit.Logger is one.
type Auditor interface {
	Log(audit.Record) error
}

// Resolver resolves names; net.DefaultResolver is the production one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Approver asks a human whether a connection may be made.
type Approver interface {
	// EgressRule returns the ask rule of agent that matches host and port,
	// and how long to wait for an answer.
	EgressRule(agent, host string, port int) (rule string, timeout time.Duration, ok bool)
	// EgressRemembered reports whether "always" was answered for agent and
	// hostPort: the connection goes on without asking.
	EgressRemembered(agent, hostPort string) bool
	// Wait asks and waits for the answer, the timeout or ctx.
	Wait(ctx context.Context, req approval.Request, timeout time.Duration) (approval.Outcome, error)
}

// Defaults of Options.
const (
	DefaultMaxConns       = 256
	DefaultMaxHeaderBytes = 32 << 10
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultDialTimeout    = 15 * time.Second
	DefaultHeaderTimeout  = 30 * time.Second
)

// Options tune a Proxy; a nil *Options and zero fields mean the defaults.
type Options struct {
	Audit  Auditor
	Logger *slog.Logger
	// Resolver resolves the names the sandbox asks for (default
	// net.DefaultResolver). Tests inject their own.
	Resolver Resolver
	// Dial connects to a checked address, "ip:port" (default a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// LocalAddrs are the gateway host's own addresses, refused like
	// loopback unless allowed by address (default: every interface address).
	LocalAddrs []netip.Prefix
	// MaxConns caps the sandbox's connections to the proxy served at once
	// (default 256); past it new connections wait.
	MaxConns int
	// MaxHeaderBytes bounds a request's header from the sandbox (default
	// 32 KiB) and, times 32, a response's header from upstream.
	MaxHeaderBytes int
	// IdleTimeout closes a kept-alive sandbox connection, a tunnel or an
	// upstream connection that moved no byte for this long (default 5 min).
	IdleTimeout time.Duration
	// DialTimeout bounds resolving and connecting (default 15 s).
	DialTimeout time.Duration
	// HeaderTimeout bounds reading a request's header (default 30 s).
	HeaderTimeout time.Duration
	// Credentials are injected into the requests to their hosts (port
	// 443), whose TLS the proxy then terminates with CA; without a CA no
	// host is intercepted. Every other CONNECT stays an opaque tunnel.
	Credentials []Credential
	CA          *CA
	// RootCAs verify the upstream of an intercepted host (default the
	// gateway host's roots). Tests inject their own.
	RootCAs *x509.CertPool
	// Approver, if set, holds every connection the policy allows and one
	// of the agent's approval.egress rules matches until a human answers
	// (*approval.Broker is one).
	Approver Approver
	// OnConnection, if set, is told of every connection the proxy made or
	// refused, once it is over (the beige_egress_connections_total counter).
	OnConnection func(agent string, allowed bool)
}

// Proxy is the egress proxy of one agent.
type Proxy struct {
	agent string
	pol   *Policy
	opts  Options
	log   *slog.Logger
	tr    *http.Transport
	rp    *httputil.ReverseProxy
	srv   *http.Server

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // hijacked tunnels, closed by Close
	closed bool

	// auditBroken is set when a record could not be written: new
	// connections are refused until one can be audited again.
	auditBroken atomic.Bool
}

// New returns the proxy of agent with its policy.
func New(agent string, pol *Policy, opts *Options) *Proxy {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		o.Dial = d.DialContext
	}
	if o.LocalAddrs == nil {
		o.LocalAddrs = HostAddrs()
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	p := &Proxy{agent: agent, pol: pol, opts: o, log: o.Logger.With("agent", agent), conns: map[net.Conn]struct{}{}}
	p.tr = &http.Transport{
		Proxy: nil, // never the gateway's own HTTP_PROXY
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			t, err := parseHostPort(addr, 0)
			if err != nil {
				return nil, err
			}
			c, d, err := p.dial(ctx, t)
			if err != nil {
				return nil, err
			}
			return &checkedConn{Conn: c, rule: d.Rule}, nil
		},
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    16,
		MaxConnsPerHost:        o.MaxConns,
		IdleConnTimeout:        o.IdleTimeout,
		ResponseHeaderTimeout:  o.IdleTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: int64(o.MaxHeaderBytes) * 32,
		DisableCompression:     true, // pass bodies through as they come
	}
	errLog := slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)
	p.rp = &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.Host },
		Transport:    p.tr,
		ErrorLog:     errLog,
		ErrorHandler: p.forwardError,
	}
	p.srv = &http.Server{
		Handler:           p,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ReadHeaderTimeout: o.HeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		ErrorLog:          errLog,
	}
	return p
}

// Serve answers the connections of ln (the agent's socket) until Close;
// it returns nil after Close.
func (p *Proxy) Serve(ln net.Listener) error {
	err := p.srv.Serve(limitListener(ln, p.opts.MaxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving: it closes the listener, every sandbox connection
// and every tunnel.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	return err
}

// ServeHTTP handles one request of the sandbox: CONNECT opens a tunnel,
// a request with an absolute http:// URL is forwarded.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if p.auditBroken.Load() {
		// Nothing goes out unaudited. This refusal is itself offered to the
		// audit log; if it is written, the log works again.
		p.audit(&rec{t: Target{Name: "unknown", Port: 0}, method: sanitizeHeader(r.Method), start: start,
			decision: Decision{Rule: "audit", Reason: "the audit log could not be written"}})
		if p.auditBroken.Load() {
			fail(w, http.StatusServiceUnavailable, "the gateway cannot write its audit log, so no connection is made")
			return
		}
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r, start)
		return
	}
	p.forward(w, r, start)
}

// rec is the audit record of one connection being made.
type rec struct {
	t        Target
	method   string
	start    time.Time
	decision Decision
	err      string
	injected string // the headers added to an intercepted connection
	// approvedBy and approval say how an approval rule was answered.
	approvedBy, approval string
	up, down             atomic.Int64
}

func (p *Proxy) audit(r *rec) {
	ms := time.Since(r.start).Milliseconds()
	up, down := r.up.Load(), r.down.Load()
	ar := audit.Record{
		Agent: p.agent, Phase: audit.PhaseFinished, Type: audit.TypeNet, Tool: "egress",
		Decision: audit.DecisionAllowed, Target: audit.TargetGateway, DurationMs: &ms,
		Host: r.t.Host(), Port: r.t.Port, Method: r.method, Rule: r.decision.Rule,
		BytesUp: &up, BytesDown: &down, Error: r.err, Injected: r.injected,
		ApprovedBy: r.approvedBy, Approval: r.approval,
	}
	if !r.decision.Allowed {
		ar.Decision = audit.DecisionDenied
		if ar.Error == "" {
			ar.Error = r.decision.Reason
		}
	}
	if p.opts.OnConnection != nil {
		p.opts.OnConnection(p.agent, r.decision.Allowed)
	}
	if p.opts.Audit == nil {
		return
	}
	if err := p.opts.Audit.Log(ar); err != nil {
		p.auditBroken.Store(true)
		p.log.Error("cannot write the audit record of an egress connection; refusing new ones until it can", "host", ar.Host, "port", ar.Port, "err", err)
		return
	}
	p.auditBroken.Store(false)
}

// DeniedError is a connection the policy refused.
type DeniedError struct{ Decision Decision }

func (e *DeniedError) Error() string { return "egress: " + e.Decision.Reason }

// deny answers 403 with a text that names the rule, so that the model
// understands why.
func deny(w http.ResponseWriter, d Decision) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Connection", "close")
	if d.Rule != "" {
		h.Set("X-Beige-Egress-Rule", sanitizeHeader(d.Rule))
	}
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "403 Forbidden by the beige egress proxy: %s.\n", d.Reason)
}

func sanitizeHeader(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// fail answers a status with a short text (the request was not forwarded).
func fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	fmt.Fprintf(w, "%d %s (beige egress proxy): %s\n", code, http.StatusText(code), msg)
}

// connect opens a CONNECT tunnel: after the 200 it is a plain byte relay.
// (Credential injection can later terminate TLS here for the hosts that
// need it, before the relay.)
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, start time.Time) {
	authority := r.URL.Host
	if authority == "" {
		authority = r.Host
	}
	t, err := parseHostPort(authority, -1)
	if err != nil {
		fail(w, http.StatusBadRequest, "CONNECT wants host:port: "+err.Error())
		return
	}
	rc := &rec{t: t, method: http.MethodConnect, start: start}
	defer p.audit(rc)
	rc.decision = p.pol.Check(t)
	if !rc.decision.Allowed {
		deny(w, rc.decision)
		return
	}
	if !p.approve(w, r, rc) {
		return
	}
	up, d, err := p.dial(r.Context(), t)
	if d.Rule != "" {
		rc.decision.Rule = d.Rule
	}
	if err != nil {
		var de *DeniedError
		if errors.As(err, &de) {
			rc.decision = de.Decision
			deny(w, de.Decision)
			return
		}
		rc.err = err.Error()
		fail(w, http.StatusBadGateway, err.Error())
		return
	}
	defer up.Close()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		rc.err = "hijack: " + err.Error()
		fail(w, http.StatusInternalServerError, "cannot open a tunnel")
		return
	}
	defer client.Close()
	if !p.track(client, true) {
		return
	}
	defer p.track(client, false)
	client.SetDeadline(time.Time{})
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rc.err = err.Error()
		return
	}
	if creds := p.credsFor(t); len(creds) > 0 {
		rc.injected = injectedHeaders(creds)
		if err := p.intercept(client, brw.Reader, up, t, creds, rc); err != nil {
			rc.err = err.Error()
		}
		return
	}
	// Bytes the sandbox sent after the CONNECT header (a TLS ClientHello,
	// say) are in the server's reader already.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		up.SetWriteDeadline(time.Now().Add(p.opts.IdleTimeout))
		if _, err := up.Write(b); err != nil {
			rc.err = err.Error()
			return
		}
		rc.up.Add(int64(n))
	}
	if err := relay(client, up, &rc.up, &rc.down, p.opts.IdleTimeout); err != nil {
		rc.err = err.Error()
	}
}

// approve asks the Approver about a connection the policy allowed, when
// one of the agent's rules matches it: a pending record first, then the
// wait, bounded by the rule's timeout and by r's context (the sandbox
// closing its connection). It answers the refusal itself and reports
// whether the connection may go on; either way rc says how it was decided.
func (p *Proxy) approve(w http.ResponseWriter, r *http.Request, rc *rec) bool {
	a := p.opts.Approver
	if a == nil {
		return true
	}
	rule, timeout, ok := a.EgressRule(p.agent, rc.t.Host(), rc.t.Port)
	if !ok {
		return true
	}
	if a.EgressRemembered(p.agent, hostPort(rc.t)) {
		rc.approval = "remembered"
		return true
	}
	if p.opts.Audit != nil {
		pr := audit.Record{
			Agent: p.agent, Phase: audit.PhasePending, Type: audit.TypeNet, Tool: "egress",
			Decision: audit.DecisionPending, Target: audit.TargetGateway,
			Host: rc.t.Host(), Port: rc.t.Port, Method: rc.method, Rule: rule,
		}
		if err := p.opts.Audit.Log(pr); err != nil {
			p.auditBroken.Store(true)
			p.log.Error("cannot write the audit record of an egress connection that waits for approval; refusing it", "host", pr.Host, "port", pr.Port, "err", err)
			rc.decision = Decision{Rule: "audit", Reason: "the audit log could not be written"}
			fail(w, http.StatusServiceUnavailable, "the gateway cannot write its audit log, so no connection is made")
			return false
		}
	}
	out, err := a.Wait(r.Context(), approval.Request{
		Agent: p.agent, Tool: approval.EgressTool, Args: []string{hostPort(rc.t), rc.method}, Rule: rule,
	}, timeout)
	if err == nil && out.Approved {
		rc.approvedBy, rc.approval = out.Answer.Who(), string(out.Answer.Decision)
		if out.Remembered {
			rc.approvedBy, rc.approval = "", "remembered"
		}
		p.log.Info("egress connection approved", "host", rc.t.Host(), "port", rc.t.Port, "rule", rule, "by", rc.approvedBy, "approval", rc.approval)
		return true
	}
	rc.decision = Decision{Rule: rule}
	switch {
	case err != nil:
		rc.approval = "canceled"
		rc.decision.Reason = "the connection was closed while it waited for approval"
	case out.TimedOut:
		rc.approval = "timeout"
		rc.decision.Reason = fmt.Sprintf("%s waited for approval (rule %s) and got no answer within %s s", rc.t, rule, strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
	default:
		rc.approval, rc.approvedBy = string(out.Answer.Decision), out.Answer.Who()
		rc.decision.Reason = fmt.Sprintf("%s waited for approval (rule %s) and was denied by %s", rc.t, rule, out.Answer.Who())
	}
	p.log.Info("egress connection not approved", "host", rc.t.Host(), "port", rc.t.Port, "rule", rule, "approval", rc.approval, "by", rc.approvedBy)
	if err == nil {
		deny(w, rc.decision)
	}
	return false
}

func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return true
	}
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

type ctxKey struct{}

// forward proxies one request with an absolute http:// URL; the
// transport keeps upstream connections alive for the next ones.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, start time.Time) {
	if !r.URL.IsAbs() || r.URL.Host == "" {
		fail(w, http.StatusBadRequest, "this is the sandbox's egress proxy: send absolute http:// URLs or CONNECT host:port")
		return
	}
	if r.URL.Scheme != "http" {
		fail(w, http.StatusBadRequest, fmt.Sprintf("scheme %q is not forwarded: use CONNECT (an https:// URL through HTTPS_PROXY does)", r.URL.Scheme))
		return
	}
	t, err := parseHostPort(r.URL.Host, 80)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	rc := &rec{t: t, method: sanitizeHeader(r.Method), start: start}
	defer p.audit(rc)
	rc.decision = p.pol.Check(t)
	if !rc.decision.Allowed {
		deny(w, rc.decision)
		return
	}
	if !p.approve(w, r, rc) {
		return
	}
	// The URL must dial the target just checked: put it back in canonical
	// form (no second parse downstream can read it another way).
	r.URL.Host = hostPort(t)
	r.Host = r.URL.Host
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countReader{ReadCloser: r.Body, n: &rc.up}
	}
	cw := &countWriter{ResponseWriter: w, n: &rc.down}
	ctx := context.WithValue(r.Context(), ctxKey{}, rc)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if cc, ok := info.Conn.(*checkedConn); ok && cc.rule != "" {
			rc.decision.Rule = cc.rule // the address rule that let this connection reach a special address
		}
	}})
	p.rp.ServeHTTP(cw, r.WithContext(ctx))
}

// checkedConn is an upstream connection of the transport, with the
// address rule that allowed it, if one was needed.
type checkedConn struct {
	net.Conn
	rule string
}

// forwardError answers a forwarded request that failed: 403 when the
// policy refused the resolved address, 502 otherwise.
func (p *Proxy) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	rc, _ := r.Context().Value(ctxKey{}).(*rec)
	var de *DeniedError
	if errors.As(err, &de) {
		if rc != nil {
			rc.decision = de.Decision
		}
		deny(w, de.Decision)
		return
	}
	if rc != nil {
		rc.err = err.Error()
	}
	if errors.Is(err, context.Canceled) {
		return // the sandbox went away
	}
	fail(w, http.StatusBadGateway, err.Error())
}

// dial resolves t (unless it is an address), checks every address with
// the policy, and connects to the first checked address that answers. The
// decision returned names the address rule that allowed a special address.
// A *DeniedError means no address passed.
func (p *Proxy) dial(ctx context.Context, t Target) (net.Conn, Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	addrs := []netip.Addr{t.Addr}
	if !t.Addr.IsValid() {
		var err error
		addrs, err = p.opts.Resolver.LookupNetIP(ctx, "ip", t.Name)
		if err != nil {
			return nil, Decision{Allowed: true}, fmt.Errorf("resolve %s: %w", t.Name, err)
		}
		if len(addrs) == 0 {
			return nil, Decision{Allowed: true}, fmt.Errorf("resolve %s: no address", t.Name)
		}
	}
	var refused Decision
	var lastErr error
	for _, a := range addrs {
		d := p.pol.CheckAddr(t, a, p.opts.LocalAddrs)
		if !d.Allowed {
			if refused.Reason == "" {
				refused = d
			}
			continue
		}
		c, err := p.opts.Dial(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(t.Port)).String())
		if err == nil {
			return c, d, nil
		}
		lastErr = err
	}
	if lastErr != nil {
		return nil, Decision{Allowed: true}, fmt.Errorf("connect to %s: %w", t, lastErr)
	}
	return nil, refused, &DeniedError{Decision: refused}
}

// parseHostPort parses "host:port", "[v6]:port" or, when defPort > 0,
// "host" alone. The host is an address literal (no zone) or a DNS name;
// it comes back normalised.
func parseHostPort(s string, defPort int) (Target, error) {
	host, port := s, ""
	if h, pt, err := net.SplitHostPort(s); err == nil {
		host, port = h, pt
	} else if defPort <= 0 {
		return Target{}, fmt.Errorf("%q: want host:port", s)
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.Contains(s, ":") {
		return Target{}, fmt.Errorf("%q: invalid host", s)
	}
	t := Target{Port: defPort}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '0' {
			return Target{}, fmt.Errorf("%q: invalid port", s)
		}
		t.Port = n
	} else if defPort <= 0 {
		return Target{}, fmt.Errorf("%q: want host:port", s)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Target{}, fmt.Errorf("%q: addresses with a zone are refused", s)
		}
		t.Addr = a.Unmap()
		return t, nil
	}
	name, ok := normalizeName(host)
	if !ok {
		return Target{}, fmt.Errorf("%q: invalid host name", s)
	}
	t.Name = name
	return t, nil
}

// hostPort is t in URL form.
func hostPort(t Target) string {
	if t.Addr.IsValid() {
		return netip.AddrPortFrom(t.Addr, uint16(t.Port)).String()
	}
	return net.JoinHostPort(t.Name, strconv.Itoa(t.Port))
}

type countReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.n.Add(int64(n))
	return n, err
}

type countWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (c *countWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// relay copies bytes both ways until both sides are done, half-closing
// each side when the other has finished sending; it gives up when no byte
// moved either way for idle. It returns the first error other than EOF.
func relay(client, up net.Conn, nUp, nDown *atomic.Int64, idle time.Duration) error {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	errc := make(chan error, 2)
	go func() { errc <- pipe(up, client, nUp, &last, idle) }()
	go func() { errc <- pipe(client, up, nDown, &last, idle) }()
	err := <-errc
	if err != nil {
		// One side broke: stop the other at once.
		client.Close()
		up.Close()
		<-errc
		return err
	}
	err = <-errc
	return err
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func pipe(dst, src net.Conn, n, last *atomic.Int64, idle time.Duration) error {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	for {
		src.SetReadDeadline(time.Now().Add(idle))
		k, err := src.Read(buf)
		if k > 0 {
			last.Store(time.Now().UnixNano())
			dst.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return werr
			}
			n.Add(int64(k))
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			} else {
				dst.Close()
			}
			return nil
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, last.Load())) < idle {
			continue // the other direction is busy
		}
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("idle for %v", idle)
		}
		return err
	}
}

// limitListener lets at most n connections be open at once; Accept waits
// for one to close.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limited{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limited struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
}

func (l *limited) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limited) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// HostAddrs returns the addresses of the gateway host's interfaces, each as
// a single-address prefix.
func HostAddrs() []netip.Prefix {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return []netip.Prefix{}
	}
	out := []netip.Prefix{}
	for _, ia := range ifAddrs {
		if ipn, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(ipn.IP); ok {
				a = a.Unmap()
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	return out
}
