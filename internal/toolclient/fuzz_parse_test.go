package toolclient

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
)

var responseSeeds = []string{
	`{"type":"tool_response","success":true,"output":"On branch main\n","exitCode":0}` + "\n",
	`{"type":"tool_response","success":false,"output":"partial","error":"fatal: no","exitCode":128}` + "\n",
	`{"type":"tool_response","success":false,"error":"broken"}`,
	`{"type":"tool_response","success":true,"exitCode":-5}` + "\n",
	`{"type":"tool_response","success":true,"exitCode":4294967297}` + "\n",
	`{"type":"other"}` + "\n", `{}` + "\n", "\n", ``, `{"type":"tool_response","output":"\u0000\ud800"}`,
}

// FuzzReadResponse decodes the gateway's answer frame: no panic; one that
// decodes is a tool response, and encodes and decodes back the same.
func FuzzReadResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := readResponse(bytes.NewReader(data))
		if err != nil {
			return
		}
		if resp.Type != proto.ToolResponseType {
			t.Fatalf("accepted type %q", resp.Type)
		}
		frame, err := proto.AppendToolFrame(nil, resp)
		if err != nil {
			t.Fatalf("encode %+v: %v", resp, err)
		}
		resp2, err := readResponse(bytes.NewReader(frame))
		if err != nil || resp2 != resp {
			t.Fatalf("round trip of %s: %v\n%+v\n%+v", frame, err, resp, resp2)
		}
	})
}

// fakeGateway answers each connection with the answer set last, after
// reading the request line, which it decodes as the gateway would.
type fakeGateway struct {
	mu      sync.Mutex
	answer  []byte
	lastErr error // DecodeToolRequest's error for the last request
	lastReq proto.ToolRequest
}

func (g *fakeGateway) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		line, _ := bufio.NewReader(c).ReadBytes('\n')
		req, derr := proto.DecodeToolRequest(bytes.TrimSuffix(line, []byte("\n")))
		g.mu.Lock()
		g.lastReq, g.lastErr = req, derr
		answer := g.answer
		g.mu.Unlock()
		c.Write(answer)
		c.Close()
	}
}

// FuzzRun runs the tool client with what a sandbox controls (the session
// variables it reads from the environment, the arguments) against a
// gateway answering arbitrary bytes: the exit code is 0..255 and 0 only for
// a success; stdout is the response's output; and every request sent is a
// frame the gateway decodes, carrying the arguments unchanged.
func FuzzRun(f *testing.F) {
	dir, err := os.MkdirTemp("", "tc") // short: a socket path is at most 108 bytes
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "g.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ln.Close() })
	g := &fakeGateway{}
	go g.serve(ln)
	for _, s := range responseSeeds {
		f.Add([]byte(s), "telegram:42:7", "status")
	}
	f.Add([]byte(responseSeeds[0]), "\u2028\x00", "-c\x00x")
	f.Fuzz(func(t *testing.T, answer []byte, sessionKey, arg string) {
		g.mu.Lock()
		g.answer, g.lastErr, g.lastReq = answer, nil, proto.ToolRequest{}
		g.mu.Unlock()
		var stdout, stderr bytes.Buffer
		env := map[string]string{SocketEnv: sock, "BEIGE_SESSION_KEY": sessionKey, "BEIGE_CHAT_ID": sessionKey}
		code := run([]string{"git", arg}, func(k string) string { return env[k] }, "/workspace/x", &stdout, &stderr)
		if code < 0 || code > 255 {
			t.Fatalf("exit code %d", code)
		}
		if code == proto.ExitBadRequest && stdout.Len() == 0 && (bytes.Contains(stderr.Bytes(), []byte("NUL")) || bytes.Contains(stderr.Bytes(), []byte("UTF-8"))) {
			return // refused before sending
		}
		resp, rerr := readResponse(bytes.NewReader(answer))
		if rerr != nil {
			if code == 0 {
				t.Fatal("exit 0 without a response")
			}
			return
		}
		g.mu.Lock()
		req, derr := g.lastReq, g.lastErr
		g.mu.Unlock()
		if derr != nil {
			t.Fatalf("the gateway cannot decode the request: %v", derr)
		}
		if len(req.Args) != 1 || req.Args[0] != arg {
			t.Fatalf("args %q, sent %q", req.Args, arg)
		}
		if (code == 0) != (resp.Success && resp.ExitCode == 0) && !(resp.Success && (resp.ExitCode < 0 || resp.ExitCode > 255)) {
			t.Fatalf("exit %d for %+v", code, resp)
		}
		if !resp.Success && code == 0 {
			t.Fatalf("exit 0 for a failure %+v", resp)
		}
		if stdout.String() != resp.Output {
			t.Fatalf("stdout %q, output %q", stdout.String(), resp.Output)
		}
	})
}
