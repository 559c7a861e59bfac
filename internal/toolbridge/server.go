// Package toolbridge is the gateway's end of the tool launchers: one Unix
// socket server per agent that reads tool requests from the agent's sandbox
// and answers them (Listen), and the launcher scripts mounted at /tools/bin
// that call the in-sandbox tool client (WriteLaunchers).
//
// The agent a request is for is the agent of the socket that accepted the
// connection; nothing in a frame can change it. The session is the one
// registered (Attribute) for the request's call token, never the
// sessionContext the frame claims.
package toolbridge

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// Handler answers one well-formed request. agent is the socket's agent, and
// req.SessionContext is never nil and carries that agent as AgentName: it is
// the session registered for req's call token, or, when there was no valid
// token (req.Unattributed), only the agent. req.CallToken is cleared. ctx
// ends when the client goes away or the server is closed.
type Handler func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse

// Defaults of Options.
const (
	DefaultMaxConns     = 1024
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = 30 * time.Second
	DefaultDrainTimeout = 5 * time.Second
	DefaultSocketMode   = fs.FileMode(0o600)
)

// Options tune a Server. A nil *Options, and every zero field, mean the defaults.
type Options struct {
	// MaxFrame is the largest request line accepted, in bytes (default
	// proto.MaxToolFrame). A larger one is answered with a bad request and
	// the connection is closed; at most MaxFrame+1 bytes of it are read.
	MaxFrame int
	// MaxConns caps the connections served at once (default 1024). Past it
	// the server stops accepting until one ends: new clients wait in the
	// listen backlog, they are not refused.
	MaxConns int
	// ReadTimeout is how long a connection may take to send a whole request
	// line, and how long it may sit idle between requests (default 30 s).
	// A connection that does not make it is closed.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response (default 30 s).
	WriteTimeout time.Duration
	// DrainTimeout is how long Close lets running handlers finish before it
	// cancels their contexts (default 5 s).
	DrainTimeout time.Duration
	// SocketMode is the mode of the socket file (default 0600: only the
	// gateway's user, and root in the sandbox, can connect).
	SocketMode fs.FileMode
	// DirMode, when set, is the mode the socket's folder is given (e.g.
	// 0755 when the sandbox's non-root user must reach the socket; its
	// parent then keeps other host users out). When zero, a folder that
	// group or others may read is tightened to 0700.
	DirMode fs.FileMode
	// Logger receives connection errors (default: discarded).
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.MaxFrame <= 0 {
		r.MaxFrame = proto.MaxToolFrame
	}
	if r.MaxConns <= 0 {
		r.MaxConns = DefaultMaxConns
	}
	if r.ReadTimeout <= 0 {
		r.ReadTimeout = DefaultReadTimeout
	}
	if r.WriteTimeout <= 0 {
		r.WriteTimeout = DefaultWriteTimeout
	}
	if r.DrainTimeout <= 0 {
		r.DrainTimeout = DefaultDrainTimeout
	}
	if r.SocketMode == 0 {
		r.SocketMode = DefaultSocketMode
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// Server serves one agent's socket.
type Server struct {
	path, agent string
	h           Handler
	opts        Options
	ln          *net.UnixListener
	sem         chan struct{}

	ctx    context.Context // cancelled when Close gives up waiting
	cancel context.CancelFunc

	mu      sync.Mutex
	closing bool
	conns   map[*conn]struct{}
	busy    sync.WaitGroup // handlers running
	wg      sync.WaitGroup // accept loop and connection goroutines

	closeOnce sync.Once
	closeErr  error

	tmu    sync.Mutex
	tokens map[string]proto.SessionContext // call token → session, while the call runs
}

type conn struct {
	c    *net.UnixConn
	busy bool // a request is being handled; guarded by Server.mu
}

// ErrInUse is returned by Listen when a process still serves the socket at
// path (another gateway).
var ErrInUse = errors.New("toolbridge: socket in use by another process (is another gateway running?)")

// ErrNotSocket is returned by Listen when path exists and is not a socket:
// Listen replaces a stale socket, never any other file.
var ErrNotSocket = errors.New("toolbridge: path exists and is not a socket")

// Listen serves agent's requests on a Unix socket at path, calling h for each.
//
// The socket's folder must exist (the caller creates it, mode 0700: it is
// mounted read-only at /beige in the sandbox) and must not be writable by
// group or others, or Listen refuses; read and search bits for group and
// others are removed. A stale socket at path (from a gateway that did not
// shut down cleanly) is removed, unless something still answers on it
// (ErrInUse); any other kind of file there is an error (ErrNotSocket).
// The socket gets Options.SocketMode (0600).
func Listen(path, agent string, h Handler, opts *Options) (*Server, error) {
	if agent == "" || h == nil {
		return nil, errors.New("toolbridge: Listen needs an agent and a handler")
	}
	o := opts.withDefaults()
	if err := checkSocketDir(filepath.Dir(path), o.DirMode); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("toolbridge: listen %s: %w", path, err)
	}
	if err := os.Chmod(path, o.SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("toolbridge: chmod %s: %w", path, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		path: path, agent: agent, h: h, opts: o, ln: ln,
		sem:    make(chan struct{}, o.MaxConns),
		ctx:    ctx,
		cancel: cancel,
		conns:  map[*conn]struct{}{},
		tokens: map[string]proto.SessionContext{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

func checkSocketDir(dir string, mode fs.FileMode) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("toolbridge: socket folder: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("toolbridge: socket folder %s is not a folder (%v)", dir, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("toolbridge: socket folder %s belongs to uid %d, not to the gateway's user (%d)", dir, st.Uid, os.Geteuid())
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return fmt.Errorf("toolbridge: socket folder %s is writable by others (mode %#o); it must be 0700", dir, perm)
	}
	if mode != 0 && perm != mode.Perm()&^0o022 {
		if err := os.Chmod(dir, mode.Perm()&^0o022); err != nil {
			return fmt.Errorf("toolbridge: set socket folder mode: %w", err)
		}
	} else if mode == 0 && perm&0o077 != 0 {
		if err := os.Chmod(dir, perm&^0o077); err != nil {
			return fmt.Errorf("toolbridge: tighten socket folder: %w", err)
		}
	}
	return nil
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("toolbridge: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%w: %s (%v)", ErrNotSocket, path, fi.Mode().Type())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%w: %s", ErrInUse, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("toolbridge: remove stale socket: %w", err)
	}
	return nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.path }

// Agent returns the agent the socket serves.
func (s *Server) Agent() string { return s.agent }

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		s.sem <- struct{}{} // wait for a free slot before accepting
		c, err := s.ln.AcceptUnix()
		if err != nil {
			<-s.sem
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: wait a little, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.opts.Logger.Warn("tool socket accept failed", "agent", s.agent, "err", err, "retry", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		cn := &conn{c: c}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			<-s.sem
			return
		}
		s.conns[cn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(cn)
	}
}

// Attribute registers sc as the session of the tool calls that present the
// returned token, until release is called (release is idempotent). The
// gateway calls it for each command it starts in the sandbox, passes the
// token to that command in proto.CallTokenEnv, and releases it when the
// command ends. The token is 128 random bits: it cannot be guessed, only
// read from a process that has it (see the package docs for that limit).
func (s *Server) Attribute(sc proto.SessionContext) (token string, release func()) {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	token = hex.EncodeToString(b[:])
	sc.AgentName = s.agent
	s.tmu.Lock()
	s.tokens[token] = sc
	s.tmu.Unlock()
	var once sync.Once
	return token, func() {
		once.Do(func() {
			s.tmu.Lock()
			delete(s.tokens, token)
			s.tmu.Unlock()
		})
	}
}

// attribute replaces req's claimed session by the one registered for its
// call token, or by the agent alone, marking req unattributed.
func (s *Server) attribute(req *proto.ToolRequest) {
	sc, ok := proto.SessionContext{}, false
	if req.CallToken != "" {
		s.tmu.Lock()
		sc, ok = s.tokens[req.CallToken]
		s.tmu.Unlock()
	}
	if !ok {
		sc = proto.SessionContext{}
		if req.SessionContext != nil && *req.SessionContext != (proto.SessionContext{}) {
			s.opts.Logger.Info("tool call not attributed to a session: no valid call token; its claimed session is ignored",
				"agent", s.agent, "tool", req.Tool, "claimed_session", req.SessionContext.SessionKey)
		}
	}
	sc.AgentName = s.agent
	req.SessionContext = &sc
	req.Unattributed = !ok
	req.CallToken = ""
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// serve answers the requests of one connection, one after the other.
func (s *Server) serve(cn *conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, cn)
		s.mu.Unlock()
		cn.c.Close()
		<-s.sem
		s.wg.Done()
	}()
	br := bufio.NewReaderSize(cn.c, 32<<10)
	for {
		_ = cn.c.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
		frame, err := readFrame(br, s.opts.MaxFrame)
		switch {
		case err == nil:
		case errors.Is(err, errFrameTooLarge):
			s.write(cn, proto.BadRequest("frame larger than %d bytes", s.opts.MaxFrame))
			return
		default: // EOF between requests, timeout, or a broken connection
			if !errors.Is(err, io.EOF) && !isTimeout(err) && !s.isClosing() {
				s.opts.Logger.Debug("tool socket read failed", "agent", s.agent, "err", err)
			}
			return
		}
		req, err := proto.DecodeToolRequest(frame)
		if err != nil {
			s.write(cn, proto.BadRequest("%v", err))
			return
		}
		// Identity comes from the socket, never from the payload; the
		// session only from a live call token.
		s.attribute(&req)

		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			s.write(cn, proto.ErrorResponse(1, "beige: the gateway is shutting down; try again"))
			return
		}
		cn.busy = true
		s.busy.Add(1)
		s.mu.Unlock()

		resp, gone := s.handle(cn, br, req)

		s.mu.Lock()
		cn.busy = false
		closing := s.closing
		s.mu.Unlock()
		s.busy.Done()
		if gone {
			return
		}
		if !s.write(cn, resp) || closing {
			return
		}
	}
}

// handle runs the handler. While it runs, a goroutine watches the connection:
// if the client goes away (EOF or error), the handler's context is
// cancelled. A client must therefore keep its write side open until it has
// read the response (no half-close). gone reports that the client left.
func (s *Server) handle(cn *conn, br *bufio.Reader, req proto.ToolRequest) (resp proto.ToolResponse, gone bool) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	_ = cn.c.SetReadDeadline(time.Time{})
	watchDone := make(chan bool, 1)
	go func() {
		_, err := br.Peek(1)
		left := err != nil && !isTimeout(err)
		if left {
			cancel()
		}
		watchDone <- left
	}()

	resp = s.call(ctx, req)

	// Stop the watcher; a request pipelined after this one stays buffered.
	_ = cn.c.SetReadDeadline(time.Unix(1, 0))
	gone = <-watchDone
	return resp, gone
}

