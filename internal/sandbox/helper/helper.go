// Package helper is the in-sandbox end of the helper protocol
// (internal/proto/helper.go): `beige-sandbox serve` reads request frames on
// stdin, runs commands and file operations, and writes response frames on
// stdout. Calls run concurrently; a cancel frame or the end of stdin kills
// every process of the calls still running.
//
// The helper runs as root, non-dumpable (Harden), and runs agent code and
// file operations as the agent's user (Options.User), so agent processes
// cannot open its /proc files (fd/0, fd/1, mem), signal or trace it.
//
// It depends only on the standard library and internal/proto so that the
// static in-sandbox binary stays small.
package helper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// Defaults of Options.
const (
	DefaultDir         = "/workspace"
	DefaultOutputLimit = 50 * 1024
	// DefaultDrainGrace is how long an exec waits, after sh exits, for the
	// output pipe to close. A background process that keeps the pipe open
	// (`server &`) does not hold the call longer than this; its later output
	// is drained and dropped.
	DefaultDrainGrace = 100 * time.Millisecond
)

// Options configures Serve. The zero value is the in-sandbox default.
type Options struct {
	Dir        string        // working folder and base of relative paths; "" = DefaultDir
	Env        []string      // environment of commands before per-call env; nil = os.Environ()
	Log        io.Writer     // diagnostics; nil = discard
	DrainGrace time.Duration // 0 = DefaultDrainGrace
	// User is who commands and file operations run as; nil or uid 0 = the
	// helper's own credentials. Another user needs the helper to be root.
	User *User
}

// Serve answers requests read from r with responses written to w until r
// ends. At the end it cancels the calls still running, waits for them, and
// returns nil on a clean EOF or the framing error that stopped it.
func Serve(r io.Reader, w io.Writer, opts Options) error {
	s := newServer(w, opts)
	if err := s.setupUser(opts.User); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		req, err := proto.ReadHelperRequest(br)
		if err != nil {
			cancel()
			s.wg.Wait()
			if errors.Is(err, io.EOF) {
				return nil
			}
			s.logf("read request: %v", err)
			return err
		}
		s.dispatch(ctx, req)
	}
}

type server struct {
	dir   string
	shell string // /bin/sh, or sh found on PATH
	env   []string
	log   io.Writer
	grace time.Duration
	user  *User               // nil: no switching
	cred  *syscall.Credential // commands' credentials when user != nil

	wmu sync.Mutex // serialises response frames
	w   io.Writer

	mu    sync.Mutex
	calls map[uint64]context.CancelFunc
	wg    sync.WaitGroup
}

func newServer(w io.Writer, opts Options) *server {
	s := &server{dir: opts.Dir, env: opts.Env, log: opts.Log, grace: opts.DrainGrace, w: w,
		calls: make(map[uint64]context.CancelFunc)}
	if s.dir == "" {
		s.dir = DefaultDir
	}
	if s.env == nil {
		s.env = os.Environ()
	}
	if s.log == nil {
		s.log = io.Discard
	}
	if s.grace <= 0 {
		s.grace = DefaultDrainGrace
	}
	s.shell = "/bin/sh"
	if _, err := os.Stat(s.shell); err != nil {
		s.shell = "sh"
	}
	return s
}

func (s *server) logf(format string, args ...any) {
	fmt.Fprintf(s.log, "beige-sandbox: "+format+"\n", args...)
}

func (s *server) dispatch(ctx context.Context, req *proto.HelperRequest) {
	if req.Op == proto.HelperOpCancel {
		s.mu.Lock()
		cancel := s.calls[req.ID]
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return
	}
	callCtx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	_, dup := s.calls[req.ID]
	if !dup {
		s.calls[req.ID] = cancel
	}
	s.mu.Unlock()
	if dup {
		cancel()
		s.send(&proto.HelperResponse{ID: req.ID, Code: proto.HelperErrInvalid,
			Error: fmt.Sprintf("duplicate request id %d", req.ID)})
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		resp := s.handle(callCtx, req)
		s.mu.Lock()
		delete(s.calls, req.ID)
		s.mu.Unlock()
		cancel()
		resp.ID = req.ID
		s.send(resp)
	}()
}

func (s *server) send(resp *proto.HelperResponse) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := proto.WriteHelperResponse(s.w, resp); err != nil {
		s.logf("write response %d: %v", resp.ID, err)
	}
}

func (s *server) handle(ctx context.Context, req *proto.HelperRequest) *proto.HelperResponse {
	switch req.Op {
	case proto.HelperOpPing:
		return &proto.HelperResponse{Version: proto.HelperVersion, Pid: os.Getpid()}
	case proto.HelperOpKillHelper:
		return s.killHelper(req)
	case proto.HelperOpExec:
		return s.exec(ctx, req)
	case proto.HelperOpRead:
		return s.read(req)
	case proto.HelperOpWrite:
		return s.write(req)
	default:
		return &proto.HelperResponse{Code: proto.HelperErrInvalid, Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
}

// resolve makes p absolute against the default folder.
func (s *server) resolve(p string) string {
	if p == "" {
		return s.dir
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.dir, p)
	}
	return filepath.Clean(p)
}

// errResponse maps err to a response with a code the gateway understands.
func errResponse(err error) *proto.HelperResponse {
	code := proto.HelperErrInternal
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		code = proto.HelperErrNotExist
	case errors.Is(err, syscall.EISDIR):
		code = proto.HelperErrIsDir
	case errors.Is(err, fs.ErrPermission):
		code = proto.HelperErrPermission
	case errors.Is(err, context.Canceled):
		code = proto.HelperErrCancelled
	}
	return &proto.HelperResponse{Code: code, Error: err.Error()}
}

func invalid(format string, args ...any) *proto.HelperResponse {
	return &proto.HelperResponse{Code: proto.HelperErrInvalid, Error: fmt.Sprintf(format, args...)}
}
