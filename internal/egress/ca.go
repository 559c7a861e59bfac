package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CA file names in $BEIGE_HOME/data/egress-ca.
const (
	CAKeyFile  = "ca.key" // the private key, 0600, never mounted into a sandbox
	CACertFile = "ca.pem" // the certificate, mounted read-only into sandboxes
)

// leafLifetime is how long a leaf certificate made for an intercepted host
// is valid; the cache makes a new one well before it ends.
const leafLifetime = 7 * 24 * time.Hour

// CA is the per-home certificate authority the proxy signs the leaf
// certificates of intercepted hosts with.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	mu    sync.Mutex
	leafs map[string]*tls.Certificate
}

// NewCA makes a fresh CA in memory (ECDSA P-256).
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate egress CA key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("egress CA serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "beige egress proxy CA", Organization: []string{"beige"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create egress CA certificate: %w", err)
	}
	return parseCA(der, key)
}

func parseCA(der []byte, key *ecdsa.PrivateKey) (*CA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse egress CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("egress CA certificate is not a CA")
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("egress CA certificate does not match its key")
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), leafs: map[string]*tls.Certificate{}}, nil
}

// LoadOrCreateCA reads the CA of dir (ca.key, ca.pem) or, when neither
// exists, creates dir (0700) and writes a new one: the key 0600, the
// certificate 0644. A half-present or unreadable pair is an error, never
// silently replaced. dir is gateway state, not reachable by a sandbox.
func LoadOrCreateCA(dir string) (*CA, error) {
	keyPath, certPath := filepath.Join(dir, CAKeyFile), filepath.Join(dir, CACertFile)
	keyPEM, kerr := os.ReadFile(keyPath)
	certPEM, cerr := os.ReadFile(certPath)
	if errors.Is(kerr, fs.ErrNotExist) && errors.Is(cerr, fs.ErrNotExist) {
		ca, err := NewCA()
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create egress CA directory: %w", err)
		}
		der, err := x509.MarshalECPrivateKey(ca.key)
		if err != nil {
			return nil, fmt.Errorf("encode egress CA key: %w", err)
		}
		if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
		if err := writeNew(certPath, ca.pem, 0o644); err != nil {
			return nil, err
		}
		return ca, nil
	}
	if kerr != nil {
		return nil, fmt.Errorf("read egress CA key: %w", kerr)
	}
	if cerr != nil {
		return nil, fmt.Errorf("read egress CA certificate: %w", cerr)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("egress CA key %s: no PEM block", keyPath)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse egress CA key %s: %w", keyPath, err)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil {
		return nil, fmt.Errorf("egress CA certificate %s: no PEM block", certPath)
	}
	return parseCA(cb.Bytes, key)
}

// writeNew writes a file that must not exist yet (no symlink followed).
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CertPEM is the CA certificate in PEM form (what sandboxes trust).
func (ca *CA) CertPEM() []byte { return ca.pem }

// Pool is a pool holding only the CA certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Leaf returns a certificate for host signed by the CA, made on first use
// and cached in memory.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leafs[host]; ok && time.Until(c.Leaf.NotAfter) > leafLifetime/2 {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate leaf key for %s: %w", host, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("leaf serial for %s: %w", host, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign leaf for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse leaf for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	ca.leafs[host] = c
	return c, nil
}
