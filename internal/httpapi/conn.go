package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Defaults of ServeOptions. There is no write timeout: a streamed answer
// (/api/chat/stream, a long prompt) may take as long as the model does.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = 60 * time.Second // the whole body, from the end of the headers
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConns          = 256
)

// ServeOptions bound the connections of the API's http.Server. Zero fields
// mean the defaults.
type ServeOptions struct {
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a request body. A client whose
	// body has not arrived by then gets 408 and its connection is closed.
	BodyTimeout time.Duration
	IdleTimeout time.Duration
	// MaxConns caps the open connections. At the cap, a new connection
	// closes the oldest one that is not serving a request (idle, still
	// sending its headers or its body), so that slow and idle clients
	// cannot starve a health check; if every connection is serving a
	// request, the new one gets 503.
	MaxConns    int
	BaseContext context.Context
	ErrorLog    *log.Logger
}

// HTTPServer returns the http.Server of the API and the listener to serve
// it on (ln, wrapped to cap its connections):
//
//	srv, ln := api.HTTPServer(ln, opts)
//	go srv.Serve(ln)
//
// srv.Shutdown does not wait for clients still sending a request body: their
// reads are cut at once.
func (s *Server) HTTPServer(ln net.Listener, o ServeOptions) (*http.Server, net.Listener) {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	s.bodyTimeout = o.BodyTimeout
	lim := &limitListener{Listener: ln, max: o.MaxConns, conns: map[*trackedConn]struct{}{}, refusing: make(chan struct{}, 16), log: s.log}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          o.ErrorLog,
		ConnState:         lim.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*trackedConn); ok {
				return context.WithValue(ctx, connKey{}, tc)
			}
			return ctx
		},
	}
	if o.BaseContext != nil {
		srv.BaseContext = func(net.Listener) context.Context { return o.BaseContext }
	}
	srv.RegisterOnShutdown(s.cutBodyReads)
	return srv, lim
}

type connKey struct{}

// bodyReads tracks the request bodies being read, so that Shutdown can cut
// them; bodyTimeout bounds each.
type bodyReads struct {
	mu      sync.Mutex
	reading map[*deadlineBody]struct{}
	closing bool
}

// deadlineBody is a request body read under a deadline. When it has been
// read to its end the deadline is lifted, so that a long answer (a stream)
// is not cut by it, and the connection counts as busy. When the handler
// returns without having read all of it (an error answer), the deadline is
// moved to now: the server would otherwise wait for the rest of the body
// before it answers, and a slow client must not hold that up; the
// connection is closed after the answer.
type deadlineBody struct {
	body io.ReadCloser
	rc   *http.ResponseController
	s    *Server
	conn *trackedConn
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.finish(true)
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// finish stops tracking the body, and lifts its deadline when it was read
// to its end. It is called by Read and when the handler returns, on the
// handler's goroutine.
func (b *deadlineBody) finish(eof bool) {
	if b.done {
		return
	}
	b.done = true
	b.s.reads.mu.Lock()
	delete(b.s.reads.reading, b)
	closing := b.s.reads.closing
	b.s.reads.mu.Unlock()
	switch {
	case !eof:
		_ = b.rc.SetReadDeadline(time.Now())
	case !closing:
		_ = b.rc.SetReadDeadline(time.Time{})
		b.conn.setBusy(true)
	}
}

// guardBody puts r's body, if any, under the body timeout. The returned
// func must run when the handler returns.
func (s *Server) guardBody(w http.ResponseWriter, r *http.Request) func() {
	tc, _ := r.Context().Value(connKey{}).(*trackedConn)
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody || s.bodyTimeout == 0 {
		tc.setBusy(true)
		return func() { tc.setBusy(false) }
	}
	b := &deadlineBody{body: r.Body, rc: http.NewResponseController(w), s: s, conn: tc}
	deadline := time.Now().Add(s.bodyTimeout)
	s.reads.mu.Lock()
	if s.reads.reading == nil {
		s.reads.reading = map[*deadlineBody]struct{}{}
	}
	if s.reads.closing {
		deadline = time.Now() // shutting down: no new slow bodies
	}
	s.reads.reading[b] = struct{}{}
	s.reads.mu.Unlock()
	_ = b.rc.SetReadDeadline(deadline)
	r.Body = b
	return func() {
		b.finish(false)
		tc.setBusy(false)
	}
}

// cutBodyReads makes every body read fail at once: Shutdown waits for the
// requests in flight, and one whose body is still trickling in must not
// hold it up.
func (s *Server) cutBodyReads() {
	s.reads.mu.Lock()
	defer s.reads.mu.Unlock()
	s.reads.closing = true
	for b := range s.reads.reading {
		_ = b.rc.SetReadDeadline(time.Now())
	}
}

// isTimeout reports whether err is a read that hit its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// limitListener caps the open connections; see ServeOptions.MaxConns.
type limitListener struct {
	net.Listener
	max int
	log interface {
		Warn(msg string, args ...any)
	}

	refusing chan struct{} // a semaphore of refuse goroutines

	mu       sync.Mutex
	conns    map[*trackedConn]struct{}
	lastWarn time.Time
}

// refuse answers a connection past the cap with 503, after reading (within a
// second) the request's headers: an HTTP client does not take an answer to
// a request it has not sent yet.
func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	r := bufio.NewReaderSize(io.LimitReader(c, 16<<10), 4<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			break
		}
	}
	_, _ = c.Write(tooMany)
}

// trackedConn is one connection of a limitListener.
type trackedConn struct {
	net.Conn
	l     *limitListener
	once  sync.Once
	busy  bool      // serving a request whose body has been read; l.mu
	since time.Time // of the last change of state; l.mu
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.l.remove(c) })
	return c.Conn.Close()
}

func (c *trackedConn) setBusy(busy bool) {
	if c == nil {
		return
	}
	c.l.mu.Lock()
	c.busy, c.since = busy, time.Now()
	c.l.mu.Unlock()
}

func (l *limitListener) remove(c *trackedConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateClosed, http.StateHijacked:
		l.remove(tc)
	case http.StateIdle:
		tc.setBusy(false)
	}
}

// tooMany is what a connection past the cap gets.
var tooMany = func() []byte {
	body := `{"error":"too many connections to the gateway (gateway.http.maxConnections)"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l, since: time.Now()}
		l.mu.Lock()
		var victim *trackedConn
		if len(l.conns) >= l.max {
			for o := range l.conns {
				if !o.busy && (victim == nil || o.since.Before(victim.since)) {
					victim = o
				}
			}
			if victim != nil {
				delete(l.conns, victim)
			}
		}
		full := len(l.conns) >= l.max
		if !full {
			l.conns[tc] = struct{}{}
		}
		warn := (full || victim != nil) && time.Since(l.lastWarn) > time.Minute
		if warn {
			l.lastWarn = time.Now()
		}
		l.mu.Unlock()
		if warn && l.log != nil {
			l.log.Warn("the HTTP API is at its connection cap: closing idle or slow connections", "maxConnections", l.max)
		}
		if victim != nil {
			victim.Conn.Close() // the server's goroutine for it sees the error and ends
		}
		if full {
			select {
			case l.refusing <- struct{}{}:
				go func() {
					defer func() { <-l.refusing }()
					refuse(c)
				}()
			default:
				c.Close() // too many refusals at once: just close
			}
			continue
		}
		return tc, nil
	}
}
