package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBuildImageProgressOnTerminal: on a terminal the build shows the
// engine's progress as bars redrawn in place, as the docker CLI does; the
// plain lines above are for anything else.
func TestBuildImageProgressOnTerminal(t *testing.T) {
	ptmx, tty := openPTY(t, 120)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644)
	f := newFakeAPI()
	f.buildBody = `{"status":"Downloading","progressDetail":{"current":10,"total":100},"id":"abc"}
{"status":"Downloading","progressDetail":{"current":60,"total":100},"id":"abc"}
{"stream":"Successfully built x\n"}
`
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(ptmx); got <- string(b) }()
	if err := newDocker(f, Options{}).BuildImage(context.Background(), dir, "x:1", tty); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	out := <-got
	for _, want := range []string{"abc: Downloading [=====>", "abc: Downloading [==============================>", "10B/100B", "60B/100B", "\x1b[2K", "Successfully built x"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output %q lacks %q", out, want)
		}
	}
}

// openPTY opens a pseudo-terminal of the given width: the master to read
// and the terminal end to write to.
func openPTY(t *testing.T, width uint16) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the terminal end: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: width}); err != nil {
		t.Fatalf("set the window size: %v", err)
	}
	return ptmx, tty
}
