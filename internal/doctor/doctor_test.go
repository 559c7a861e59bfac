package doctor

import (
	"path/filepath"
	"testing"

	"github.com/beige-dev/beige/internal/home"
)

// TestSensitiveMount: a mount is sensitive when its source is, lies under
// or contains a sensitive path, compared by path elements (not by string
// prefix).
func TestSensitiveMount(t *testing.T) {
	o := Options{UserHome: "/home/op", Home: home.Home{Dir: "/home/op/.beige"}}
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"/", true},
		{"/var/run/docker.sock", true},
		{"/var/run", true},
		{"/var/run/../run/docker.sock", true},
		{"/home/op/.ssh", true},
		{"/home/op/.ssh/id_ed25519", true},
		{"/home/op", true},
		{"/home", true},
		{"/home/op/.aws/credentials", true},
		{"/home/op/.beige/sockets", true},
		{"/home/op/.sshkeys-public", false},
		{"/home/op2/.ssh", false},
		{"/home/op/projects/x", false},
		{"/srv/data", false},
		{"/proc/self", true},
	} {
		if got := sensitiveMount(tc.src, o) != ""; got != tc.want {
			t.Errorf("sensitiveMount(%q) = %v, want %v", tc.src, got, tc.want)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a/../b", "/a", false},
		{"/", "/a", false},
		{filepath.Join("/a", "..", "a", "c"), "/a", true},
	} {
		if got := within(tc.path, tc.dir); got != tc.want {
			t.Errorf("within(%q, %q) = %v, want %v", tc.path, tc.dir, got, tc.want)
		}
	}
}

func TestWorst(t *testing.T) {
	if w := Worst(nil); w != Info {
		t.Errorf("Worst(nil) = %s", w)
	}
	if w := Worst([]Finding{{Severity: Info}, {Severity: Warning}}); w != Warning {
		t.Errorf("Worst = %s, want warning", w)
	}
	if w := Worst([]Finding{{Severity: Warning}, {Severity: Error}, {Severity: Info}}); w != Error {
		t.Errorf("Worst = %s, want error", w)
	}
}
