package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/logfile"
)

// TestMain lets the test binary stand in for beige: a background start
// runs os.Executable() (this binary) as the daemon.
func TestMain(m *testing.M) {
	switch os.Getenv("BEIGE_CLI_TEST_AS") {
	case "beige":
		os.Exit(Run(os.Args[1:]))
	case "panicking-daemon":
		panickingDaemon(os.Getenv("BEIGE_CLI_TEST_LOG"))
	}
	os.Exit(m.Run())
}

// panickingDaemon logs through daemonLog until its log rotates, then
// panics, as a daemon's goroutine might.
func panickingDaemon(path string) {
	f, err := logfile.Open(path, &logfile.Options{MaxSizeBytes: 4096})
	if err != nil {
		panic(err)
	}
	d := &daemonLog{File: f}
	d.follow()
	for i := range 200 {
		fmt.Fprintf(d, "line %d of the log, long enough to fill it up soon\n", i)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		panic("boom in a goroutine")
	}()
	<-done
	select {}
}

// TestDaemonErrorGoesToGatewayLog: a background gateway that fails before
// its logger is set up (here: on its --log-level, which only the daemon
// reads) says why in gateway.log, and `gateway start` prints it from there.
func TestDaemonErrorGoesToGatewayLog(t *testing.T) {
	dir := withHome(t)
	if code, _, errOut := run(t, "setup"); code != 0 {
		t.Fatalf("setup: %d %s", code, errOut)
	}
	t.Setenv("ANTHROPIC_API_KEY", "k")
	t.Setenv("BEIGE_CLI_TEST_AS", "beige")
	code, _, errOut := run(t, "gateway", "start", "--timeout", "20", "--log-level", "loud")
	if code != ExitFailure || !strings.Contains(errOut, "--log-level") {
		t.Errorf("gateway start: %d %q", code, errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, "logs", "gateway.log"))
	if err != nil || !strings.Contains(string(data), "--log-level") {
		t.Errorf("gateway.log does not say why the daemon exited: %q %v", data, err)
	}
}

// TestDaemonPanicGoesToCurrentLog: a daemon's panic lands in gateway.log,
// the current file, after the log was rotated.
func TestDaemonPanicGoesToCurrentLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.log")
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull // as a daemon's
	cmd.Env = append(os.Environ(), "BEIGE_CLI_TEST_AS=panicking-daemon", "BEIGE_CLI_TEST_LOG="+path)
	if err := cmd.Run(); err == nil {
		t.Fatal("the daemon did not fail")
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatalf("the log did not rotate: %v", err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "panic: boom in a goroutine") || !strings.Contains(string(data), "goroutine ") {
		t.Errorf("the panic is not in the current gateway.log:\n%s", data)
	}
}
