package helper

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// conn is a test client of a Serve running over in-memory pipes.
type conn struct {
	t    *testing.T
	w    *io.PipeWriter // requests
	mu   sync.Mutex
	resp map[uint64]chan *proto.HelperResponse
	done chan error // Serve's result
	id   uint64
}

func startServe(t *testing.T, opts Options) *conn {
	t.Helper()
	reqR, reqW := io.Pipe()
	respR, respW := io.Pipe()
	c := &conn{t: t, w: reqW, resp: make(map[uint64]chan *proto.HelperResponse), done: make(chan error, 1)}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	go func() {
		err := Serve(reqR, respW, opts)
		respW.Close()
		c.done <- err
	}()
	go func() {
		br := bufio.NewReader(respR)
		for {
			r, err := proto.ReadHelperResponse(br)
			if err != nil {
				return
			}
			c.ch(r.ID) <- r
		}
	}()
	t.Cleanup(func() {
		reqW.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after stdin EOF")
		}
	})
	return c
}

func (c *conn) ch(id uint64) chan *proto.HelperResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.resp[id]
	if ch == nil {
		ch = make(chan *proto.HelperResponse, 1)
		c.resp[id] = ch
	}
	return ch
}

// send sends req with a fresh ID and returns that ID.
func (c *conn) send(req proto.HelperRequest) uint64 {
	c.t.Helper()
	c.mu.Lock()
	c.id++
	req.ID = c.id
	c.mu.Unlock()
	if err := proto.WriteHelperRequest(c.w, &req); err != nil {
		c.t.Fatalf("send: %v", err)
	}
	return req.ID
}

func (c *conn) wait(id uint64) *proto.HelperResponse {
	c.t.Helper()
	select {
	case r := <-c.ch(id):
		return r
	case <-time.After(20 * time.Second):
		c.t.Fatalf("no response to %d", id)
		return nil
	}
}

func (c *conn) do(req proto.HelperRequest) *proto.HelperResponse {
	c.t.Helper()
	return c.wait(c.send(req))
}

func TestPing(t *testing.T) {
	c := startServe(t, Options{})
	r := c.do(proto.HelperRequest{Op: proto.HelperOpPing})
	if r.Error != "" || r.Version != proto.HelperVersion {
		t.Fatalf("ping = %+v", r)
	}
}

func TestExec(t *testing.T) {
	dir := t.TempDir()
	c := startServe(t, Options{Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH"), "BASE=base", "OVER=old"}})
	tests := []struct {
		name     string
		req      proto.HelperRequest
		out      string
		exitCode int
	}{
		{"echo", proto.HelperRequest{Command: "echo hello"}, "hello\n", 0},
		{"exit code", proto.HelperRequest{Command: "exit 3"}, "", 3},
		{"signal", proto.HelperRequest{Command: "kill -9 $$"}, "", 128 + 9},
		{"interleaved", proto.HelperRequest{Command: "echo 1; echo 2 >&2; echo 3; echo 4 >&2"}, "1\n2\n3\n4\n", 0},
		{"env", proto.HelperRequest{Command: `echo "$BASE $OVER $NEW"`, Env: map[string]string{"OVER": "new", "NEW": "x y"}}, "base new x y\n", 0},
		{"default dir", proto.HelperRequest{Command: "pwd"}, dir + "\n", 0},
		{"relative dir", proto.HelperRequest{Command: "mkdir -p sub && cd sub && pwd"}, dir + "/sub\n", 0},
		{"stdin", proto.HelperRequest{Command: "tr a-z A-Z", Body: []byte("shout")}, "SHOUT", 0},
		{"no stdin", proto.HelperRequest{Command: "cat; echo done"}, "done\n", 0},
		{"one argument", proto.HelperRequest{Command: `printf '%s|' "$0" 'a b' "c"`}, "/bin/sh|a b|c|", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Op = proto.HelperOpExec
			r := c.do(tt.req)
			if r.Error != "" {
				t.Fatalf("error %s: %s", r.Code, r.Error)
			}
			if string(r.Body) != tt.out || r.ExitCode != tt.exitCode || r.TimedOut {
				t.Errorf("got out=%q exit=%d timedOut=%v, want out=%q exit=%d", r.Body, r.ExitCode, r.TimedOut, tt.out, tt.exitCode)
			}
			if r.OutputBytes != int64(len(r.Body)) {
				t.Errorf("OutputBytes = %d, want %d", r.OutputBytes, len(r.Body))
			}
		})
	}
}

func TestExecBadRequests(t *testing.T) {
	c := startServe(t, Options{})
	r := c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "true", Env: map[string]string{"A=B": "x"}})
	if r.Code != proto.HelperErrInvalid {
		t.Errorf("bad env: %+v", r)
	}
	r = c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "true", Dir: "/does/not/exist"})
	if r.Error != "" || r.ExitCode != 126 || !strings.Contains(string(r.Body), "working folder /does/not/exist: no such file") {
		t.Errorf("missing dir: %+v %q", r, r.Body)
	}
	r = c.do(proto.HelperRequest{Op: "frobnicate"})
	if r.Code != proto.HelperErrInvalid {
		t.Errorf("unknown op: %+v", r)
	}
}

