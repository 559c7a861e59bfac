package cli

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/home"
)

// TestAddrGatewayHelper is not a test: run as a child (BEIGE_TEST_ADDR_GATEWAY
// set) it plays a running gateway of $BEIGE_HOME that listens where its
// config no longer says: it takes the lock, writes the PID file, serves
// health, agents and restart on a port of its own and records it as the
// gateway does; a restart moves it to another port. It says "ready" and
// waits for SIGTERM.
func TestAddrGatewayHelper(t *testing.T) {
	if os.Getenv("BEIGE_TEST_ADDR_GATEWAY") == "" {
		t.Skip("helper process only")
	}
	h, err := home.Default()
	if err != nil {
		os.Exit(10)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	lock, err := acquireGatewayLock(h)
	if err != nil {
		os.Exit(11)
	}
	defer lock.Release()
	os.WriteFile(h.PIDFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	restarted := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/health", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /api/agents", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"agents":[]}`)
	})
	mux.HandleFunc("POST /api/gateway/restart", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"status":"restarting","message":"restarting"}`)
		restarted <- struct{}{}
	})
	serve := func() *http.Server {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(13)
		}
		srv := &http.Server{Handler: mux}
		go srv.Serve(ln)
		if err := writeAddrFile(h, ln.Addr().String()); err != nil {
			os.Exit(14)
		}
		return srv
	}
	srv := serve()
	os.Stdout.WriteString("ready\n")
	deadline := time.After(60 * time.Second)
	for {
		select {
		case <-restarted:
			old := srv
			srv = serve() // as a restart onto the reloaded config's new port
			go old.Close()
		case <-sig:
			os.Exit(0)
		case <-deadline:
			os.Exit(12)
		}
	}
}

// closedPort returns a loopback port nothing listens on (now).
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// After gateway.port was edited in the config, status and restart talk to
// the running gateway at the address it recorded, not at the config's.
func TestStatusAndRestartUseTheRunningGatewaysAddress(t *testing.T) {
	dir := withHome(t)
	if code, _, errOut := run(t, "setup"); code != 0 {
		t.Fatalf("setup: %d %s", code, errOut)
	}
	cfgPath := filepath.Join(dir, "config.json5")
	data, err := os.ReadFile(cfgPath)
	if err != nil || !strings.Contains(string(data), "port: 7433,") {
		t.Fatalf("the template has no port: 7433 (%v)", err)
	}
	edited := strings.Replace(string(data), "port: 7433,", "port: "+strconv.Itoa(closedPort(t))+",", 1)
	if err := os.WriteFile(cfgPath, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestAddrGatewayHelper$")
	cmd.Env = append(os.Environ(), "BEIGE_TEST_ADDR_GATEWAY=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	addr, err := os.ReadFile(filepath.Join(dir, "gateway.addr"))
	if err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := run(t, "gateway", "status")
	if code != 0 || !strings.Contains(stdout, "API:     http://"+strings.TrimSpace(string(addr))+"\n") || !strings.Contains(stdout, "health:  ok") {
		t.Errorf("status: %d %q %q", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, "gateway", "restart", "--timeout", "10")
	if code != 0 || !strings.Contains(stdout, "gateway restarted") {
		t.Errorf("restart: %d %q %q", code, stdout, stderr)
	}
	moved, _ := os.ReadFile(filepath.Join(dir, "gateway.addr"))
	if string(moved) == string(addr) {
		t.Fatalf("the helper did not move on restart")
	}
	if code, stdout, _ := run(t, "gateway", "status"); code != 0 || !strings.Contains(stdout, "http://"+strings.TrimSpace(string(moved))) {
		t.Errorf("status after the restart moved the gateway: %d %q", code, stdout)
	}

	// The file of a gateway that no longer runs is not believed.
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if base, ok := (&app{}).runningBase(); ok {
		t.Errorf("runningBase = %q with no gateway running", base)
	}
}
