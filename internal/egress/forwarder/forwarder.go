// Package forwarder is the sandbox's end of the egress proxy: it listens
// on 127.0.0.1:3128 inside the sandbox (whose network has only loopback)
// and relays every connection, byte for byte, to the agent's egress socket
// /beige/egress.sock, which the gateway serves. It knows nothing of HTTP;
// the gateway's proxy does the rest. It is run by `beige-sandbox idle`
// and depends on the standard library only.
package forwarder

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

const (
	// ListenEnv names the variable of the container's env that holds the
	// address to listen on; the gateway sets it in the "proxy" network mode.
	ListenEnv = "BEIGE_EGRESS_LISTEN"
	// DefaultAddr is where the forwarder listens, the host:port of
	// HTTP_PROXY in the sandbox.
	DefaultAddr = "127.0.0.1:3128"
	// SocketPath is the gateway's egress socket inside the sandbox.
	SocketPath = "/beige/egress.sock"
	// MaxConns caps the connections relayed at once (the gateway caps them
	// per agent too).
	MaxConns = 512
)

// Forwarder relays connections from a TCP listener to a Unix socket.
type Forwarder struct {
	ln     net.Listener
	socket string
	sem    chan struct{}
	wg     sync.WaitGroup
}

// Listen listens on addr (a loopback host:port) for connections to relay
// to socket.
func Listen(addr, socket string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("egress forwarder: listen %s: %w", addr, err)
	}
	return &Forwarder{ln: ln, socket: socket, sem: make(chan struct{}, MaxConns)}, nil
}

// Addr is the address listened on.
func (f *Forwarder) Addr() net.Addr { return f.ln.Addr() }

// Serve relays connections until Close; it returns nil after Close.
func (f *Forwarder) Serve() error {
	for {
		f.sem <- struct{}{}
		c, err := f.ln.Accept()
		if err != nil {
			<-f.sem
			if errors.Is(err, net.ErrClosed) {
				f.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			time.Sleep(50 * time.Millisecond) // EMFILE and the like: back off
			continue
		}
		f.wg.Add(1)
		go func() {
			defer func() { <-f.sem; f.wg.Done() }()
			f.relay(c)
		}()
	}
}

// Close stops listening; connections being relayed finish on their own.
func (f *Forwarder) Close() error { return f.ln.Close() }

func (f *Forwarder) relay(c net.Conn) {
	defer c.Close()
	u, err := net.DialTimeout("unix", f.socket, 10*time.Second)
	if err != nil {
		// The gateway is away (restarting, say): say so in HTTP, which is
		// what a client of HTTP_PROXY reads.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 47\r\n\r\nbeige egress proxy: the gateway is unreachable\n")
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(u, c)
		u.(*net.UnixConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, u)
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	<-done
}

// StartFromEnv starts the forwarder when getenv(ListenEnv) names an
// address, and returns a function that stops it. Problems go to log; the
// sandbox runs on without egress then.
func StartFromEnv(getenv func(string) string, log io.Writer) (stop func()) {
	addr := getenv(ListenEnv)
	if addr == "" {
		return func() {}
	}
	f, err := Listen(addr, SocketPath)
	if err != nil {
		fmt.Fprintln(log, err)
		return func() {}
	}
	go f.Serve()
	return func() { f.Close() }
}
