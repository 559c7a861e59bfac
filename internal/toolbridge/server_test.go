package toolbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// socketDir returns a short private folder (socket paths are limited to
// about 100 bytes, which t.TempDir can exceed).
func socketDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "tb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// echo answers with the agent and the request it saw.
func echo(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
	b, _ := json.Marshal(struct {
		Agent string
		Req   proto.ToolRequest
	}{agent, req})
	return proto.ToolResponse{Success: true, Output: string(b)}
}

// checkGoroutines fails the test if goroutines started during it are still
// running once it has cleaned up.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines leaked: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func listen(t *testing.T, agent string, h Handler, opts *Options) *Server {
	t.Helper()
	s, err := Listen(filepath.Join(socketDir(t), "gateway.sock"), agent, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends one line and reads one response.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, line string) proto.ToolResponse {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	return readResp(t, c, br)
}

func readResp(t *testing.T, c net.Conn, br *bufio.Reader) proto.ToolResponse {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read response: %v (got %q)", err, line)
	}
	var resp proto.ToolResponse
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatalf("response %q: %v", line, err)
	}
	if resp.Type != proto.ToolResponseType {
		t.Fatalf("response type %q", resp.Type)
	}
	return resp
}

// expectClosed checks that the server closed the connection.
func expectClosed(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	// EOF, or a reset when the server closed with unread input.
	if b, err := br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection still open: read %q, %v", b, err)
	}
}

func TestServeAndIdentity(t *testing.T) {
	checkGoroutines(t)
	s := listen(t, "travel", echo, nil)
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
	c := dial(t, s)
	br := bufio.NewReader(c)
	// The payload claims another agent in every way it can.
	resp := roundTrip(t, c, br, `{"type":"tool_request","tool":"git","args":["status"],"agent":"admin","cwd":"src","sessionContext":{"sessionKey":"tui:admin:default","channel":"tui","agentName":"admin"}}`)
	var got struct {
		Agent string
		Req   proto.ToolRequest
	}
	if err := json.Unmarshal([]byte(resp.Output), &got); err != nil {
		t.Fatal(err)
	}
	if got.Agent != "travel" || got.Req.SessionContext.AgentName != "travel" {
		t.Errorf("handler saw agent %q / sessionContext.agentName %q, want travel", got.Agent, got.Req.SessionContext.AgentName)
	}
	// Nor is the claimed session believed (no call token).
	if got.Req.Tool != "git" || got.Req.Cwd != "src" || *got.Req.SessionContext != (proto.SessionContext{AgentName: "travel"}) {
		t.Errorf("handler saw %+v, session %+v", got.Req, got.Req.SessionContext)
	}
	// A second request on the same connection, without a session context.
	resp = roundTrip(t, c, br, `{"type":"tool_request","tool":"x","args":[]}`)
	if !resp.Success || !strings.Contains(resp.Output, `"agentName":"travel"`) {
		t.Errorf("second request: %+v", resp)
	}
}

func TestMalformedFrames(t *testing.T) {
	checkGoroutines(t)
	var calls atomic.Int32
	h := func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		calls.Add(1)
		return proto.ToolResponse{Success: true}
	}
	s := listen(t, "a", h, nil)
	tests := []struct{ line, want string }{
		{`not json`, "bad request: want a JSON object"},
		{`{"type":"tool_request","tool":"git"`, "bad request: invalid JSON"},
		{`{"type":"hello","tool":"git"}`, `bad request: "type" is "hello"`},
		{`{"type":"tool_request"}`, `bad request: missing "tool"`},
		{`{"type":"tool_request","tool":"git","args":"status"}`, `bad request: "args" must be an array of strings`},
		{`{"type":"tool_request","tool":"git","args":[1,2]}`, `bad request: "args" must be an array of strings`},
		{``, "bad request: empty frame"},
	}
	for _, tt := range tests {
		c := dial(t, s)
		br := bufio.NewReader(c)
		resp := roundTrip(t, c, br, tt.line)
		if resp.Success || resp.ExitCode != 2 || !strings.HasPrefix(resp.Error, tt.want) {
			t.Errorf("%q: got %+v, want error starting %q, exit 2", tt.line, resp, tt.want)
		}
		expectClosed(t, c, br)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("handler called %d times for malformed frames", n)
	}
}

