//go:build !unix

package agent

import (
	"fmt"
	"os"
)

// openRegular opens path for reading if it is a regular file and not a
// symbolic link.
func openRegular(path string) (*os.File, error) {
	lfi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !lfi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !os.SameFile(lfi, fi) {
		f.Close()
		return nil, fmt.Errorf("%s: changed while being opened", path)
	}
	return f, nil
}
