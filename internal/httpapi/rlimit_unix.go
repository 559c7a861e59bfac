//go:build unix

package httpapi

import "syscall"

// RaiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit, so that
// connections, sockets and files have every descriptor the system allows.
// It returns the limits now in force.
func RaiseFileLimit() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	if rl.Cur < rl.Max {
		want := rl
		want.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return uint64(rl.Cur), uint64(rl.Max), err
		}
		rl = want
	}
	return uint64(rl.Cur), uint64(rl.Max), nil
}
