package egress

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"sync"
	"time"
)

// Certificate lifetimes.
const (
	// caLifetime is how long a CA made by NewCA is valid. It lives only in the
	// memory of the process that made it, so its life is that process's.
	caLifetime = 10 * 365 * 24 * time.Hour
	// leafLifetime is how long a host's certificate is valid; one with less
	// than leafRenew left is made again.
	leafLifetime = 7 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
	// maxLeaves bounds the cache of hosts' certificates; it is emptied when full.
	maxLeaves = 1024
)

// CA is the certificate authority with which the proxy terminates TLS for the
// hosts that have a secret rule. Its private key is made in memory by NewCA and
// never written anywhere: the kernel gets only its certificate (CertPEM), in a
// bundle beside the system's roots. It is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	leafKey *ecdsa.PrivateKey // one key for every host's certificate

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA makes a CA with a fresh ECDSA P-256 key.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kernelbox egress proxy CA " + serial.Text(16)[:8], Organization: []string{"kernelbox"}},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return &CA{
		cert: cert, key: key, leafKey: leafKey, leaves: map[string]*tls.Certificate{},
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// CertPEM returns the CA's certificate, PEM-encoded: what a kernel must trust.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// leaf returns a certificate for name, signed by the CA, made once and kept
// until it nears its end.
func (ca *CA) leaf(name string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.leaves[name]; c != nil && time.Until(c.Leaf.NotAfter) > leafRenew {
		return c, nil
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		DNSNames:  []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(leafLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey, Leaf: leaf}
	if len(ca.leaves) >= maxLeaves {
		clear(ca.leaves)
	}
	ca.leaves[name] = c
	return c, nil
}

// CAEnv lists the variables that point a kernel's TLS clients (OpenSSL and
// Python's ssl, requests, curl, pip, Node) at a bundle of the system's roots and
// the CA (Bundle) when its template has secrets. The backend sets them; a
// template with secrets may not.
var CAEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS"}

// systemBundles are where Linux distributions keep the system's roots as one
// PEM file (the list crypto/x509 reads).
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// Bundle returns what a kernel's TLS clients should trust when some of its
// hosts are intercepted: the PEM file roots (the system's bundle when roots is
// "") followed by the CA's certificate.
func (ca *CA) Bundle(roots string) ([]byte, error) {
	files := systemBundles
	if roots != "" {
		files = []string{roots}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) && roots == "" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("egress CA bundle: %w", err)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		return append(b, ca.certPEM...), nil
	}
	return nil, errors.New("egress CA bundle: no system roots file found (" + systemBundles[0] + " and the like); install ca-certificates")
}
