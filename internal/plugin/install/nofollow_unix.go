//go:build unix

package install

import "syscall"

// noFollow makes opening a file that was swapped for a symlink fail.
const noFollow = syscall.O_NOFOLLOW
