package home

import (
	"os"
	"path/filepath"
	"testing"
)

// $BEIGE_HOME and the folders holding workspaces, sessions, logs and sockets
// are closed to other local users, at setup and, for a home made by an
// older beige (0755), at every start.
func TestPrivateFolders(t *testing.T) {
	h := Home{Dir: filepath.Join(t.TempDir(), "home")}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, p := range []string{h.Dir, h.path("agents"), h.SocketsDir(), h.LogsDir(), h.DataDir(), h.SessionsDir()} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %s is %v (%v), want 0700", when, p, fi.Mode().Perm(), err)
			}
		}
	}
	check("after setup")

	// An older home: open to all.
	for _, p := range []string{h.Dir, h.path("agents"), h.SessionsDir()} {
		os.Chmod(p, 0o755)
	}
	fixed, err := h.Secure()
	if err != nil {
		t.Fatal(err)
	}
	if len(fixed) != 3 {
		t.Errorf("Secure fixed %q, want the 3 opened folders", fixed)
	}
	check("after Secure")
	if fixed, _ := h.Secure(); len(fixed) != 0 {
		t.Errorf("second Secure fixed %q", fixed)
	}

	// A link planted below the home is not followed.
	other := filepath.Join(t.TempDir(), "other")
	os.Mkdir(other, 0o755)
	os.Remove(h.DataDir())
	os.Symlink(other, h.DataDir())
	if _, err := h.Secure(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(other); fi.Mode().Perm() != 0o755 {
		t.Errorf("Secure followed a link: %v", fi.Mode().Perm())
	}
}
