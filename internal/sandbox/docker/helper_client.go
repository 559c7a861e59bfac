package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

// errHelperDied is returned to the calls pending when the helper's stream
// ends; the next call starts a new helper.
var errHelperDied = errors.New("sandbox: helper exited")

// helperClient multiplexes calls over one helper's stdin/stdout.
type helperClient struct {
	w          io.Writer    // request stream (the helper's stdin)
	closeWrite func() error // ends the request stream; the helper exits on EOF
	closeAll   func()       // tears the connection down

	wmu sync.Mutex // serialises request frames

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *proto.HelperResponse
	err     error         // why the stream ended
	done    chan struct{} // closed when the stream ended

	pid int // the helper's pid in the sandbox, from the first ping; 0 if unknown

	// stalled is set when a call missed its deadline: the helper must be
	// checked (and replaced if hung) before it gets another call.
	stalled atomic.Bool
}

// newHelperClient starts reading responses from r. closeWrite and closeAll may be nil.
func newHelperClient(w io.Writer, r io.Reader, closeWrite func() error, closeAll func()) *helperClient {
	c := &helperClient{
		w: w, closeWrite: closeWrite, closeAll: closeAll,
		pending: make(map[uint64]chan *proto.HelperResponse),
		done:    make(chan struct{}),
	}
	go c.readLoop(r)
	return c
}

func (c *helperClient) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		resp, err := proto.ReadHelperResponse(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF
			}
			c.fail(err)
			return
		}
		c.mu.Lock()
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- resp // buffered, never blocks
		}
	}
}

// fail marks the stream dead, wakes every pending call and drops the connection.
func (c *helperClient) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	c.mu.Unlock()
	if c.closeAll != nil {
		c.closeAll()
	}
}

// dead reports whether the stream has ended.
func (c *helperClient) dead() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *helperClient) deathErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("%w: %v", errHelperDied, c.err)
}

// call sends req and waits for its response. When ctx ends first it sends a
// cancel frame (the helper kills the call's process group) and returns ctx.Err().
func (c *helperClient) call(ctx context.Context, req *proto.HelperRequest) (*proto.HelperResponse, error) {
	ch := make(chan *proto.HelperResponse, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.deathErr()
	}
	c.nextID++
	id := c.nextID
	req.ID = id
	c.pending[id] = ch
	c.mu.Unlock()

	if err := c.send(req); err != nil {
		c.forget(id)
		c.fail(err)
		return nil, fmt.Errorf("%w: send: %v", errHelperDied, err)
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-c.done:
		select {
		case resp := <-ch: // answered just before the end
			return resp, nil
		default:
			return nil, c.deathErr()
		}
	case <-ctx.Done():
		c.forget(id)
		go c.send(&proto.HelperRequest{ID: id, Op: proto.HelperOpCancel})
		return nil, ctx.Err()
	}
}

func (c *helperClient) send(req *proto.HelperRequest) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return proto.WriteHelperRequest(c.w, req)
}

func (c *helperClient) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// ping checks that a helper answers and speaks our protocol version.
func (c *helperClient) ping(ctx context.Context) error {
	resp, err := c.call(ctx, &proto.HelperRequest{Op: proto.HelperOpPing})
	if err != nil {
		return err
	}
	if resp.Error != "" {
		return errors.New(resp.Error)
	}
	if resp.Version != proto.HelperVersion {
		return fmt.Errorf("helper speaks protocol %q, want %q", resp.Version, proto.HelperVersion)
	}
	c.mu.Lock()
	if c.pid == 0 {
		c.pid = resp.Pid
	}
	c.mu.Unlock()
	return nil
}

// close ends the request stream so the helper exits, waits a little for it
// to go, then drops the connection.
func (c *helperClient) close() {
	if c.closeWrite != nil {
		_ = c.closeWrite()
	}
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
	}
	c.fail(errors.New("closed"))
}

// helperPid is the helper's pid in the sandbox, 0 when unknown.
func (c *helperClient) helperPid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid
}
