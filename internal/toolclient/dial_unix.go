//go:build unix

package toolclient

import (
	"os"
	"syscall"
)

// dial connects to the Unix socket at path with plain system calls, which
// keeps package net (and its resolver) out of the static sandbox binary.
func dial(path string) (*os.File, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	syscall.CloseOnExec(fd)
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	return os.NewFile(uintptr(fd), path), nil
}
