package gateway

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/beige-dev/beige/internal/home"
)

// HelperBinaryName is the static in-sandbox binary (tool client and exec
// helper), installed beside beige.
const HelperBinaryName = "beige-sandbox"

// FindHelperBinary finds the static binary that is mounted into every
// sandbox: $BEIGE_SANDBOX_BINARY, else beige-sandbox beside the running
// executable, else $BEIGE_HOME/bin/beige-sandbox. It must be statically
// linked, since sandbox images need not have a C library.
func FindHelperBinary(h home.Home) (string, error) {
	if p := os.Getenv("BEIGE_SANDBOX_BINARY"); p != "" {
		return checkStatic(p)
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			tried = append(tried, filepath.Join(filepath.Dir(exe), HelperBinaryName))
		}
	}
	tried = append(tried, filepath.Join(h.Dir, "bin", HelperBinaryName))
	for _, p := range tried {
		if _, err := os.Stat(p); err == nil {
			return checkStatic(p)
		}
	}
	return "", fmt.Errorf("the in-sandbox binary %s was not found (looked at %v); build it with `CGO_ENABLED=0 go build -o bin/%s ./cmd/%s` next to beige, or set BEIGE_SANDBOX_BINARY", HelperBinaryName, tried, HelperBinaryName, HelperBinaryName)
}

// checkStatic returns the absolute path of p if it is a statically linked
// ELF executable.
func checkStatic(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	f, err := elf.Open(abs)
	if err != nil {
		return "", fmt.Errorf("in-sandbox binary %s: %w", abs, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "", errors.New("in-sandbox binary " + abs + " is dynamically linked; build it with CGO_ENABLED=0")
		}
	}
	return abs, nil
}
