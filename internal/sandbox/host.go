package sandbox

import (
	"fmt"
	"io/fs"
	"os"
)

// Modes of the host folders a runtime makes for a sandbox (the workspace)
// and the gateway makes for its socket.
const (
	// WorkspaceMode: only the owner (the agent's user, or the gateway's
	// user) may enter the workspace, so that a setuid file an agent made
	// there is of no use to any other local user.
	WorkspaceMode = fs.FileMode(0o700)
	// SocketDirMode: the agent's user must reach gateway.sock and the
	// mounted binaries through /beige. Other host users are kept out by the
	// parent folder ($BEIGE_HOME/sockets, mode 0700).
	SocketDirMode = fs.FileMode(0o755)
)

// PrepareSocket lets the agent's user (Spec.User, "" = DefaultUser())
// connect to the gateway's socket at path, which the gateway has just
// listened on: when the gateway is root the socket is given to that user
// (its mode, 0600, stays); when the gateway is not root and the user is
// another, the socket is made 0666. Other host users are kept out by the
// socket folder's parent ($BEIGE_HOME/sockets, 0700) either way.
func PrepareSocket(path, user string) error {
	uid, gid, err := ParseUser(user)
	if err != nil {
		return fmt.Errorf("prepare socket %s: %w", path, err)
	}
	switch euid := os.Geteuid(); {
	case euid == 0:
		err = os.Lchown(path, uid, gid)
	case uid != euid && uid != 0:
		err = os.Chmod(path, 0o666)
	}
	if err != nil {
		return fmt.Errorf("prepare socket %s for user %d:%d: %w", path, uid, gid, err)
	}
	return nil
}
