//go:build !unix

package toolclient

import (
	"errors"
	"os"
)

func dial(path string) (*os.File, error) {
	return nil, errors.New("Unix sockets are not supported on this system")
}
