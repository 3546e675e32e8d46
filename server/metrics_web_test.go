package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "metrics.pem"), filepath.Join(dir, "metrics.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// TestMetricsListenerTLSAndAuth: with metrics_tls_cert/key and
// metrics_user set, the metrics listener speaks HTTPS only, answers the API
// and /metrics only with the credentials, and keeps /healthz open.
func TestMetricsListenerTLSAndAuth(t *testing.T) {
	srv := offlineServer(t, "", 2)
	cert, key, pool := selfSigned(t, t.TempDir())
	srv.cfg.Proxy.MetricsTLSCert, srv.cfg.Proxy.MetricsTLSKey = cert, key
	srv.cfg.Proxy.MetricsUser, srv.cfg.Proxy.MetricsPassword = "ops", "s3cret"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := srv.serveMetrics(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(scheme, path, user, password string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, scheme+"://"+addr.String()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		return client.Do(req)
	}
	for _, tc := range []struct {
		path, user, password string
		code                 int
	}{
		{"/api/v1/clusters", "", "", http.StatusUnauthorized},
		{"/metrics", "", "", http.StatusUnauthorized},
		{"/", "ops", "wrong", http.StatusUnauthorized},
		{"/healthz", "", "", http.StatusOK},
		{"/metrics", "ops", "s3cret", http.StatusOK},
		{"/", "ops", "s3cret", http.StatusOK},
	} {
		resp, err := get("https", tc.path, tc.user, tc.password)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("GET %s as %q = %d, want %d", tc.path, tc.user, resp.StatusCode, tc.code)
		}
	}
	resp, err := get("https", "/api/v1/clusters", "ops", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string][]map[string]string
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || len(body["backends"]) != 3 || body["clusters"][0]["master"] != "127.0.0.1:2" {
		t.Errorf("clusters over TLS = %v, %v", body, err)
	}
	// Plain HTTP to the TLS listener gets Go's 400 for an HTTP request to
	// an HTTPS server, never the page; no answer at all fails too.
	resp, err = get("http", "/healthz", "", "")
	if err != nil {
		t.Fatalf("plain HTTP to the TLS metrics listener: %v, want Go's 400 answer", err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer to plain HTTP: %v", err)
	}
	if want := "Client sent an HTTP request to an HTTPS server"; resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(page), want) {
		t.Errorf("plain HTTP to the TLS metrics listener = %d %q, want 400 %q", resp.StatusCode, page, want)
	}
}

// TestMetricsListenerBadCert: a metrics_tls_cert that cannot be loaded
// stops the listener from starting, naming the key.
func TestMetricsListenerBadCert(t *testing.T) {
	srv := offlineServer(t, "", 1)
	srv.cfg.Proxy.MetricsTLSCert = filepath.Join(t.TempDir(), "missing.pem")
	srv.cfg.Proxy.MetricsTLSKey = srv.cfg.Proxy.MetricsTLSCert
	if _, err := srv.serveMetrics(context.Background(), "127.0.0.1:0"); err == nil {
		t.Fatal("a missing certificate started the metrics listener")
	} else if want := "metrics_tls_cert"; !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to name %s", err, want)
	}
}

// TestMetricsListenerEmptyPassword: a metrics_user whose password came out
// empty stops the listener from starting instead of taking any password.
func TestMetricsListenerEmptyPassword(t *testing.T) {
	srv := offlineServer(t, "", 1)
	srv.cfg.Proxy.MetricsUser = "ops"
	if _, err := srv.serveMetrics(context.Background(), "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("err = %v, want the empty password named", err)
	}
}
