//go:build !unix

package httpapi

// RaiseFileLimit does nothing where there is no RLIMIT_NOFILE.
func RaiseFileLimit() (soft, hard uint64, err error) { return 0, 0, nil }
