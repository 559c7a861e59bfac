package home

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// SmallFS mounts a tmpfs of size (e.g. "8m") at a temporary folder for the
// test, and unmounts it at the end. It skips when the test is not root.
func SmallFS(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// FillDisk writes path until the filesystem is full, as a `dd` of an agent
// in its workspace would.
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i)
	}
	for range 1 << 16 { // bounded: 4 GiB at most
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			// Fill the last partial block too.
			for _, n := range []int{4096, 512, 1} {
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

func TestReserveKeepsRoomForTheGateway(t *testing.T) {
	mnt := SmallFS(t, "8m")
	h := Home{Dir: filepath.Join(mnt, "beige")}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	r := OpenReserve(h, &ReserveOptions{Size: 2 << 20, LowBytes: 1 << 20})
	defer r.Close()
	// Opening writes nothing (a start is not slowed) and is not a problem.
	if _, err := os.Stat(h.DiskReserve()); err == nil || r.Problem() != "" {
		t.Errorf("after open: reserve file %v, problem %q", err, r.Problem())
	}
	if !r.Refresh() {
		t.Fatal("reserve not made")
	}
	st, err := os.Stat(h.DiskReserve())
	if err != nil || st.Size() != 2<<20 || st.Sys().(*syscall.Stat_t).Blocks*512 < 2<<20 {
		t.Fatalf("reserve file: %v, %v (want 2 MiB of real blocks)", st, err)
	}
	if p := r.Problem(); p != "" {
		t.Errorf("healthy disk reported: %q", p)
	}

	// An agent fills the disk from its workspace.
	ws := h.Workspace("a")
	os.MkdirAll(ws, 0o755)
	FillDisk(t, filepath.Join(ws, "fill"))

	// The gateway's next write fails, releases the reserve, and goes on.
	state := filepath.Join(h.SessionsDir(), "state")
	err = os.WriteFile(state, make([]byte, 256<<10), 0o600)
	if !IsDiskFull(err) {
		t.Fatalf("write on a full disk: %v", err)
	}
	if !ReleaseOnFull(err) {
		t.Fatal("ReleaseOnFull freed nothing")
	}
	if err := os.WriteFile(state, make([]byte, 256<<10), 0o600); err != nil {
		t.Fatalf("write after the reserve was released: %v", err)
	}
	if ReleaseOnFull(err) || ReleaseOnFull(errors.New("other")) {
		t.Error("ReleaseOnFull freed something twice")
	}
	p := r.Problem()
	if !strings.HasPrefix(p, "disk full/low: ") || !strings.HasSuffix(p, " MB free on "+mnt) {
		t.Errorf("Problem = %q", p)
	}
	if r.Refresh() {
		t.Error("reserve made again on a full disk")
	}

	// Space comes back: the reserve is made again, health is clean.
	os.Remove(filepath.Join(ws, "fill"))
	if !r.Refresh() {
		t.Fatal("reserve not made again")
	}
	if st, err := os.Stat(h.DiskReserve()); err != nil || st.Size() != 2<<20 {
		t.Errorf("reserve after refresh: %v %v", st, err)
	}
	if p := r.Problem(); p != "" {
		t.Errorf("Problem after refresh = %q", p)
	}
}

// A reserve left by the last run is there to release at the next start,
// even when the disk filled while no gateway ran.
func TestReserveSurvivesRestart(t *testing.T) {
	mnt := SmallFS(t, "8m")
	h := Home{Dir: filepath.Join(mnt, "beige")}
	h.Setup()
	last := OpenReserve(h, &ReserveOptions{Size: 2 << 20})
	last.Refresh()
	last.Close()
	FillDisk(t, filepath.Join(mnt, "fill"))
	r := OpenReserve(h, &ReserveOptions{Size: 2 << 20})
	defer r.Close()
	err := os.WriteFile(h.PIDFile(), []byte("123\n"), 0o600)
	if err == nil {
		// tmpfs may still have a page for a tiny file; make it fail for real.
		err = os.WriteFile(h.PIDFile(), make([]byte, 1<<20), 0o600)
	}
	if !ReleaseOnFull(err) {
		t.Fatalf("nothing to release (err %v)", err)
	}
	if err := os.WriteFile(h.PIDFile(), []byte("123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
