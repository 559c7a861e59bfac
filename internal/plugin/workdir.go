package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutsideWorkspace is wrapped by ResolveDir's errors for a folder that
// leads out of the workspace.
var ErrOutsideWorkspace = errors.New("outside the workspace")

// ResolveDir returns the host folder for cwd, a path relative to the
// sandbox's /workspace as the tool client sends it ("" or "." for
// /workspace itself), and the workspace's own resolved path. Symbolic links
// are resolved; cwd must not leave the workspace, lexically ("..") or
// through a link. The folder must exist.
func ResolveDir(workspace, cwd string) (dir, root string, err error) {
	root, err = filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", "", fmt.Errorf("workspace %s: %w", workspace, unwrapPathErr(err))
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", "", err
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("workspace %s is not a folder", workspace)
	}
	if cwd == "" {
		return root, root, nil
	}
	if strings.IndexByte(cwd, 0) >= 0 {
		return "", "", errors.New("cwd contains a NUL byte")
	}
	if filepath.IsAbs(cwd) {
		return "", "", fmt.Errorf("cwd %q: want a path relative to /workspace", cwd)
	}
	clean := filepath.Clean(cwd)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", "", fmt.Errorf("cwd %q: %w", cwd, ErrOutsideWorkspace)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, clean))
	if err != nil {
		return "", "", fmt.Errorf("cwd /workspace/%s: %w", clean, unwrapPathErr(err))
	}
	if !Within(root, real) {
		return "", "", fmt.Errorf("cwd /workspace/%s: %w (through a symbolic link)", clean, ErrOutsideWorkspace)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", "", fmt.Errorf("cwd /workspace/%s: %w", clean, unwrapPathErr(err))
	}
	if !fi.IsDir() {
		return "", "", fmt.Errorf("cwd /workspace/%s is not a folder", clean)
	}
	return real, root, nil
}

// Within reports whether path is root or inside it; both must be clean,
// absolute paths.
func Within(root, path string) bool {
	if path == root {
		return true
	}
	if root == "/" {
		return strings.HasPrefix(path, "/")
	}
	return strings.HasPrefix(path, root+string(filepath.Separator))
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
