//go:build !linux

package plugin

import "testing"

func testOpenDirFallback(t *testing.T, root, dir string) bool {
	f, err := OpenDir(root, dir)
	if err == nil {
		f.Close()
	}
	return err == nil
}

func needOpenBeneath(t *testing.T) {
	t.Skip("OpenDir cannot open beneath a folder without following links on this platform")
}