func TestExecOutputLimit(t *testing.T) {
	c := startServe(t, Options{})
	r := c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "head -c 1048576 /dev/zero; echo tail >&2", OutputLimit: 1000})
	if len(r.Body) != 1000 || r.OutputBytes != 1048576+5 {
		t.Fatalf("len(body)=%d OutputBytes=%d", len(r.Body), r.OutputBytes)
	}
	r = c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "head -c 100000 /dev/zero"})
	if len(r.Body) != DefaultOutputLimit || r.OutputBytes != 100000 {
		t.Fatalf("default limit: len(body)=%d OutputBytes=%d", len(r.Body), r.OutputBytes)
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	c := startServe(t, Options{Dir: dir})
	start := time.Now()
	// The background sleep is in the same process group and must die too.
	r := c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "sleep 100 & echo $! > bg.pid; sleep 100", TimeoutMs: 300})
	t.Logf("timeout call took %v", time.Since(start))
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	if !r.TimedOut || r.ExitCode != 128+9 {
		t.Errorf("got %+v, want timed out with 137", r)
	}
	pid, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, strings.TrimSpace(string(pid)))
}

// waitGone waits for a process to stop existing (or be a zombie that is not ours).
func waitGone(t *testing.T, pid string) {
	t.Helper()
	for range 100 {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("process %s still alive", pid)
}

func TestCancel(t *testing.T) {
	c := startServe(t, Options{})
	start := time.Now()
	id := c.send(proto.HelperRequest{Op: proto.HelperOpExec, Command: "sleep 100"})
	time.Sleep(100 * time.Millisecond)
	if err := proto.WriteHelperRequest(c.w, &proto.HelperRequest{ID: id, Op: proto.HelperOpCancel}); err != nil {
		t.Fatal(err)
	}
	r := c.wait(id)
	if r.Code != proto.HelperErrCancelled || time.Since(start) > 3*time.Second {
		t.Errorf("got %+v after %v", r, time.Since(start))
	}
}

func TestDuplicateID(t *testing.T) {
	c := startServe(t, Options{})
	req := proto.HelperRequest{ID: 7, Op: proto.HelperOpExec, Command: "sleep 0.3; echo first"}
	proto.WriteHelperRequest(c.w, &req)
	req.Command = "echo second"
	proto.WriteHelperRequest(c.w, &req)
	r1, r2 := c.wait(7), c.wait(7)
	if r1.Code != proto.HelperErrInvalid || string(r2.Body) != "first\n" {
		t.Errorf("got %+v then %+v", r1, r2)
	}
}

func TestBackgroundProcessDoesNotHoldCall(t *testing.T) {
	c := startServe(t, Options{DrainGrace: 50 * time.Millisecond})
	start := time.Now()
	r := c.do(proto.HelperRequest{Op: proto.HelperOpExec, Command: "echo started; (sleep 1; echo late) &"})
	t.Logf("call took %v", time.Since(start))
	if time.Since(start) > 900*time.Millisecond {
		t.Errorf("call held by background process: %v", time.Since(start))
	}
	if string(r.Body) != "started\n" || r.ExitCode != 0 {
		t.Errorf("got %+v", r)
	}
	time.Sleep(1200 * time.Millisecond) // let the background process finish before the leak checks
}

func TestConcurrentExec(t *testing.T) {
	c := startServe(t, Options{})
	const n = 50
	ids := make([]uint64, n)
	for i := range n {
		ids[i] = c.send(proto.HelperRequest{Op: proto.HelperOpExec, Command: fmt.Sprintf("sleep 0.0%d; echo %d", i%10, i)})
	}
	for i, id := range ids {
		r := c.wait(id)
		if want := fmt.Sprintf("%d\n", i); string(r.Body) != want {
			t.Errorf("call %d: %q, want %q", i, r.Body, want)
		}
	}
}

func TestEOFKillsRunningCalls(t *testing.T) {
	reqR, reqW := io.Pipe()
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() { done <- Serve(reqR, io.Discard, Options{Dir: dir}) }()
	proto.WriteHelperRequest(reqW, &proto.HelperRequest{ID: 1, Op: proto.HelperOpExec, Command: "echo $$ > sh.pid; sleep 100"})
	var pid []byte
	for range 200 {
		if pid, _ = os.ReadFile(filepath.Join(dir, "sh.pid")); len(pid) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	reqW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	waitGone(t, strings.TrimSpace(string(pid)))
}

func TestServeRejectsGarbage(t *testing.T) {
	err := Serve(strings.NewReader("this is not a frame at all"), io.Discard, Options{Dir: t.TempDir()})
	if err == nil {
		t.Fatal("Serve accepted garbage")
	}
}

func TestReadWrite(t *testing.T) {
	dir := t.TempDir()
	c := startServe(t, Options{Dir: dir})

	r := c.do(proto.HelperRequest{Op: proto.HelperOpWrite, Path: "a/b/c.txt", Body: []byte("hello world")})
	if r.Error != "" {
		t.Fatalf("write: %s", r.Error)
	}
	got, err := os.ReadFile(filepath.Join(dir, "a/b/c.txt"))
	if err != nil || string(got) != "hello world" {
		t.Fatalf("file = %q, %v", got, err)
	}
	st, _ := os.Stat(filepath.Join(dir, "a/b/c.txt"))
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v", st.Mode())
	}

	r = c.do(proto.HelperRequest{Op: proto.HelperOpRead, Path: filepath.Join(dir, "a/b/c.txt"), Max: 5})
	if string(r.Body) != "hello" || r.Size != 11 {
		t.Errorf("read max 5 = %q size %d", r.Body, r.Size)
	}
	r = c.do(proto.HelperRequest{Op: proto.HelperOpRead, Path: "a/b/c.txt", Max: 100})
	if string(r.Body) != "hello world" || r.Size != 11 {
		t.Errorf("read = %q size %d", r.Body, r.Size)
	}

	// Overwrite keeps the mode and leaves no temporary file.
	os.Chmod(filepath.Join(dir, "a/b/c.txt"), 0o600)
	c.do(proto.HelperRequest{Op: proto.HelperOpWrite, Path: "a/b/c.txt", Body: []byte("new")})
	st, _ = os.Stat(filepath.Join(dir, "a/b/c.txt"))
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode after overwrite = %v", st.Mode())
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "a/b")); len(ents) != 1 {
		t.Errorf("folder holds %d entries", len(ents))
	}

	// A symlink is followed, not replaced.
	os.Symlink("a/b/c.txt", filepath.Join(dir, "link"))
	c.do(proto.HelperRequest{Op: proto.HelperOpWrite, Path: "link", Body: []byte("via link")})
	if got, _ := os.ReadFile(filepath.Join(dir, "a/b/c.txt")); string(got) != "via link" {
		t.Errorf("through symlink: %q", got)
	}

	errs := []struct {
		name string
		req  proto.HelperRequest
		code string
	}{
		{"read missing", proto.HelperRequest{Op: proto.HelperOpRead, Path: "nope", Max: 10}, proto.HelperErrNotExist},
		{"read under a file", proto.HelperRequest{Op: proto.HelperOpRead, Path: "a/b/c.txt/x", Max: 10}, proto.HelperErrNotExist},
		{"read dir", proto.HelperRequest{Op: proto.HelperOpRead, Path: "a", Max: 10}, proto.HelperErrIsDir},
		{"write dir", proto.HelperRequest{Op: proto.HelperOpWrite, Path: "a"}, proto.HelperErrIsDir},
		{"read empty path", proto.HelperRequest{Op: proto.HelperOpRead}, proto.HelperErrInvalid},
	}
	for _, tt := range errs {
		if r := c.do(tt.req); r.Code != tt.code {
			t.Errorf("%s: code %q (%s), want %q", tt.name, r.Code, r.Error, tt.code)
		}
	}
}

