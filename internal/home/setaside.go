package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

// maxSetAside bounds the <name>.bad.<n> names tried.
const maxSetAside = 1000

// SetAside moves a corrupt state file out of the way, to <path>.bad or, when
// that exists, the first free <path>.bad.<n>, so that a new file can be
// written at path without losing the old one. It never overwrites a file
// (the move is a hard link, which fails on an existing name, then an
// unlink), and returns the name the file now has.
func SetAside(path string) (string, error) {
	for n := 0; n < maxSetAside; n++ {
		bad := path + ".bad"
		if n > 0 {
			bad += "." + strconv.Itoa(n)
		}
		err := os.Link(path, bad)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("set aside %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return "", fmt.Errorf("set aside %s: %w", path, err)
		}
		return bad, nil
	}
	return "", fmt.Errorf("set aside %s: %d copies already kept", path, maxSetAside)
}

// KeepCopy writes data to <path>.bad (or the first free <path>.bad.<n>), for
// bytes cut from a state file that is repaired in place. It returns the
// name written.
func KeepCopy(path string, data []byte) (string, error) {
	for n := 0; n < maxSetAside; n++ {
		bad := path + ".bad"
		if n > 0 {
			bad += "." + strconv.Itoa(n)
		}
		f, err := os.OpenFile(bad, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("keep a copy of %s: %w", path, err)
		}
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(bad)
			return "", fmt.Errorf("keep a copy of %s: %w", path, werr)
		}
		return bad, nil
	}
	return "", fmt.Errorf("keep a copy of %s: %d copies already kept", path, maxSetAside)
}
