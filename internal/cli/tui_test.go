package cli

import (
	"net"
	"strings"
	"testing"
)

func TestTUIHelp(t *testing.T) {
	withHome(t)
	code, out, _ := run(t, "tui", "--help")
	if code != 0 || !strings.Contains(out, "beige tui [agent]") || !strings.Contains(out, "/verbose on|off") || !strings.Contains(out, "gateway.authToken") {
		t.Errorf("help: %d %q", code, out)
	}
	if code, _, errOut := run(t, "tui", "a", "b"); code != ExitUsage {
		t.Errorf("two agents: %d %q", code, errOut)
	}
}

func TestTUIUnreachableGateway(t *testing.T) {
	withHome(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	code, _, errOut := run(t, "-g", url, "tui", "assistant")
	want := "beige: cannot reach the gateway at " + url + ": is it running? beige gateway start\n"
	if code != ExitFailure || !strings.HasSuffix(errOut, want) || strings.Contains(errOut, "goroutine") {
		t.Errorf("%d %q", code, errOut)
	}
}
