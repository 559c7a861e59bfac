package nodehost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MinNodeMajor is the oldest Node.js the plugin host runs on: 22 has the
// permission model (--permission) and strips TypeScript types itself.
const MinNodeMajor = 22

// NodeEnv names a Node.js binary to use when plugins.<p>.node is not set;
// without either, `node` is looked up in PATH.
const NodeEnv = "BEIGE_NODE"

// Node is a Node.js binary that passed the version check.
type Node struct {
	Path                string
	Major, Minor, Patch int
}

// needsStripFlag reports whether TypeScript type stripping must be turned
// on with a flag (it is on by default from 22.18).
func (n Node) needsStripFlag() bool { return n.Major == 22 && n.Minor < 18 }

// proxiesFetch reports whether NODE_USE_ENV_PROXY routes fetch through
// HTTP(S)_PROXY: from 22.21 and 24.0 (not 23). The global agents of
// node:http/https follow from 22.21 and 24.5; host.mjs covers the others.
func (n Node) proxiesFetch() bool { return n.Major >= 24 || n.Major == 22 && n.Minor >= 21 }

// FindNode returns the Node.js to run a plugin with: override
// (plugins.<p>.node) when set, else $BEIGE_NODE, else `node` in PATH. Its
// version must be at least MinNodeMajor.
//
// Its errors say what was found; needNode says what to do.
func FindNode(ctx context.Context, override string) (Node, error) {
	cand := override
	if cand == "" {
		cand = os.Getenv(NodeEnv)
	}
	if cand == "" {
		p, err := exec.LookPath("node")
		if err != nil {
			return Node{}, errors.New("no node in PATH")
		}
		cand = p
	}
	if !filepath.IsAbs(cand) {
		p, err := exec.LookPath(cand)
		if err != nil {
			return Node{}, fmt.Errorf("node %q not found", cand)
		}
		cand = p
	}
	if _, err := os.Stat(cand); err != nil {
		return Node{}, fmt.Errorf("node %q not found", cand)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cand, "--version")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return Node{}, fmt.Errorf("run %s --version: %w", cand, err)
	}
	n, err := parseVersion(strings.TrimSpace(string(out)))
	if err != nil {
		return Node{}, fmt.Errorf("%s: %w", cand, err)
	}
	n.Path = cand
	if n.Major < MinNodeMajor {
		return Node{}, fmt.Errorf("%s is Node.js %d.%d.%d", cand, n.Major, n.Minor, n.Patch)
	}
	return n, nil
}

// needNode is an error of FindNode for plugin name: what it needs, what
// was found, and what to do (config validation says the same).
func needNode(name string, err error) error {
	return fmt.Errorf("plugin %q is a TypeScript/JavaScript plugin and needs Node.js %d or later: %w (install it, or set plugins.%s.node to its path)", name, MinNodeMajor, err, name)
}

func parseVersion(s string) (Node, error) {
	v, ok := strings.CutPrefix(s, "v")
	parts := strings.Split(v, ".")
	if !ok || len(parts) != 3 {
		return Node{}, fmt.Errorf("unexpected version %q", s)
	}
	var nums [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Node{}, fmt.Errorf("unexpected version %q", s)
		}
		nums[i] = n
	}
	return Node{Major: nums[0], Minor: nums[1], Patch: nums[2]}, nil
}

var errNoEntry = errors.New("no index.ts or index.js")

// Entry returns the plugin's entry file in dir: index.ts, else index.js.
// It must be a regular file (not a link).
func Entry(dir string) (string, error) {
	for _, n := range []string{"index.ts", "index.js"} {
		p := filepath.Join(dir, n)
		fi, err := os.Lstat(p)
		if err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", errNoEntry
}
