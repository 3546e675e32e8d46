package server

import (
	"crypto/tls"
	"fmt"
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
