package forwarder

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRelay(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go func() {
				b, _ := io.ReadAll(c) // until the forwarder half-closes
				c.Write([]byte(strings.ToUpper(string(b))))
				c.Close()
			}()
		}
	}()
	f, err := Listen("127.0.0.1:0", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- f.Serve() }()
	for i := range 3 {
		c, err := net.Dial("tcp", f.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(c, "hello through the sandbox")
		c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(got) != "HELLO THROUGH THE SANDBOX" {
			t.Fatalf("connection %d: %q, %v", i, got, err)
		}
	}
	f.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
}

// TestGatewayAway: with no gateway socket, a client of HTTP_PROXY reads a
// 502 that says why.
func TestGatewayAway(t *testing.T) {
	f, err := Listen("127.0.0.1:0", filepath.Join(t.TempDir(), "none.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	go f.Serve()
	c, err := net.Dial("tcp", f.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	io.WriteString(c, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 502 || !strings.Contains(string(body), "gateway is unreachable") {
		t.Errorf("answer %d %q", resp.StatusCode, body)
	}
}

func TestStartFromEnv(t *testing.T) {
	stop := StartFromEnv(func(string) string { return "" }, io.Discard)
	stop()
	var log strings.Builder
	stop = StartFromEnv(func(string) string { return "256.0.0.1:1" }, &log)
	stop()
	if !strings.Contains(log.String(), "egress forwarder") {
		t.Errorf("log %q", log.String())
	}
	stop = StartFromEnv(func(k string) string { return map[string]string{ListenEnv: "127.0.0.1:0"}[k] }, &log)
	stop()
}