func TestOversizedFrame(t *testing.T) {
	checkGoroutines(t)
	s := listen(t, "a", echo, nil)
	c := dial(t, s)
	br := bufio.NewReader(c)
	// 10 MB in one line: the server must answer after reading about 1 MB
	// and close, not buffer it all.
	writeErr := make(chan error, 1)
	go func() {
		big := `{"type":"tool_request","tool":"git","args":["` + strings.Repeat("a", 10<<20) + `"]}` + "\n"
		_, err := io.WriteString(c, big)
		writeErr <- err
	}()
	resp := readResp(t, c, br)
	if resp.Success || resp.ExitCode != 2 || !strings.Contains(resp.Error, "frame larger than 1048576 bytes") {
		t.Errorf("got %+v", resp)
	}
	expectClosed(t, c, br)
	select {
	case err := <-writeErr:
		if err == nil {
			t.Error("the whole 10 MB frame was accepted")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writer still blocked")
	}

	// Exactly at the limit is fine.
	s2 := listen(t, "a", func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		return proto.ToolResponse{Success: true, Output: "ok"}
	}, &Options{MaxFrame: 100})
	c2 := dial(t, s2)
	br2 := bufio.NewReader(c2)
	line := `{"type":"tool_request","tool":"git","args":["` + strings.Repeat("b", 100-48) + `"]}`
	if len(line) != 100 {
		t.Fatalf("test line is %d bytes", len(line))
	}
	if resp := roundTrip(t, c2, br2, line); !resp.Success {
		t.Errorf("frame at the limit: %+v", resp)
	}
	if resp := roundTrip(t, c2, br2, line+" "); resp.Success {
		t.Errorf("frame one byte over the limit: %+v", resp)
	}
}

func TestHalfOpenConnections(t *testing.T) {
	checkGoroutines(t)
	s := listen(t, "a", echo, &Options{ReadTimeout: 200 * time.Millisecond})
	idle := dial(t, s) // sends nothing
	partial := dial(t, s)
	io.WriteString(partial, `{"type":"tool_request","tool":`) // and stops
	for _, c := range []net.Conn{idle, partial} {
		br := bufio.NewReader(c)
		start := time.Now()
		expectClosed(t, c, br)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("dropped after %v", d)
		}
	}
	// The server still serves.
	c := dial(t, s)
	if resp := roundTrip(t, c, bufio.NewReader(c), `{"type":"tool_request","tool":"git"}`); !resp.Success {
		t.Errorf("after half-open connections: %+v", resp)
	}
}

func TestManyConcurrentConnections(t *testing.T) {
	checkGoroutines(t)
	const n = 500
	var inFlight, maxInFlight atomic.Int32
	h := func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		cur := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if cur <= m || maxInFlight.CompareAndSwap(m, cur) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		inFlight.Add(-1)
		return proto.ToolResponse{Success: true, Output: req.Args[0]}
	}
	// A cap below n: the rest wait in the backlog and are served later.
	s := listen(t, "a", h, &Options{MaxConns: 64})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", s.Path())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			id := strings.Repeat("x", i%7) + string(rune('a'+i%26))
			req, _ := proto.AppendToolFrame(nil, proto.ToolRequest{Type: proto.ToolRequestType, Tool: "t", Args: []string{id}})
			if _, err := c.Write(req); err != nil {
				errs <- err
				return
			}
			line, err := bufio.NewReader(c).ReadBytes('\n')
			if err != nil {
				errs <- err
				return
			}
			var resp proto.ToolResponse
			if err := json.Unmarshal(line, &resp); err != nil || resp.Output != id {
				errs <- errors.New("wrong answer: " + string(line))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := maxInFlight.Load(); m > 64 {
		t.Errorf("%d handlers ran at once, cap is 64", m)
	}
}

func TestPipelinedRequests(t *testing.T) {
	checkGoroutines(t)
	s := listen(t, "a", func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		return proto.ToolResponse{Success: true, Output: req.Args[0]}
	}, nil)
	c := dial(t, s)
	br := bufio.NewReader(c)
	io.WriteString(c, `{"type":"tool_request","tool":"t","args":["1"]}`+"\n"+`{"type":"tool_request","tool":"t","args":["2"]}`+"\n")
	for _, want := range []string{"1", "2"} {
		if resp := readResp(t, c, br); resp.Output != want {
			t.Errorf("got %+v, want output %s", resp, want)
		}
	}
}

func TestClientGoneCancelsHandler(t *testing.T) {
	checkGoroutines(t)
	cancelled := make(chan struct{})
	started := make(chan struct{})
	s := listen(t, "a", func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		close(started)
		select {
		case <-ctx.Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
		return proto.ToolResponse{}
	}, nil)
	c, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, `{"type":"tool_request","tool":"t"}`+"\n")
	<-started
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled when the client left")
	}
}

