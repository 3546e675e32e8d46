package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// serverTLS builds the client-facing TLS configuration from tls_cert and
// tls_key, or nil when TLS towards clients is off.
func serverTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("proxy.tls_cert/tls_key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// clientTLS builds the TLS configuration of a leg towards a server (the auth
// server or a backend) for mode "off", "preferred" or "required": nil when
// off. With a CA file the server's certificate is verified against it and
// the address's host; without one the link is encrypted but the server is
// not verified, as MySQL clients do with ssl-mode=REQUIRED. key names the
// setting in errors.
func clientTLS(key, mode, caFile, addr string) (*tls.Config, bool, error) {
	if mode == "" || mode == "off" {
		return nil, false, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		cfg.InsecureSkipVerify = true
	} else {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, false, fmt.Errorf("%s.tls_ca: %w", key, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, false, fmt.Errorf("%s.tls_ca: %s holds no PEM certificate", key, caFile)
		}
		cfg.RootCAs = pool
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	return cfg, mode == "required", nil
}