func (s *Server) call(ctx context.Context, req proto.ToolRequest) (resp proto.ToolResponse) {
	defer func() {
		if r := recover(); r != nil {
			s.opts.Logger.Error("tool handler panicked", "agent", s.agent, "tool", req.Tool, "panic", r)
			resp = proto.ErrorResponse(1, fmt.Sprintf("beige: internal error running tool '%s'", req.Tool))
		}
	}()
	resp = s.h(ctx, s.agent, req)
	resp.Type = proto.ToolResponseType
	return resp
}

// write sends one response; it reports whether that worked.
func (s *Server) write(cn *conn, resp proto.ToolResponse) bool {
	resp.Type = proto.ToolResponseType
	buf, err := proto.AppendToolFrame(nil, resp)
	if err != nil {
		s.opts.Logger.Error("encode tool response", "agent", s.agent, "err", err)
		buf, _ = proto.AppendToolFrame(nil, proto.ErrorResponse(1, "beige: internal error encoding the response"))
	}
	_ = cn.c.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	if _, err := cn.c.Write(buf); err != nil {
		s.opts.Logger.Debug("tool socket write failed", "agent", s.agent, "err", err)
		return false
	}
	return true
}

// Close stops accepting connections and removes the socket file, closes
// idle connections, lets running handlers finish for up to DrainTimeout,
// then cancels their contexts and waits for every goroutine to end. Handlers
// must return once their context is cancelled.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.closeErr = s.ln.Close() // also unlinks the socket file
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) && s.closeErr == nil {
			s.closeErr = err
		}

		s.closeIdle()
		drained := make(chan struct{})
		go func() { s.busy.Wait(); close(drained) }()
		t := time.NewTimer(s.opts.DrainTimeout)
		select {
		case <-drained:
		case <-t.C:
			s.opts.Logger.Warn("tool socket: cancelling running tools", "agent", s.agent)
		}
		t.Stop()
		s.cancel()
		<-drained
		s.closeAll()
		s.wg.Wait()
		if errors.Is(s.closeErr, net.ErrClosed) {
			s.closeErr = nil
		}
	})
	return s.closeErr
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for cn := range s.conns {
		if !cn.busy {
			cn.c.Close()
		}
	}
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for cn := range s.conns {
		cn.c.Close()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
