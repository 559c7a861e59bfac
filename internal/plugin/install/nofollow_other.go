//go:build !unix

package install

const noFollow = 0
