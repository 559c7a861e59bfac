package install

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Limits bound what one source may unpack or copy.
type Limits struct {
	MaxFiles int   // files, folders and links
	MaxBytes int64 // total size of the files
}

// DefaultLimits: the largest real plugin packages are a few MiB.
var DefaultLimits = Limits{MaxFiles: 20000, MaxBytes: 512 << 20}

type budget struct {
	Limits
	files int
	bytes int64
}

func (b *budget) addFile(name string) error {
	b.files++
	if b.files > b.MaxFiles {
		return fmt.Errorf("more than %d files (at %s)", b.MaxFiles, name)
	}
	return nil
}

// copyN copies src to dst counting against the byte budget.
func (b *budget) copyN(dst io.Writer, src io.Reader, name string) error {
	n, err := io.Copy(dst, io.LimitReader(src, b.MaxBytes-b.bytes+1))
	b.bytes += n
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if b.bytes > b.MaxBytes {
		return fmt.Errorf("more than %d bytes in total (at %s)", b.MaxBytes, name)
	}
	return nil
}

// cleanRel checks an archive or tree member name and returns it cleaned:
// relative, without "..", not empty.
func cleanRel(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return "", fmt.Errorf("refused path %q", name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", fmt.Errorf("refused path %q: it climbs out (..)", name)
		}
	}
	c := path.Clean(name)
	if c == "." {
		return "", nil
	}
	return c, nil
}

// linkStaysInside says whether a symlink at rel (a clean relative path in
// a tree whose folders are real folders) with this target resolves inside
// the tree: the target is relative, its ".." come only first and are no
// more than rel's depth (every later part only descends, and every link
// met on the way is checked the same).
func linkStaysInside(rel, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return false
	}
	depth := strings.Count(rel, "/") // folders above the link
	up, descended := 0, false
	for _, seg := range strings.Split(target, "/") {
		switch seg {
		case "", ".":
		case "..":
			if descended {
				return false
			}
			up++
		default:
			descended = true
		}
	}
	return up <= depth
}

// extractTarGz unpacks a gzipped tar into dst. It refuses absolute paths,
// "..", device files and fifos, links that point out, duplicate entries,
// and more than the limits. Symlinks are made last, so that nothing is
// ever written through one; hardlinks become copies.
func extractTarGz(r io.Reader, dst *os.Root, lim Limits) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("not a gzip file: %w", err)
	}
	tr := tar.NewReader(gz)
	b := &budget{Limits: lim}
	seen := map[string]bool{}
	type link struct{ name, target string }
	var links []link
	symlinks := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := cleanRel(h.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue // the archive's own "./"
		}
		if err := b.addFile(name); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeDir && seen[name] {
			return fmt.Errorf("refused %q: it appears twice in the archive", name)
		}
		seen[name] = true
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if symlinks[p] {
				return fmt.Errorf("refused %q: it is inside the symlink %q", name, p)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := dst.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
		case tar.TypeReg: // the reader gives old TypeRegA entries as TypeReg
			if err := writeFile(dst, name, h.FileInfo().Mode(), tr, b); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := cleanRel(h.Linkname)
			if err != nil || target == "" {
				return fmt.Errorf("refused hardlink %q -> %q: it points out", name, h.Linkname)
			}
			fi, err := dst.Lstat(target)
			if err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("refused hardlink %q -> %q: not a file extracted before it", name, h.Linkname)
			}
			f, err := dst.Open(target)
			if err != nil {
				return fmt.Errorf("hardlink %s: %w", name, err)
			}
			err = writeFile(dst, name, fi.Mode(), f, b)
			f.Close()
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if !linkStaysInside(name, h.Linkname) {
				return fmt.Errorf("refused symlink %q -> %q: it points out of the package", name, h.Linkname)
			}
			symlinks[name] = true
			links = append(links, link{name, h.Linkname})
		default:
			return fmt.Errorf("refused %q: a %s is not a file, folder or link", name, tarType(h.Typeflag))
		}
	}
	for _, l := range links {
		if err := mkParent(dst, l.name); err != nil {
			return err
		}
		if err := dst.Symlink(l.target, l.name); err != nil {
			return fmt.Errorf("create symlink %s: %w", l.name, err)
		}
	}
	return nil
}

func tarType(t byte) string {
	switch t {
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "fifo"
	}
	return fmt.Sprintf("tar entry of type %q", t)
}

func mkParent(dst *os.Root, name string) error {
	if d := path.Dir(name); d != "." {
		if err := dst.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// writeFile creates name (which must not exist) with r's content: mode
// 0644, or 0755 when any execute bit was set.
func writeFile(dst *os.Root, name string, mode fs.FileMode, r io.Reader, b *budget) error {
	if err := mkParent(dst, name); err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := b.copyN(f, r, name); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// skipCopy are folders copyTree leaves out: git's own, and node_modules,
// which npm makes again from package.json.
var skipCopy = map[string]bool{".git": true, "node_modules": true}

// copyTree copies the folder dir of src into dst (an empty folder): files,
// folders and symlinks that stay inside dir; it refuses anything else.
func copyTree(src *os.Root, dir string, dst *os.Root, lim Limits) error {
	b := &budget{Limits: lim}
	type link struct{ name, target string }
	var links []link
	var walk func(rel string, depth int) error
	walk = func(rel string, depth int) error {
		if depth > 64 {
			return fmt.Errorf("%s: folders nested too deep", rel)
		}
		f, err := src.Open(path.Join(dir, rel))
		if err != nil {
			return fmt.Errorf("open %s: %w", path.Join(dir, rel), err)
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", path.Join(dir, rel), err)
		}
		for _, e := range entries {
			name := path.Join(rel, e.Name())
			if skipCopy[e.Name()] && e.IsDir() {
				continue
			}
			if err := b.addFile(name); err != nil {
				return err
			}
			fi, err := src.Lstat(path.Join(dir, name))
			if err != nil {
				return fmt.Errorf("stat %s: %w", name, err)
			}
			switch {
			case fi.IsDir():
				if err := dst.Mkdir(name, 0o755); err != nil {
					return fmt.Errorf("create %s: %w", name, err)
				}
				if err := walk(name, depth+1); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				in, err := src.OpenFile(path.Join(dir, name), os.O_RDONLY|noFollow, 0)
				if err != nil {
					return fmt.Errorf("open %s: %w", name, err)
				}
				err = writeFile(dst, name, fi.Mode(), in, b)
				in.Close()
				if err != nil {
					return err
				}
			case fi.Mode()&fs.ModeSymlink != 0:
				target, err := src.Readlink(path.Join(dir, name))
				if err != nil {
					return fmt.Errorf("read link %s: %w", name, err)
				}
				if !linkStaysInside(name, target) {
					return fmt.Errorf("refused symlink %q -> %q: it points out of the plugin", name, target)
				}
				links = append(links, link{name, target})
			default:
				return fmt.Errorf("refused %q: not a file, folder or link (%s)", name, fi.Mode().Type())
			}
		}
		return nil
	}
	if err := walk(".", 0); err != nil {
		return err
	}
	for _, l := range links {
		if err := dst.Symlink(l.target, l.name); err != nil {
			return fmt.Errorf("create symlink %s: %w", l.name, err)
		}
	}
	return nil
}
