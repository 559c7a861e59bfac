package doctor

import "syscall"

// diskFree is the space an unprivileged user may still use on path's
// filesystem.
func diskFree(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
