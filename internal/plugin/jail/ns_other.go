//go:build !linux

package jail

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

func setNamespaces(*exec.Cmd, int) error {
	return errors.New("namespaces need Linux")
}

func runInit() {
	fmt.Fprintln(os.Stderr, "plugin jail: namespaces need Linux")
	os.Exit(127)
}