func TestReadSizeUnknownToStat(t *testing.T) {
	c := startServe(t, Options{})
	r := c.do(proto.HelperRequest{Op: proto.HelperOpRead, Path: "/proc/meminfo", Max: 4})
	if len(r.Body) != 4 || r.Size <= 4 {
		t.Errorf("got %d bytes, size %d", len(r.Body), r.Size)
	}
}

// TestNoGoroutineLeak runs a batch of calls and checks that Serve leaves no
// goroutines behind once stdin ends.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		reqR, reqW := io.Pipe()
		var out bytes.Buffer
		var mu sync.Mutex
		done := make(chan error, 1)
		go func() { done <- Serve(reqR, lockedWriter{&mu, &out}, Options{Dir: t.TempDir()}) }()
		for i := range 20 {
			proto.WriteHelperRequest(reqW, &proto.HelperRequest{ID: uint64(i + 1), Op: proto.HelperOpExec, Command: "echo hi", TimeoutMs: 5000})
		}
		proto.WriteHelperRequest(reqW, &proto.HelperRequest{ID: 100, Op: proto.HelperOpExec, Command: "sleep 100"})
		time.Sleep(200 * time.Millisecond)
		reqW.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestMergeEnv(t *testing.T) {
	got, err := mergeEnv([]string{"A=1", "B=2", "C=3"}, map[string]string{"B": "x", "D": "4"})
	if err != nil || strings.Join(got, ",") != "A=1,C=3,B=x,D=4" {
		t.Errorf("mergeEnv = %v, %v", got, err)
	}
	for _, bad := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A": "x\x00y"}} {
		if _, err := mergeEnv(nil, bad); err == nil {
			t.Errorf("mergeEnv accepted %q", bad)
		}
	}
}
