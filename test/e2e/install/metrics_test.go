package install

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// TestSecureMetrics runs the controller as its ServiceAccount, with exactly the RBAC of
// config/rbac, and its default metrics endpoint (--metrics-secure): a scrape without a token is
// refused, and so is one whose ServiceAccount was not granted nodemaint-metrics-reader; one with
// a token of a ServiceAccount bound to it gets the metrics.
func TestSecureMetrics(t *testing.T) {
	ctrl := framework.NewController(t)
	ctrl.Start()
	if !strings.HasPrefix(ctrl.MetricsURL(), "https://") {
		t.Fatalf("metrics URL %s: not HTTPS", ctrl.MetricsURL())
	}

	get := func(token string) (int, string) {
		t.Helper()
		resp, err := framework.GetMetricsWithToken(ctrl.MetricsURL(), token)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	if code, body := get(""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("a scrape without a token: %d, want 401 or 403:\n%.300s", code, body)
	}
	// The controller's own ServiceAccount authenticates, but may not get /metrics.
	other, err := framework.ServiceAccountToken(t.Context(), framework.ControllerNamespace, framework.ControllerServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(other); code != http.StatusForbidden {
		t.Errorf("a scrape as a ServiceAccount without nodemaint-metrics-reader: %d, want 403:\n%.300s", code, body)
	}

	// The controllers' series appear once the replica leads and has started them: a moment.
	waitForMetrics(t, "a scrape as "+framework.MetricsReaderServiceAccount+" (nodemaint-metrics-reader)",
		func() (*http.Response, error) { return framework.GetMetrics(ctrl.MetricsURL()) })
	// With no GOGC in its environment, the controller's collector lets the heap grow by half the
	// live heap, not Go's default of all of it.
	if _, set := os.LookupEnv("GOGC"); !set {
		m, err := framework.ScrapeMetrics(t.Context(), ctrl.MetricsTarget())
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := m.Value("go_gc_gogc_percent", nil); v != 50 {
			t.Errorf("go_gc_gogc_percent %v (present: %v), want 50 with GOGC unset", v, ok)
		}
	}
}

// waitForMetrics waits until get answers 200 with the controllers' metrics.
func waitForMetrics(t *testing.T, what string, get func() (*http.Response, error)) {
	t.Helper()
	testutil.Eventually(t, time.Minute, what, func(context.Context) (bool, string, error) {
		resp, err := get()
		if err != nil {
			return false, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, "", err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\ncontroller_runtime_reconcile_total{") {
			return false, "", fmt.Errorf("%d, want 200 with the controller's metrics: %.300s", resp.StatusCode, body)
		}
		return true, "", nil
	})
}

// TestServiceMonitorCredentials scrapes a running controller as the chart's ServiceMonitor has
// Prometheus scrape it: the controller serves the certificate of metrics.certSecret (written here
// as cert-manager writes it: tls.crt, tls.key, ca.crt), which Prometheus verifies with that
// Secret's ca.crt under the ServiceMonitor's serverName; Prometheus authenticates with a token of
// its own ServiceAccount, bound to nodemaint-metrics-reader by metricsReaderServiceAccounts (the
// TokenRequest API gives what the kubelet projects into its pod, which its scrape class reads).
func TestServiceMonitorCredentials(t *testing.T) {
	ns := framework.Namespace(t) // Prometheus'
	const prometheus = "prometheus"
	create(t, framework.Client(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prometheus}})
	objs := parse(t, helmTemplate(t, "--set", "serviceMonitor.enabled=true", "--set", "metrics.certSecret=metrics-tls",
		"--set", "metricsReaderServiceAccounts[0].name="+prometheus, "--set", "metricsReaderServiceAccounts[0].namespace="+ns))
	binding := objs["ClusterRoleBinding/nodemaint-metrics-reader"]
	if binding == nil {
		t.Fatal("metricsReaderServiceAccounts renders no ClusterRoleBinding nodemaint-metrics-reader")
	}
	b, err := binding.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	apply(t, string(b), nil)
	_, ep := serviceMonitorEndpoint(t, objs)
	serverName, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
	if serverName == "" {
		t.Fatalf("the ServiceMonitor's endpoint names no serverName: %v", ep)
	}

	certDir := t.TempDir()
	roots := writeServingCert(t, certDir, serverName)
	ctrl := framework.NewController(t)
	ctrl.Start("--metrics-cert-path=" + certDir)
	token, err := framework.ServiceAccountToken(t.Context(), ns, prometheus)
	if err != nil {
		t.Fatal(err)
	}
	verifying := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}}}
	// The binding reaches the API server's authorizer through its informer: a moment.
	waitForMetrics(t, "a scrape verifying the certificate, with Prometheus' token", func() (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, ctrl.MetricsURL()+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		return verifying.Do(req)
	})
}

// writeServingCert writes into dir, as cert-manager writes a certificate's Secret, a CA
// (ca.crt) and a certificate for serverName it signed (tls.crt, tls.key); it returns the CA.
func writeServingCert(t *testing.T, dir, serverName string) *x509.CertPool {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, key := newKey(), newKey()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metrics CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: serverName}, DNSNames: []string{serverName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: leafDER},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return roots
}
