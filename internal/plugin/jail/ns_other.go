//go:build !linux

package jail

import (
	"errors"
	"os/exec"
)

func setNamespaces(*exec.Cmd, int) error {
	return errors.New("namespaces need Linux")
}
