//go:build unix

package install

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lock serializes plugin commands of one $BEIGE_HOME: each reads, edits
// and writes the config, and two at once would lose one's edit. It waits
// for the other to finish.
func (in *Installer) lock() (unlock func(), err error) {
	if err := os.MkdirAll(in.pluginsDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", in.pluginsDir(), err)
	}
	f, err := os.OpenFile(filepath.Join(in.pluginsDir(), ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock plugins: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock plugins: %w", err)
	}
	return func() { f.Close() }, nil
}
