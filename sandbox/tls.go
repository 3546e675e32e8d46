package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the PEM files of the sandbox's own certificate authority and
// of the one server certificate every instance (and sluice in tests) uses:
// valid for 127.0.0.1, ::1 and localhost.
type TLSFiles struct {
	CA, Cert, Key string
}

// writeTLSFiles creates a throwaway CA and a server certificate in dir.
func writeTLSFiles(dir string) (TLSFiles, error) {
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server-cert.pem"), Key: filepath.Join(dir, "server-key.pem")}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	now := time.Now()
	caTpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice sandbox CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return f, err
	}
	for _, w := range []struct {
		path, kind string
		der        []byte
	}{{f.CA, "CERTIFICATE", caDER}, {f.Cert, "CERTIFICATE", der}, {f.Key, "EC PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.kind, Bytes: w.der}), 0o600); err != nil {
			return f, fmt.Errorf("sandbox: %w", err)
		}
	}
	return f, nil
}
