package toolbridge

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestLinkSocket(t *testing.T) {
	dir := socketDir(t)
	os.Mkdir(filepath.Join(dir, "travel"), 0o700)
	link := filepath.Join(dir, "travel.sock")
	target := filepath.Join("travel", "gateway.sock")
	for range 2 {
		if err := LinkSocket(link, target); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.Readlink(link); got != target {
			t.Fatalf("link -> %q", got)
		}
	}
	s, err := Listen(filepath.Join(dir, target), "travel", echo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("unix", link)
	if err != nil {
		t.Fatalf("dial through the link: %v", err)
	}
	c.Close()

	if err := LinkSocket(link, "other"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(link); got != "other" {
		t.Errorf("link not replaced: %q", got)
	}
	os.Remove(link)
	os.WriteFile(link, nil, 0o600)
	if err := LinkSocket(link, target); err == nil {
		t.Error("a regular file was replaced")
	}
}
