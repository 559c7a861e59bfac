// Package trust is the sandbox's side of trusting the egress CA: at start,
// `beige-sandbox idle` (and the helper) write BundlePath, the image's own
// CA bundle followed by the egress CA, so that the variables that replace
// a client's whole bundle (Env) can point at it without breaking every
// host that is not intercepted. It depends on the standard library only.
package trust

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

const (
	// CAPath is the egress CA's certificate in the sandbox (the gateway
	// writes it to the agent's socket folder, mounted read-only at /beige).
	CAPath = "/beige/egress-ca.pem"
	// Dir is a root-owned tmpfs (mode 0755) of every sandbox; only the
	// container's root can write in it.
	Dir = "/run/beige"
	// BundlePath is the combined bundle: the image's roots and the CA.
	BundlePath = "/run/beige/ca-bundle.pem"
	// MaxBundle bounds what is read of a bundle.
	MaxBundle = 16 << 20
)

// Env are the variables that replace a client's CA bundle: OpenSSL, Go
// and curl (SSL_CERT_FILE), curl (CURL_CA_BUNDLE), Python requests
// (REQUESTS_CA_BUNDLE), git (GIT_SSL_CAINFO). The gateway points them at
// BundlePath when the agent has credentials to inject.
var Env = []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO"}

// SystemBundles are where images keep their CA bundle, in the order Go's
// crypto/x509 looks for them; the first one that is a readable regular
// file is used.
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Alpine, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine (a link), others
}

// Write writes dst (0444, replaced atomically): the first of system that
// can be read, then the certificate at ca; the CA alone when the image has
// no bundle. It writes nothing and returns false when ca does not exist.
// The image's files are the sandbox's own: a link is followed, but only a
// regular file of at most MaxBundle bytes is read, and a FIFO does not
// block.
func Write(ca, dst string, system []string) (bool, error) {
	caPEM, err := readBounded(ca)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the egress CA: %w", err)
	}
	var b bytes.Buffer
	for _, p := range system {
		sys, err := readBounded(p)
		if err != nil {
			continue
		}
		b.Write(sys)
		if len(sys) > 0 && sys[len(sys)-1] != '\n' {
			b.WriteByte('\n')
		}
		break
	}
	b.Write(caPEM)
	if err := writeAtomic(dst, b.Bytes()); err != nil {
		return false, fmt.Errorf("write the CA bundle: %w", err)
	}
	return true, nil
}

// Install is Write with the sandbox's paths; errors go to log.
func Install(log io.Writer) {
	if _, err := Write(CAPath, BundlePath, SystemBundles); err != nil {
		fmt.Fprintf(log, "beige-sandbox: %v\n", err)
	}
}

func readBounded(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxBundle+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBundle {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxBundle)
	}
	return b, nil
}

func writeAtomic(dst string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".ca-bundle-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o444)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
