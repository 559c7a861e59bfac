//go:build !linux

package plugin

import (
	"fmt"
	"os"
)

// OpenDir opens dir, which must be inside root. Without openat this
// platform cannot open it beneath root without following links.
func OpenDir(root, dir string) (*os.File, error) {
	if !Within(root, dir) {
		return nil, fmt.Errorf("folder %s: %w", dir, ErrOutsideWorkspace)
	}
	return os.Open(dir)
}

func dirOf(f *os.File) string { return f.Name() }
