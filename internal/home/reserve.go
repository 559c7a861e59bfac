package home

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// An agent can fill the filesystem that $BEIGE_HOME is on (by default its
// workspace is on it). So that the gateway can still write its audit log,
// its sessions and its PID file, it keeps a reserve: a file of real blocks
// ($BEIGE_HOME/data/disk-reserve), made at start. The first write of the
// gateway's own that fails for want of space releases it (ReleaseOnFull)
// and is tried again; /api/health then says the disk is full; and the
// reserve is made again once there is room (Refresh, Watch).

// DefaultReserveBytes is the size of the disk reserve.
const DefaultReserveBytes = 64 << 20

// DiskReserve returns the reserve file's path.
func (h Home) DiskReserve() string { return h.path("data", "disk-reserve") }

// ReserveOptions configure a reserve. Zero fields mean the defaults.
type ReserveOptions struct {
	// Size is the reserve's size in bytes (default DefaultReserveBytes).
	Size int64
	// LowBytes: less free space than this on $BEIGE_HOME's filesystem is
	// reported as low (default Size).
	LowBytes int64
	Logger   *slog.Logger
}

// Reserve is the disk reserve of one home. It is safe for concurrent use.
type Reserve struct {
	dir, path string
	size, low int64
	log       *slog.Logger

	mu     sync.Mutex
	whole  bool        // the file is there at its full size
	freed  atomic.Bool // released on a full disk, not made again yet (read without mu)
	warned bool        // "no room for the reserve" was logged
}

var (
	reservesMu sync.Mutex
	reserves   = map[*Reserve]bool{}
)

// OpenReserve registers the reserve of h for ReleaseOnFull until Close. It
// writes nothing: a reserve file left by the last run is there to release
// at once (that is what lets a start on a full disk write its PID file),
// and Refresh (or Watch) makes or completes it.
func OpenReserve(h Home, opts *ReserveOptions) *Reserve {
	var o ReserveOptions
	if opts != nil {
		o = *opts
	}
	if o.Size <= 0 {
		o.Size = DefaultReserveBytes
	}
	if o.LowBytes <= 0 {
		o.LowBytes = o.Size
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Reserve{dir: h.Dir, path: h.DiskReserve(), size: o.Size, low: o.LowBytes, log: o.Logger}
	r.whole = r.isWhole()
	reservesMu.Lock()
	reserves[r] = true
	reservesMu.Unlock()
	return r
}

// Close unregisters the reserve (its file stays, for the next start).
func (r *Reserve) Close() {
	reservesMu.Lock()
	delete(reserves, r)
	reservesMu.Unlock()
}

// isWhole reports whether the reserve file is there, regular, at its full
// size and not sparse.
func (r *Reserve) isWhole() bool {
	st, err := os.Lstat(r.path)
	if err != nil || !st.Mode().IsRegular() || st.Size() < r.size {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return !ok || sys.Blocks*512 >= r.size
}

// make writes the reserve file up to its size, with data (not zeroes,
// which a filesystem may store as holes or compress away), and syncs it.
func (r *Reserve) make() error {
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", r.path)
	}
	have := st.Size()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Blocks*512 < have {
		have = 0 // sparse: write it all
	}
	if have >= r.size {
		return nil
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return err
	}
	var seed [32]byte
	src := rand.NewChaCha8(seed)
	buf := make([]byte, 1<<20)
	for have < r.size {
		n := min(int64(len(buf)), r.size-have)
		src.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		have += n
	}
	return f.Sync()
}

// Release deletes the reserve file, freeing its space; it reports whether
// there was a reserve to free.
func (r *Reserve) Release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freed.Store(true)
	r.whole = false
	st, err := os.Lstat(r.path)
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return false
	}
	if err := os.Remove(r.path); err != nil {
		r.log.Error("disk reserve: cannot release", "file", r.path, "err", err)
		return false
	}
	r.log.Warn("disk full: reserve released so that the gateway's own writes go on", "file", r.path, "freed", st.Size(), "fs", mountPoint(r.dir))
	return true
}

// Refresh makes the reserve (again) when it is not whole and there is
// room for it and the low mark besides; it reports whether it is whole.
func (r *Reserve) Refresh() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.whole {
		return true
	}
	free, err := freeBytes(r.dir)
	if err != nil || free < uint64(r.size+r.low) {
		if !r.warned {
			r.log.Warn("disk reserve: no room for it yet; the gateway's own writes may fail if the disk fills", "file", r.path, "size", r.size, "free", free, "err", err)
			r.warned = true
		}
		return false
	}
	if err := r.make(); err != nil {
		os.Remove(r.path) // a partial reserve would only hold space back
		r.log.Warn("disk reserve: cannot be made", "file", r.path, "err", err)
		return false
	}
	if r.freed.Load() {
		r.log.Info("disk reserve made again", "file", r.path, "size", r.size)
	}
	r.whole, r.warned = true, false
	r.freed.Store(false)
	return true
}

// Watch calls Refresh now and then every interval until ctx ends.
func (r *Reserve) Watch(ctx context.Context, interval time.Duration) {
	r.Refresh()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Refresh()
		}
	}
}

// Problem is what /api/health reports for the disk: "" when the reserve is
// not released and free space is above the low mark, else
// "disk full/low: N MB free on <mount point>".
func (r *Reserve) Problem() string {
	released := r.freed.Load()
	free, err := freeBytes(r.dir)
	if err != nil {
		return fmt.Sprintf("disk: cannot check free space of %s: %v", r.dir, err)
	}
	if !released && free >= uint64(r.low) {
		return ""
	}
	return fmt.Sprintf("disk full/low: %d MB free on %s", free>>20, mountPoint(r.dir))
}

// IsDiskFull reports whether err is a write failing for want of space (or
// quota).
func IsDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// ReleaseOnFull is for every writer of the gateway's own state (audit log,
// sessions, PID file, provider health): when err says the disk is full it
// releases the open reserves and reports whether any space was freed, in
// which case the write should be tried once more.
func ReleaseOnFull(err error) bool {
	if !IsDiskFull(err) {
		return false
	}
	reservesMu.Lock()
	rs := make([]*Reserve, 0, len(reserves))
	for r := range reserves {
		rs = append(rs, r)
	}
	reservesMu.Unlock()
	freed := false
	for _, r := range rs {
		if r.Release() {
			freed = true
		}
	}
	return freed
}

// freeBytes is the space an unprivileged writer can still use on the
// filesystem of dir.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// mountPoint names the filesystem dir is on: the longest mount point of
// /proc/self/mounts above it, or dir itself when that cannot be read.
func mountPoint(dir string) string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return dir
	}
	defer f.Close()
	best := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		mp := strings.ReplaceAll(fields[1], `\040`, " ")
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > len(best) {
			best = mp
		}
	}
	if best == "" {
		return dir
	}
	return best
}
