//go:build linux

package gateway

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// trimResident lets go of the resident pages of the executable's read-only
// mappings (code and constant data). Start-up touches many pages that the
// running gateway never needs again — the package initialisers of the
// terminal client's markdown renderer parse megabytes of embedded syntax
// definitions — and the kernel maps neighbouring pages in too. Those pages
// are clean copies of the file: dropping them from our page tables costs
// nothing, and any the gateway does use come back on the next touch from
// the page cache. Writable mappings are never touched.
func trimResident() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-00452000 r-xp 00000000 08:02 173521   /usr/bin/beige
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED)
	}
}
