package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/nodemaint/nodemaint/internal/setup"
)

// The metrics server's options: secure by default (HTTPS, the API server authenticates and
// authorizes each scrape), HTTP/1.1 only unless --enable-http2, the certificate of
// --metrics-cert-path served (through a watcher), and plain HTTP with --metrics-secure=false.
func TestMetricsOptions(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "token"}
	defaults := setup.Flags{MetricsAddr: ":8443", MetricsSecure: true, MetricsCertName: "tls.crt", MetricsCertKey: "tls.key"}

	opts, w, err := metricsOptions(defaults, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !opts.SecureServing {
		t.Errorf("defaults: not secure; want HTTPS")
	}
	if opts.FilterProvider == nil {
		t.Errorf("defaults: no filter; want authentication and authorization")
	}
	if w != nil {
		t.Errorf("defaults: a certificate watcher; want a self-signed certificate")
	}
	if opts.BindAddress != ":8443" {
		t.Errorf("defaults: address %q; want :8443", opts.BindAddress)
	}
	if filter, err := opts.FilterProvider(cfg, nil); err != nil || filter == nil {
		t.Errorf("the authentication and authorization filter: %v", err)
	}
	var c tls.Config
	for _, f := range opts.TLSOpts {
		f(&c)
	}
	if len(c.NextProtos) != 1 || c.NextProtos[0] != "http/1.1" {
		t.Errorf("NextProtos %q: want HTTP/1.1 only without --enable-http2", c.NextProtos)
	}

	insecure := defaults
	insecure.MetricsSecure, insecure.EnableHTTP2 = false, true
	opts, _, err = metricsOptions(insecure, cfg)
	if err != nil {
		t.Fatalf("--metrics-secure=false --enable-http2: %v", err)
	}
	if opts.SecureServing {
		t.Errorf("--metrics-secure=false --enable-http2: secure")
	}
	if opts.FilterProvider != nil {
		t.Errorf("--metrics-secure=false --enable-http2: a filter")
	}
	if len(opts.TLSOpts) != 0 {
		t.Errorf("--metrics-secure=false --enable-http2: %d TLS options; want none", len(opts.TLSOpts))
	}

	missing := defaults
	missing.MetricsCertPath = t.TempDir()
	if _, _, err := metricsOptions(missing, cfg); err == nil {
		t.Error("a --metrics-cert-path without a certificate was accepted")
	}

	withCert := defaults
	withCert.MetricsCertPath = writeCert(t)
	opts, w, err = metricsOptions(withCert, cfg)
	if err != nil || w == nil {
		t.Fatalf("--metrics-cert-path: watcher %v, %v", w, err)
	}
	c = tls.Config{}
	for _, f := range opts.TLSOpts {
		f(&c)
	}
	cert, err := c.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || cert == nil {
		t.Fatalf("the served certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || leaf.Subject.CommonName != "nodemaint-controller-metrics.nodemaint-system.svc" {
		t.Errorf("served certificate %v, %v: want the one of --metrics-cert-path", leaf.Subject, err)
	}
}

// writeCert writes a self-signed tls.crt and tls.key into a new directory.
func writeCert(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "nodemaint-controller-metrics.nodemaint-system.svc"},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"nodemaint-controller-metrics.nodemaint-system.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The leader election namespace defaults to the controller's own: $POD_NAMESPACE, else the
// ServiceAccount's namespace file, else nodemaint-system.
func TestOwnNamespace(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "POD_NAMESPACE" {
				return v
			}
			return ""
		}
	}
	file := func(content string, err error) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if name != serviceAccountNamespaceFile {
				t.Errorf("read %s, want %s", name, serviceAccountNamespaceFile)
			}
			return []byte(content), err
		}
	}
	for _, c := range []struct {
		name string
		env  string
		file func(string) ([]byte, error)
		want string
	}{
		{"downward API", "ops", file("other", nil), "ops"},
		{"ServiceAccount file", "", file("ops\n", nil), "ops"},
		{"outside a pod", "", file("", os.ErrNotExist), "nodemaint-system"},
		{"empty file", "", file(" \n", nil), "nodemaint-system"},
	} {
		if got := ownNamespace(env(c.env), c.file); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
