package agent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/beige-dev/beige/internal/home"
)

// smallFS mounts a tmpfs of size at a temporary folder for the test.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillDisk writes path until the filesystem is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for range 1 << 16 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			for _, n := range []int{4096, 1} {
				for {
					if _, err := f.Write(buf[:n]); err != nil {
						break
					}
				}
			}
			return
		}
	}
	t.Fatal("the disk never filled")
}

// An agent filling the disk $BEIGE_HOME is on (its workspace shares it by
// default) must not stop the gateway writing sessions: the first write
// that finds the disk full releases the reserve and goes on.
func TestSessionsWrittenOnAFullDisk(t *testing.T) {
	mnt := smallFS(t, "8m")
	h := home.Home{Dir: filepath.Join(mnt, "beige")}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	r := home.OpenReserve(h, &home.ReserveOptions{Size: 1 << 20})
	defer r.Close()
	r.Refresh()
	e := newEnv(t, wireAnthropic)
	e.m.Close()
	e.dir = h.SessionsDir()
	e.m = e.newManager()
	e.prompt("before the disk filled")

	ws := h.Workspace(testAgent)
	os.MkdirAll(ws, 0o755)
	fillDisk(t, filepath.Join(ws, "dd.out"))

	// A new session (file + map) and the prompt's entries are written.
	if _, err := e.m.Prompt(t.Context(), testAgent, "telegram:9", strings.Repeat("long message ", 400), nil); err != nil {
		t.Fatalf("prompt on a full disk: %v", err)
	}
	e.restart()
	if all := e.promptKey("telegram:9", "still there?"); !strings.Contains(all, "long message") {
		t.Errorf("the session written on the full disk was lost: %q", all)
	}
	if !strings.Contains(r.Problem(), "disk full/low") {
		t.Errorf("Problem = %q", r.Problem())
	}
}
