package tools

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

// fakeSandbox is an in-memory sandbox.Sandbox: a map of files, a set of
// folders and a scripted exec.
type fakeSandbox struct {
	id        string
	readDelay time.Duration // widens the window between a patch's read and write
	execFn    func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error)
	readErr   error // returned by every ReadFile when set
	writeErr  error // returned by every WriteFile when set

	mu     sync.Mutex
	files  map[string][]byte
	dirs   map[string]bool
	execs  []sandbox.ExecRequest
	reads  int
	writes int
}

var _ sandbox.Sandbox = (*fakeSandbox)(nil)

func newFake() *fakeSandbox {
	return &fakeSandbox{id: "c0ffee", files: map[string][]byte{}, dirs: map[string]bool{"/": true, "/workspace": true}}
}

func (f *fakeSandbox) ID() string { return f.id }

func (f *fakeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	f.mu.Lock()
	f.execs = append(f.execs, req)
	f.mu.Unlock()
	if f.execFn == nil {
		return sandbox.ExecResult{}, nil
	}
	return f.execFn(ctx, req)
}

func (f *fakeSandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, int64, error) {
	if f.readDelay > 0 {
		time.Sleep(f.readDelay)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.readErr != nil {
		return nil, 0, f.readErr
	}
	if f.dirs[p] {
		return nil, 0, fmt.Errorf("read %s: %w", p, sandbox.ErrIsDir)
	}
	data, ok := f.files[p]
	if !ok {
		return nil, 0, fmt.Errorf("read %s: %w", p, sandbox.ErrNotExist)
	}
	size := int64(len(data))
	if size > max {
		data = data[:max]
	}
	return append([]byte(nil), data...), size, nil
}

func (f *fakeSandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.writeErr != nil {
		return f.writeErr
	}
	if f.dirs[p] {
		return fmt.Errorf("write %s: %w", p, sandbox.ErrIsDir)
	}
	for d := path.Dir(p); !f.dirs[d]; d = path.Dir(d) {
		f.dirs[d] = true
	}
	f.files[p] = append([]byte(nil), data...)
	return nil
}

func (f *fakeSandbox) file(p string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.files[p])
}

func (f *fakeSandbox) put(p, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[p] = []byte(content)
}

// testEnv is a Runner on a fake sandbox with a real audit log in a temp dir.
type testEnv struct {
	runner    *Runner
	sb        *fakeSandbox
	audit     *audit.Logger
	auditPath string
}

// newEnv makes a Runner whose pipeline asks allow (nil: every call is
// allowed).
func newEnv(t testing.TB, allow pipeline.PolicyFunc) *testEnv {
	t.Helper()
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	al, err := audit.Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { al.Close() })
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if allow == nil {
		allow = func(string, string) error { return nil }
	}
	pipe := pipeline.New(pipeline.Options{Audit: al, Policy: allow, Logger: logger})
	return &testEnv{runner: NewRunner(pipe, logger), sb: newFake(), audit: al, auditPath: p}
}

func (e *testEnv) inv(c Call) Invocation {
	return Invocation{
		Agent:       "travel",
		Sandbox:     e.sb,
		Call:        c,
		Session:     proto.ParseSessionKey("travel", "telegram:123:45"),
		Model:       "claude-sonnet-4-6",
		ExecTimeout: ModelExecTimeout,
	}
}

func (e *testEnv) run(t testing.TB, c Call) proto.ToolResult {
	t.Helper()
	res, err := e.runner.Run(context.Background(), e.inv(c))
	if err != nil {
		t.Fatalf("Run(%s): %v", c.Tool(), err)
	}
	return res
}

func (e *testEnv) records(t *testing.T) []audit.Record {
	t.Helper()
	recs, err := audit.ReadFile(e.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
