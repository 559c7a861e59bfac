//go:build linux

package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenDir opens dir, a folder inside root as ResolveDir returns it (clean,
// absolute, no symbolic links), beneath root without following any link,
// and returns it as an open folder. Everything inside root belongs to the
// agent, which may have swapped a folder of the path for a link after
// ResolveDir looked: that is refused here instead of followed, and the
// returned folder is the one the checks ran on whatever happens to the path
// afterwards. Run a program in it with Command.DirFile. The part of the
// path up to root is the host's and is opened normally.
func OpenDir(root, dir string) (*os.File, error) {
	if !filepath.IsAbs(root) || !Within(root, dir) {
		return nil, fmt.Errorf("folder %s: %w", dir, ErrOutsideWorkspace)
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("folder %s: %w", dir, ErrOutsideWorkspace)
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", root, err)
	}
	if rel == "." {
		return os.NewFile(uintptr(rootFD), root), nil
	}
	defer unix.Close(rootFD)
	fd, err := openBeneath(rootFD, rel)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("folder /workspace/%s: %w (a part of it is a symbolic link or not a folder)", rel, ErrOutsideWorkspace)
		}
		return nil, fmt.Errorf("open folder /workspace/%s: %w", rel, err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// openBeneath opens rel (relative, clean) beneath the folder rootFD: with
// openat2 where the kernel has it (Linux 5.6; a seccomp filter may deny it
// with ENOSYS or EPERM), else one component at a
// time, each opened relative to the previous one without following links.
func openBeneath(rootFD int, rel string) (int, error) {
	fd, err := openat2(rootFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
		return fd, err
	}
	cur := rootFD
	for _, name := range strings.Split(rel, "/") {
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			closeUnless(cur, rootFD)
			return -1, unix.EXDEV
		}
		next, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		closeUnless(cur, rootFD)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	if cur == rootFD {
		return unix.Dup(rootFD)
	}
	return cur, nil
}

// openat2 is unix.Openat2; tests replace it to try the fallback.
var openat2 = unix.Openat2

func closeUnless(fd, keep int) {
	if fd != keep {
		unix.Close(fd)
	}
}

// dirOf returns the path a child process can chdir to so that it starts in
// f itself, not in whatever f's path names by then: the magic link
// /proc/self/fd/N. The child resolves it after fork and before exec, while
// it still holds the parent's descriptors under the parent's numbers (Go's
// forkExec changes folder before it moves descriptors).
func dirOf(f *os.File) string {
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd())
}
