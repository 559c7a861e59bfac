package toolbridge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LinkSocket makes link a symbolic link to target, replacing an older link
// atomically: the documented $BEIGE_HOME/sockets/<agent>.sock pointing at
// the socket that is really served, $BEIGE_HOME/sockets/<agent>/gateway.sock
// (home.SocketLink and home.Socket). A relative target is kept relative. A
// file at link that is not a symbolic link (a socket from an older layout,
// for one) is replaced only if it is a socket; anything else is an error.
func LinkSocket(link, target string) error {
	if fi, err := os.Lstat(link); err == nil {
		switch fi.Mode().Type() {
		case fs.ModeSymlink:
			if cur, err := os.Readlink(link); err == nil && cur == target {
				return nil
			}
		case fs.ModeSocket:
		default:
			return fmt.Errorf("toolbridge: %s exists and is not a link or a socket", link)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("toolbridge: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(link), ".beige-link-"+filepath.Base(link))
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("toolbridge: link socket: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("toolbridge: link socket: %w", err)
	}
	return nil
}
