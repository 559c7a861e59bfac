package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// serve starts the API's http.Server as the gateway does, on a free port.
func serve(t testing.TB, b Backend, o ServeOptions) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, lim := New(b, Options{Host: "127.0.0.1"}).HTTPServer(ln, o)
	go srv.Serve(lim)
	t.Cleanup(func() { srv.Close() })
	return srv, ln.Addr().String()
}

// health GETs /api/health on a fresh connection.
func health(addr string, timeout time.Duration) error {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/api/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// TestHelperHoldConns is not a test: run as a child process by
// holdConns, it opens connections to BEIGE_HOLD_ADDR and holds them,
// each idle, or sending half its headers, or half its body.
func TestHelperHoldConns(t *testing.T) {
	addr := os.Getenv("BEIGE_HOLD_ADDR")
	if addr == "" {
		t.Skip("helper process")
	}
	RaiseFileLimit()
	n, _ := strconv.Atoi(os.Getenv("BEIGE_HOLD_N"))
	var conns []net.Conn
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(1)
		}
		switch i % 3 {
		case 1: // slowloris: headers that never end
			io.WriteString(c, "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
		case 2: // a body that never ends
			io.WriteString(c, "POST /api/agents/assistant/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"mess")
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // until the parent is done
	runtime.KeepAlive(conns)      // else a GC may finalize, so close, them early
	os.Exit(0)
}

// holdConns starts a child process that holds n connections to addr (a
// child, so that its descriptors do not count against ours).
func holdConns(t *testing.T, addr string, n int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldConns$")
	cmd.Env = append(os.Environ(), "BEIGE_HOLD_ADDR="+addr, "BEIGE_HOLD_N="+strconv.Itoa(n))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("helper: %q", line)
	}
}

// lowerFileLimit sets our soft RLIMIT_NOFILE to what is open now plus
// room, for the length of the test.
func lowerFileLimit(t *testing.T, room uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	low := old
	low.Cur = uint64(len(fds)) + room
	if low.Cur >= old.Cur {
		t.Skipf("soft file limit %d already low", old.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// TestIdleAndSlowClientsCannotStarveHealth is #10.9: 240 idle or slow
// connections must not keep a health check out, even when the gateway has
// few descriptors to spare.
func TestIdleAndSlowClientsCannotStarveHealth(t *testing.T) {
	lowerFileLimit(t, 120)
	_, addr := serve(t, &stub{}, ServeOptions{MaxConns: 64})
	holdConns(t, addr, 240)
	time.Sleep(300 * time.Millisecond) // let the server accept them
	for i := range 5 {
		if err := health(addr, 3*time.Second); err != nil {
			t.Fatalf("health check %d with 240 idle and slow connections open: %v", i, err)
		}
	}
}

// blocking is a backend whose prompts wait until released.
type blocking struct {
	stub
	running atomic.Int32
	release chan struct{}
}

func (b *blocking) Prompt(ctx context.Context, agent string, req proto.PromptRequest) (proto.PromptResponse, error) {
	b.running.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return proto.PromptResponse{Response: "done"}, nil
}

// TestConnCapRefusesWhenAllBusy: connections serving requests are never
// closed to make room; past the cap a new one gets 503, and once a request
// ends there is room again.
func TestConnCapRefusesWhenAllBusy(t *testing.T) {
	b := &blocking{release: make(chan struct{})}
	_, addr := serve(t, b, ServeOptions{MaxConns: 4})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			resp, err := http.Post("http://"+addr+"/api/agents/assistant/prompt", "application/json", strings.NewReader(`{"message":"hi"}`))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("busy request: %s", resp.Status)
				}
			}
			errs <- err
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); b.running.Load() < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 prompts running", b.running.Load())
		}
	}
	if err := health(addr, 3*time.Second); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a 5th connection while 4 requests run: %v, want 503", err)
	}
	close(b.release)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := health(addr, 3*time.Second); err != nil {
		t.Errorf("after the requests ended: %v", err)
	}
}

// slowBody opens a connection that sends a prompt's headers and the start
// of its body, and no more.
func slowBody(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, "POST /api/agents/assistant/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"mess")
	return c
}

// TestSlowBodyTimesOut is #13.8: a body that never finishes gets 408 after
// the body timeout instead of holding its connection for ever.
func TestSlowBodyTimesOut(t *testing.T) {
	_, addr := serve(t, &stub{}, ServeOptions{BodyTimeout: 300 * time.Millisecond})
	c := slowBody(t, addr)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that never ends: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"error"`) {
		t.Errorf("%s %s, want 408 with a JSON error", resp.Status, body)
	}
}

// TestShutdownDoesNotWaitForSlowBody is #13.8: SIGTERM (Shutdown) must not
// wait for a client whose body is still trickling in.
func TestShutdownDoesNotWaitForSlowBody(t *testing.T) {
	srv, addr := serve(t, &stub{}, ServeOptions{})
	slowBody(t, addr)
	time.Sleep(200 * time.Millisecond) // the handler is reading the body
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v after %v", err, time.Since(start))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown took %v", d)
	}
}

// streamer streams an event every 100 ms for 1.5 s.
type streamer struct {
	stub
	cancelled atomic.Bool
}

func (s *streamer) ChatStream(ctx context.Context, req llmproto.ChatStreamRequest, emit func(llm.Event)) error {
	for i := range 15 {
		select {
		case <-ctx.Done():
			s.cancelled.Store(true)
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		emit(llm.Event{Type: llm.EventTextDelta, Delta: strconv.Itoa(i)})
	}
	return nil
}

// TestStreamOutlivesTimeouts: a stream longer than every timeout of the
// server is not cut (there is no write timeout, and the body's deadline is
// lifted once the body has been read).
func TestStreamOutlivesTimeouts(t *testing.T) {
	st := &streamer{}
	_, addr := serve(t, st, ServeOptions{ReadHeaderTimeout: 200 * time.Millisecond, BodyTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})
	resp, err := http.Post("http://"+addr+"/api/chat/stream", "application/json", strings.NewReader(`{"provider":"p","modelId":"m","agentName":"assistant","context":{"messages":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("stream cut: %v after %q", err, data)
	}
	if n := strings.Count(string(data), "\n"); n != 15 || st.cancelled.Load() {
		t.Errorf("%d of 15 events, cancelled %v: %s", n, st.cancelled.Load(), data)
	}
}

func TestRaiseFileLimit(t *testing.T) {
	lowerFileLimit(t, 200)
	soft, hard, err := RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var now syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now)
	if soft != hard || now.Cur != now.Max || uint64(now.Cur) != soft {
		t.Errorf("soft %d hard %d, limit now %+v", soft, hard, now)
	}
}

// TestEarlyAnswerDoesNotWaitForSlowBody: a request refused before its body
// is read (403, 404, 415) is answered at once, not after the body timeout,
// and its connection does not hold up Shutdown.
func TestEarlyAnswerDoesNotWaitForSlowBody(t *testing.T) {
	for _, tc := range []struct{ name, head string }{
		{"unknown endpoint", "POST /api/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"},
		{"cross-site", "POST /api/agents/assistant/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\n"},
		{"wrong host", "POST /api/agents/assistant/prompt HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\n"},
		{"text/plain", "POST /api/agents/assistant/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := serve(t, &stub{}, ServeOptions{})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tc.head+"Content-Length: 100000\r\n\r\n{\"mess")
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no prompt answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("status %s", resp.Status)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
}
