package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/helper"
)

// pipeHelper runs helper.Serve over in-memory pipes and returns a client of
// it and a function that kills the "helper" (ends its output stream).
func pipeHelper(t *testing.T) (*helperClient, func()) {
	t.Helper()
	reqR, reqW := io.Pipe()
	respR, respW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		helper.Serve(reqR, respW, helper.Options{Dir: t.TempDir()})
		respW.Close()
	}()
	hc := newHelperClient(reqW, respR, reqW.Close, func() { reqW.Close(); respR.Close() })
	kill := func() { respW.CloseWithError(errors.New("killed")) }
	t.Cleanup(func() {
		hc.close()
		<-done
	})
	return hc, kill
}

func TestHelperClientCalls(t *testing.T) {
	hc, _ := pipeHelper(t)
	ctx := context.Background()
	if err := hc.ping(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			resp, err := hc.call(ctx, &proto.HelperRequest{Op: proto.HelperOpExec, Command: fmt.Sprintf("echo %d", i)})
			if err != nil {
				errs <- err
				return
			}
			if want := fmt.Sprintf("%d\n", i); string(resp.Body) != want {
				errs <- fmt.Errorf("call %d got %q", i, resp.Body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHelperClientCancel(t *testing.T) {
	hc, _ := pipeHelper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := hc.call(ctx, &proto.HelperRequest{Op: proto.HelperOpExec, Command: "sleep 100"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	// The client still works after a cancelled call.
	resp, err := hc.call(context.Background(), &proto.HelperRequest{Op: proto.HelperOpExec, Command: "echo ok"})
	if err != nil || string(resp.Body) != "ok\n" {
		t.Fatalf("after cancel: %v %q", err, resp.Body)
	}
}

func TestHelperClientDeath(t *testing.T) {
	hc, kill := pipeHelper(t)
	errc := make(chan error, 1)
	go func() {
		_, err := hc.call(context.Background(), &proto.HelperRequest{Op: proto.HelperOpExec, Command: "sleep 100"})
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	kill()
	select {
	case err := <-errc:
		if !errors.Is(err, errHelperDied) {
			t.Errorf("pending call: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pending call not failed when the helper died")
	}
	if !hc.dead() {
		t.Error("client not dead")
	}
	if _, err := hc.call(context.Background(), &proto.HelperRequest{Op: proto.HelperOpPing}); !errors.Is(err, errHelperDied) {
		t.Errorf("call on dead client: %v", err)
	}
}

func TestHelperClientGarbage(t *testing.T) {
	reqR, reqW := io.Pipe()
	go io.Copy(io.Discard, reqR)
	respR, respW := io.Pipe()
	hc := newHelperClient(reqW, respR, nil, nil)
	go respW.Write([]byte("OCI runtime exec failed: no such file\r\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := hc.ping(ctx)
	if !errors.Is(err, errHelperDied) {
		t.Errorf("ping on garbage: %v", err)
	}
}

func TestHelperError(t *testing.T) {
	if err := helperError(&proto.HelperResponse{Code: proto.HelperErrNotExist, Error: "x"}); !errors.Is(err, sandbox.ErrNotExist) {
		t.Error(err)
	}
	if err := helperError(&proto.HelperResponse{Code: proto.HelperErrIsDir, Error: "x"}); !errors.Is(err, sandbox.ErrIsDir) {
		t.Error(err)
	}
	if err := helperError(&proto.HelperResponse{Code: proto.HelperErrPermission, Error: "open x: permission denied"}); err.Error() != "sandbox helper: open x: permission denied" {
		t.Error(err)
	}
}

func TestCappedWriter(t *testing.T) {
	w := &cappedWriter{limit: 5}
	w.Write([]byte("abc"))
	w.Write([]byte("defgh"))
	w.Write([]byte("ij"))
	if string(w.buf) != "abcde" || w.total != 10 {
		t.Errorf("buf %q total %d", w.buf, w.total)
	}
}

func TestResolvePath(t *testing.T) {
	for in, want := range map[string]string{
		"a.txt":         "/workspace/a.txt",
		"./a/../b":      "/workspace/b",
		"/etc/passwd":   "/etc/passwd",
		"/workspace/x/": "/workspace/x",
		"":              "/workspace",
	} {
		if got := sandbox.ResolvePath(in); got != want {
			t.Errorf("sandbox.ResolvePath(%q) = %q, want %q", in, got, want)
		}
	}
}
