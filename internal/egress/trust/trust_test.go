package trust

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	file := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := file("ca.pem", "EGRESS CA\n")
	sys := file("system.crt", "SYSTEM ROOTS") // no final newline
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.pem")
	if err := os.Symlink(sys, link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name   string
		ca     string
		system []string
		want   string // "" means no bundle is written
	}{
		{"the image's bundle, then the CA", ca, []string{missing, sys}, "SYSTEM ROOTS\nEGRESS CA\n"},
		{"the first bundle found wins", ca, []string{sys, ca}, "SYSTEM ROOTS\nEGRESS CA\n"},
		{"a link to a bundle is followed", ca, []string{link}, "SYSTEM ROOTS\nEGRESS CA\n"},
		{"no bundle: the CA alone", ca, []string{missing}, "EGRESS CA\n"},
		{"a FIFO is skipped, not waited on", ca, []string{fifo, sys}, "SYSTEM ROOTS\nEGRESS CA\n"},
		{"a directory is skipped", ca, []string{dir}, "EGRESS CA\n"},
		{"no CA: nothing", missing, []string{sys}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "bundle.pem")
			wrote, err := Write(tc.ca, dst, tc.system)
			if err != nil {
				t.Fatal(err)
			}
			got, rerr := os.ReadFile(dst)
			if tc.want == "" {
				if wrote || rerr == nil {
					t.Fatalf("a bundle was written without a CA: %q", got)
				}
				return
			}
			if !wrote || string(got) != tc.want {
				t.Fatalf("bundle = %q (wrote %v, %v), want %q", got, wrote, rerr, tc.want)
			}
			if st, _ := os.Stat(dst); st.Mode().Perm() != 0o444 {
				t.Errorf("mode %v, want read-only", st.Mode())
			}
		})
	}
}
