package helper

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/beige-dev/beige/internal/proto"
)

// maxCount bounds how far read counts past max in a file whose size stat
// does not tell (/proc files, devices).
const maxCount = 64 << 20

// read returns at most req.Max bytes of req.Path and its true size.
// It runs with the agent's file credentials.
func (s *server) read(req *proto.HelperRequest) (resp *proto.HelperResponse) {
	if req.Path == "" {
		return invalid("read: empty path")
	}
	if err := s.asAgent(func() error { resp = s.readAs(req); return nil }); err != nil {
		return errResponse(err)
	}
	return resp
}

func (s *server) readAs(req *proto.HelperRequest) *proto.HelperResponse {
	p := s.resolve(req.Path)
	st, err := os.Stat(p)
	if err != nil {
		return errResponse(err)
	}
	if st.IsDir() {
		return errResponse(&fs.PathError{Op: "read", Path: p, Err: syscall.EISDIR})
	}
	if st.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0 {
		return invalid("read %s: not a regular file", p)
	}
	// O_NONBLOCK: a FIFO swapped in since the stat must not block the open.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return errResponse(err)
	}
	defer f.Close()
	if fst, err := f.Stat(); err != nil {
		return errResponse(err)
	} else if fst.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0 || fst.IsDir() {
		return invalid("read %s: not a regular file", p)
	}
	if ownProc(f) || inProc(filepath.Dir(p)) && !inProcRoot(p) {
		return errResponse(&fs.PathError{Op: "read", Path: p, Err: syscall.EACCES})
	}
	limit := min(max(req.Max, 0), proto.MaxHelperBody)
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return errResponse(err)
	}
	size := max(st.Size(), int64(len(data)))
	if (!st.Mode().IsRegular() || st.Size() == 0) && int64(len(data)) == limit {
		// stat does not know the size; count the rest, within reason.
		rest, _ := io.Copy(io.Discard, io.LimitReader(f, maxCount))
		size = int64(len(data)) + rest
	}
	return &proto.HelperResponse{Size: size, Body: data}
}

// write replaces req.Path with req.Body, creating parent folders. It writes
// a temporary file beside the target and renames it over the target, so a
// reader sees the old or the new content, never half a file. The mode and
// (when allowed) owner of an existing file are kept; a symlink is followed.
// It runs with the agent's file credentials, so what it creates belongs to
// the agent and it can replace nothing the agent could not.
func (s *server) write(req *proto.HelperRequest) (resp *proto.HelperResponse) {
	if req.Path == "" {
		return invalid("write: empty path")
	}
	if err := s.asAgent(func() error { resp = s.writeAs(req); return nil }); err != nil {
		return errResponse(err)
	}
	return resp
}

func (s *server) writeAs(req *proto.HelperRequest) *proto.HelperResponse {
	p := s.resolve(req.Path)
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	mode := fs.FileMode(0o644)
	st, err := os.Stat(p)
	switch {
	case err == nil && st.IsDir():
		return errResponse(&fs.PathError{Op: "write", Path: p, Err: syscall.EISDIR})
	case err == nil:
		mode = st.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return errResponse(err)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errResponse(err)
	}
	if inProc(dir) {
		return errResponse(&fs.PathError{Op: "write", Path: p, Err: syscall.EACCES})
	}
	if err := writeAtomic(p, req.Body, mode, st); err != nil {
		// Renaming over a mount point or across devices fails; write in place.
		if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EXDEV) {
			err = os.WriteFile(p, req.Body, mode)
		}
		if err != nil {
			return errResponse(err)
		}
	}
	return &proto.HelperResponse{Size: int64(len(req.Body))}
}

func writeAtomic(p string, data []byte, mode fs.FileMode, old fs.FileInfo) (err error) {
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".beige-*")
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
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if old != nil {
		if sys, ok := old.Sys().(*syscall.Stat_t); ok {
			_ = f.Chown(int(sys.Uid), int(sys.Gid)) // best effort: only root may
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, p); err != nil {
		return fmt.Errorf("rename %s: %w", p, err)
	}
	return nil
}

// procMagic is the f_type of procfs.
const procMagic = 0x9fa0

// ownProc reports whether f is a per-process /proc entry (/proc/<pid>/...,
// which /proc/self and /proc/thread-self lead to). The helper refuses to
// read those: a process may always open its own, whatever its credentials,
// so /proc/self/fd/0 would be the helper's own request stream. The agent
// reads its own processes' entries with exec.
func ownProc(f *os.File) bool {
	var sfs syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &sfs); err != nil || sfs.Type != procMagic {
		return false
	}
	name, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return true // cannot tell: refuse
	}
	rest, ok := strings.CutPrefix(name, "/proc/")
	if !ok {
		return true
	}
	first, _, _ := strings.Cut(rest, "/")
	_, err = strconv.Atoi(first)
	return err == nil
}

// inProcRoot reports whether p names a file directly in /proc (meminfo,
// cpuinfo: not a process's).
func inProcRoot(p string) bool {
	d, err := filepath.EvalSymlinks(filepath.Dir(p))
	return err == nil && d == "/proc"
}

// inProc reports whether dir is on procfs: the helper writes nothing there,
// and reads there only files of /proc itself.
func inProc(dir string) bool {
	var sfs syscall.Statfs_t
	return syscall.Statfs(dir, &sfs) == nil && sfs.Type == procMagic
}
