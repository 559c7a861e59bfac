package memsandbox

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/beige-dev/beige/internal/sandbox"
)

// errPermission is what writing outside the writable folders gives, as
// the agent's (non-root) user gets EACCES or EROFS there in Docker.
var errPermission = errors.New("permission denied")

// Errors of the interpreter's file commands (see fsMessage).
var (
	errNotEmpty = errors.New("directory not empty") // rm of a folder with entries, without -r
	errNotDir   = errors.New("not a directory")
	errExists   = errors.New("file exists")
)

// baseDirs exist in every sandbox.
var baseDirs = []string{"/", sandbox.WorkspacePath, sandbox.TmpPath, sandbox.HomePath, "/home", "/tools", sandbox.ToolsBinPath,
	sandbox.PackagesPath, sandbox.SkillsPath, sandbox.BeigeDir}

// writableDirs are where the agent's user may create files: the
// workspace and the tmpfs folders; the mounts and the image are not its.
var writableDirs = []string{sandbox.WorkspacePath, sandbox.TmpPath, sandbox.HomePath}

type node struct {
	dir  bool
	data []byte
}

// tree is a file system: clean absolute paths to nodes. Not safe for
// concurrent use (the sandbox's mutex guards it).
type tree struct{ nodes map[string]*node }

func newTree() *tree {
	t := &tree{nodes: map[string]*node{}}
	for _, d := range baseDirs {
		t.nodes[d] = &node{dir: true}
	}
	return t
}

func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func writable(p string) bool {
	for _, d := range writableDirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

// lookup returns the node at p, or the error a walk to it meets: a
// missing entry or a file where a folder should be is ErrNotExist (the
// helper maps ENOTDIR so too).
func (t *tree) lookup(p string) (*node, error) {
	if n := t.nodes[p]; n != nil {
		return n, nil
	}
	for d := path.Dir(p); ; d = path.Dir(d) {
		if n := t.nodes[d]; n != nil && !n.dir {
			return nil, fmt.Errorf("%s: not a directory: %w", d, sandbox.ErrNotExist)
		}
		if d == "/" {
			break
		}
	}
	return nil, sandbox.ErrNotExist
}

// read returns at most max bytes of the file at p (all when max < 0) and
// its size.
func (t *tree) read(p string, max int64) ([]byte, int64, error) {
	n, err := t.lookup(p)
	if err != nil {
		return nil, 0, err
	}
	if n.dir {
		return nil, 0, sandbox.ErrIsDir
	}
	size := int64(len(n.data))
	if max < 0 || max > size {
		max = size
	}
	return slices.Clone(n.data[:max]), size, nil
}

// write replaces (or, with appendTo, extends) the file at p, creating its
// parent folders when mkParents. check refuses paths outside the writable
// folders.
func (t *tree) put(p string, data []byte, check, mkParents, appendTo bool) error {
	if check && !writable(p) {
		return errPermission
	}
	if n := t.nodes[p]; n != nil {
		if n.dir {
			return sandbox.ErrIsDir
		}
		if appendTo {
			n.data = append(n.data, data...)
		} else {
			n.data = slices.Clone(data)
		}
		return nil
	}
	dir := path.Dir(p)
	if n, err := t.lookup(dir); err != nil {
		if !mkParents || !errors.Is(err, sandbox.ErrNotExist) || t.hasFileAbove(dir) {
			return err
		}
		if err := t.mkdirAll(dir, check); err != nil {
			return err
		}
	} else if !n.dir {
		return fmt.Errorf("%s: not a directory: %w", dir, sandbox.ErrNotExist)
	}
	t.nodes[p] = &node{data: slices.Clone(data)}
	return nil
}

func (t *tree) write(p string, data []byte, check bool) error {
	return t.put(p, data, check, true, false)
}

// hasFileAbove reports whether p or a folder above it is a file.
func (t *tree) hasFileAbove(p string) bool {
	for d := p; ; d = path.Dir(d) {
		if n := t.nodes[d]; n != nil && !n.dir {
			return true
		}
		if d == "/" {
			return false
		}
	}
}

func (t *tree) mkdirAll(p string, check bool) error {
	if t.hasFileAbove(p) {
		return fmt.Errorf("mkdir %s: not a directory: %w", p, sandbox.ErrNotExist)
	}
	var missing []string
	for d := p; t.nodes[d] == nil; d = path.Dir(d) {
		missing = append(missing, d)
	}
	for _, d := range missing {
		if check && !writable(d) {
			return errPermission
		}
	}
	for _, d := range missing {
		t.nodes[d] = &node{dir: true}
	}
	return nil
}

// list returns the names in folder p, sorted.
func (t *tree) list(p string) ([]string, error) {
	n, err := t.lookup(p)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return []string{path.Base(p)}, nil
	}
	var names []string
	for q := range t.nodes {
		if q != p && path.Dir(q) == p {
			names = append(names, path.Base(q))
		}
	}
	slices.Sort(names)
	return names, nil
}

// remove deletes p (with everything below it when recursive).
func (t *tree) remove(p string, recursive bool) error {
	n, err := t.lookup(p)
	if err != nil {
		return err
	}
	if !writable(p) || slices.Contains(baseDirs, p) {
		return errPermission
	}
	if n.dir {
		below := t.below(p)
		if len(below) > 0 && !recursive {
			return errNotEmpty
		}
		for _, q := range below {
			delete(t.nodes, q)
		}
	}
	delete(t.nodes, p)
	return nil
}

// below returns the paths strictly under folder p.
func (t *tree) below(p string) []string {
	var out []string
	for q := range t.nodes {
		if q != p && under(q, p) {
			out = append(out, q)
		}
	}
	return out
}

// reset empties folder p (a tmpfs at a restart).
func (t *tree) reset(p string) {
	for _, q := range t.below(p) {
		delete(t.nodes, q)
	}
	t.nodes[p] = &node{dir: true}
}

// keepOnly returns a new tree with the base folders and what is under p.
func (t *tree) keepOnly(p string) *tree {
	nt := newTree()
	for _, q := range t.below(p) {
		n := t.nodes[q]
		nt.nodes[q] = &node{dir: n.dir, data: slices.Clone(n.data)}
	}
	return nt
}
