package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/proto"
)

func TestRun(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"beige-sandbox"}, 2, "", "usage"},
		{[]string{"beige-sandbox", "frob"}, 2, "", "usage"},
		{[]string{"beige-sandbox", "version"}, 0, "protocol " + proto.HelperVersion, ""},
		{[]string{"/beige/beige-sandbox", "serve"}, 0, "", ""}, // empty stdin: clean EOF
		{[]string{"beige-sandbox", "serve", "--user", "0:0"}, 0, "", ""},
		{[]string{"beige-sandbox", "serve", "--user", "1000"}, 2, "", "uid:gid"},
		{[]string{"beige-sandbox", "serve", "--user"}, 2, "", "usage"},
		{[]string{"beige-sandbox", "serve", "extra"}, 2, "", "usage"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(tt.args, strings.NewReader(""), &out, &errb)
		if code != tt.code || !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errb.String(), tt.stderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q", tt.args, code, out.String(), errb.String())
		}
	}
}

func TestServeOverStdio(t *testing.T) {
	var in bytes.Buffer
	proto.WriteHelperRequest(&in, &proto.HelperRequest{ID: 1, Op: proto.HelperOpPing})
	var out, errb bytes.Buffer
	if code := run([]string{"beige-sandbox", "serve"}, &in, &out, &errb); code != 0 {
		t.Fatalf("serve = %d: %s", code, errb.String())
	}
	resp, err := proto.ReadHelperResponse(&out)
	if err != nil || resp.ID != 1 || resp.Version != proto.HelperVersion {
		t.Fatalf("response %+v, %v", resp, err)
	}
	if code := run([]string{"beige-sandbox", "serve"}, strings.NewReader("garbage!garbage!"), &out, &errb); code != 1 {
		t.Errorf("serve on garbage = %d", code)
	}
}

// TestToolClientDispatch: called as tool-client, the binary is the tool
// client (which, with no gateway socket here, says it cannot reach it).
func TestToolClientDispatch(t *testing.T) {
	t.Setenv("BEIGE_GATEWAY_SOCKET", filepath.Join(t.TempDir(), "none.sock"))
	if code := run([]string{"/beige/tool-client", "git", "status"}, nil, nil, nil); code != proto.ExitUnreachable {
		t.Errorf("tool-client = %d, want %d", code, proto.ExitUnreachable)
	}
}

func TestIdle(t *testing.T) {
	sig := make(chan os.Signal, 1)
	done := make(chan int)
	go func() { done <- idle(sig) }()
	select {
	case <-done:
		t.Fatal("idle returned without a signal")
	case <-time.After(50 * time.Millisecond):
	}
	sig <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("idle = %d", code)
		}
	case <-time.After(time.Second):
		t.Fatal("idle did not return on SIGTERM")
	}
}

// TestDeps keeps the in-sandbox binary small: only the standard library and
// the three beige packages it needs.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/beige-dev/beige/cmd/beige-sandbox":       true,
		"github.com/beige-dev/beige/internal/proto":          true,
		"github.com/beige-dev/beige/internal/sandbox/helper": true,
		"github.com/beige-dev/beige/internal/toolclient":     true,
	}
	allowed["github.com/beige-dev/beige/internal/egress/forwarder"] = true // stdlib only
	allowed["github.com/beige-dev/beige/internal/egress/trust"] = true     // stdlib only
	for _, pkg := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(pkg, "/")
		if strings.Contains(first, ".") && !allowed[pkg] {
			t.Errorf("beige-sandbox depends on %s", pkg)
		}
	}
}
