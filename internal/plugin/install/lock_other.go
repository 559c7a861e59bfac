//go:build !unix

package install

func (in *Installer) lock() (func(), error) { return func() {}, nil }
