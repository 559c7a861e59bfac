// Package atomicfile replaces files whole: readers (and a gateway killed
// half-way) see the old content or the new, never a mix.
package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the names of the temporary files Write makes beside
// the file it replaces, so that folder scans can skip leftovers.
const TempPrefix = ".beige-tmp-"

// Write replaces path with data and mode perm: a temporary file in the same
// folder, synced, renamed over path; then the folder is synced (best
// effort). The folder must exist.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteIfChanged is Write, skipped when path is already a regular file
// holding exactly data with mode perm (so that its modification time, and
// whatever watches it, stay quiet).
func WriteIfChanged(path string, data []byte, perm os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == perm {
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			return nil
		}
	}
	return Write(path, data, perm)
}

// IsTemp reports whether name is a temporary file of Write.
func IsTemp(name string) bool { return strings.HasPrefix(filepath.Base(name), TempPrefix) }
