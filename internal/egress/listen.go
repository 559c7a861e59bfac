package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// SocketName is the file name of the agent's egress socket in its socket
// folder ($BEIGE_HOME/sockets/<agent>/, mounted read-only at /beige).
const SocketName = "egress.sock"

// Listen listens on the Unix socket at path, whose folder must exist,
// belong to the gateway's user and be writable by nobody else (the agent's
// socket folder, mode 0700). A stale socket left by an earlier gateway is
// replaced; any other file there is an error. The socket gets mode 0600: the
// forwarder in the sandbox runs as the container's root.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("egress: socket folder: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("egress: socket folder %s is not a folder", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("egress: socket folder %s belongs to uid %d, not to the gateway's user (%d)", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("egress: socket folder %s is writable by others (mode %#o)", dir, fi.Mode().Perm())
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("egress: %s exists and is not a socket (%v)", path, fi.Mode().Type())
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("egress: remove stale socket: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("egress: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("egress: listen %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // a restarted gateway may have replaced it already
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("egress: chmod %s: %w", path, err)
	}
	return ln, nil
}