func TestCloseDrainsThenCancels(t *testing.T) {
	checkGoroutines(t)
	started := make(chan struct{}, 2)
	s, err := Listen(filepath.Join(socketDir(t), "gateway.sock"), "a", func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		started <- struct{}{}
		if req.Tool == "quick" {
			time.Sleep(50 * time.Millisecond)
			return proto.ToolResponse{Success: true, Output: "done"}
		}
		<-ctx.Done() // a stuck tool: only cancellation ends it
		return proto.ToolResponse{Error: "cancelled", ExitCode: 1}
	}, &Options{DrainTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	idle := dial(t, s)
	quick, stuck := dial(t, s), dial(t, s)
	io.WriteString(quick, `{"type":"tool_request","tool":"quick"}`+"\n")
	io.WriteString(stuck, `{"type":"tool_request","tool":"stuck"}`+"\n")
	<-started
	<-started

	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("Close took %v, want about the drain timeout", d)
	}
	if _, err := os.Stat(s.Path()); !os.IsNotExist(err) {
		t.Errorf("socket file still there: %v", err)
	}
	if resp := readResp(t, quick, bufio.NewReader(quick)); resp.Output != "done" {
		t.Errorf("quick call during drain: %+v", resp)
	}
	expectClosed(t, idle, bufio.NewReader(idle))
	if _, err := net.Dial("unix", s.Path()); err == nil {
		t.Error("still accepting after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestHandlerPanic(t *testing.T) {
	checkGoroutines(t)
	s := listen(t, "a", func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		panic("boom")
	}, nil)
	c := dial(t, s)
	resp := roundTrip(t, c, bufio.NewReader(c), `{"type":"tool_request","tool":"git"}`)
	if resp.Success || resp.ExitCode != 1 || !strings.Contains(resp.Error, "internal error") {
		t.Errorf("got %+v", resp)
	}
}

func TestListenSocketFile(t *testing.T) {
	dir := socketDir(t)
	path := filepath.Join(dir, "gateway.sock")

	// A stale socket from a dead gateway is replaced.
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	s, err := Listen(path, "a", echo, nil)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	s.Close()

	// A live one is not.
	live, err := Listen(path, "a", echo, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path, "b", echo, nil); !errors.Is(err, ErrInUse) {
		t.Errorf("live socket: err = %v", err)
	}
	live.Close()

	// Any other file is not.
	os.WriteFile(path, []byte("x"), 0o600)
	if _, err := Listen(path, "a", echo, nil); !errors.Is(err, ErrNotSocket) {
		t.Errorf("regular file at the socket path: err = %v", err)
	}
	os.Remove(path)

	// A folder others can write to is refused; one they can read is tightened.
	os.Chmod(dir, 0o777)
	if _, err := Listen(path, "a", echo, nil); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("world-writable folder: err = %v", err)
	}
	os.Chmod(dir, 0o755)
	s, err = Listen(path, "a", echo, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("folder mode = %v, want 0700", fi.Mode().Perm())
	}

	if _, err := Listen(filepath.Join(dir, "missing", "gateway.sock"), "a", echo, nil); err == nil {
		t.Error("missing folder accepted")
	}

	// DirMode opens the folder to the sandbox's non-root user, never to writers.
	for _, mode := range []os.FileMode{0o755, 0o777} {
		os.Chmod(dir, 0o700)
		s, err = Listen(path, "a", echo, &Options{DirMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
			t.Errorf("DirMode %#o: folder mode = %v, want 0755", mode, fi.Mode().Perm())
		}
	}
}

// TestCallTokenAttribution (security issue #10, finding 6): a call is
// attributed to a session only by a live call token; a forged
// sessionContext, a missing, unknown or released token give only the agent,
// marked unattributed, and the token never reaches the handler.
func TestCallTokenAttribution(t *testing.T) {
	checkGoroutines(t)
	var mu sync.Mutex
	var seen proto.ToolRequest
	s := listen(t, "travel", func(ctx context.Context, agent string, req proto.ToolRequest) proto.ToolResponse {
		mu.Lock()
		seen = req
		mu.Unlock()
		return proto.ToolResponse{Success: true}
	}, nil)
	session := proto.ParseSessionKey("someone", "tui:travel:default")
	token, release := s.Attribute(session)
	other, releaseOther := s.Attribute(proto.ParseSessionKey("travel", "telegram:1:2"))
	defer releaseOther()
	if len(token) != 32 || token == other {
		t.Fatalf("tokens %q, %q: want two different 128-bit hex tokens", token, other)
	}
	forged := `"sessionContext":{"sessionKey":"telegram:123456789:77","channel":"telegram","chatId":"123456789","threadId":"77"}`
	want := session
	want.AgentName = "travel"
	tests := []struct {
		name, frame  string
		unattributed bool
		session      proto.SessionContext
	}{
		{"token", `{"type":"tool_request","tool":"git","callToken":"` + token + `",` + forged + `}`, false, want},
		{"forged, no token", `{"type":"tool_request","tool":"git",` + forged + `}`, true, proto.SessionContext{AgentName: "travel"}},
		{"unknown token", `{"type":"tool_request","tool":"git","callToken":"` + strings.Repeat("0", 32) + `",` + forged + `}`, true, proto.SessionContext{AgentName: "travel"}},
	}
	c := dial(t, s)
	br := bufio.NewReader(c)
	check := func(name, frame string, unattributed bool, session proto.SessionContext) {
		t.Helper()
		roundTrip(t, c, br, frame)
		mu.Lock()
		defer mu.Unlock()
		if seen.Unattributed != unattributed || seen.SessionContext == nil || *seen.SessionContext != session || seen.CallToken != "" {
			t.Errorf("%s: handler saw unattributed=%v session %+v token %q; want %v %+v", name, seen.Unattributed, seen.SessionContext, seen.CallToken, unattributed, session)
		}
	}
	for _, tt := range tests {
		check(tt.name, tt.frame, tt.unattributed, tt.session)
	}
	release()
	release()
	check("released token", tests[0].frame, true, proto.SessionContext{AgentName: "travel"})
}
