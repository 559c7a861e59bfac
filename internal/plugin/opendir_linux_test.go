package plugin

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// testOpenDirFallback opens dir as a kernel without openat2 would, and
// reports whether that worked (and opened dir itself).
func testOpenDirFallback(t *testing.T, root, dir string) bool {
	t.Helper()
	saved := openat2
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	defer func() { openat2 = saved }()
	f, err := OpenDir(root, dir)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, _ := f.Stat()
	want, _ := os.Stat(dir)
	return os.SameFile(fi, want)
}

func needOpenBeneath(t *testing.T) {}
