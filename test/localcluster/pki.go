package localcluster

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

// Client identities. The control-plane components use the users the default RBAC policy binds
// their roles to; kwok plays every kubelet and is a cluster admin; kube-apiserver presents
// front-proxy-client to aggregated API servers, and kube-apiserver-kubelet-client to the real
// node's kubelet (logs, exec: the kubelet asks the API server whether it may, as kubeadm's
// certificate of that name, a cluster admin); the real node's kube-proxy is system:kube-proxy,
// whom the default policy grants system:node-proxier.
var clientIdentities = map[string]pkix.Name{
	"admin":                         {CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
	"kube-controller-manager":       {CommonName: "system:kube-controller-manager"},
	"kube-scheduler":                {CommonName: "system:kube-scheduler"},
	"kwok":                          {CommonName: "kwok-controller", Organization: []string{"system:masters"}},
	"front-proxy-client":            {CommonName: "front-proxy-client"},
	"kube-apiserver-kubelet-client": {CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
	"kube-proxy":                    {CommonName: "system:kube-proxy"},
}

// serviceClusterIPRange is the cluster's Service CIDR; its first address is the kubernetes Service.
const serviceClusterIPRange = "10.96.0.0/16"

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// generatePKI writes into dir a CA, a serving certificate for 127.0.0.1, apiServerIP (the
// address kube-apiserver listens on) and the kubernetes Service (used by kube-apiserver,
// kube-controller-manager and kube-scheduler), a client certificate per entry of
// clientIdentities and the ServiceAccount token signing key pair.
func generatePKI(dir string, apiServerIP net.IP) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	ca, err := newKeyPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "nodemaint-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
	if err != nil {
		return err
	}
	if err := ca.write(dir, "ca"); err != nil {
		return err
	}

	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)}
	if apiServerIP != nil && !apiServerIP.IsLoopback() {
		ips = append(ips, apiServerIP)
	}
	serving, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "nodemaint-local"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: ips,
	}, ca)
	if err != nil {
		return err
	}
	if err := serving.write(dir, "serving"); err != nil {
		return err
	}

	for name, subject := range clientIdentities {
		client, err := newKeyPair(&x509.Certificate{
			Subject:     subject,
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.AddDate(1, 0, 0),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, ca)
		if err != nil {
			return err
		}
		if err := client.write(dir, name); err != nil {
			return err
		}
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
}

// newKeyPair issues tmpl with a new key, signed by parent, or self-signed when parent is nil.
func newKeyPair(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("creating certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// write writes <name>.crt and <name>.key into dir.
func (kp *keyPair) write(dir, name string) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", kp.cert.Raw); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), kp.key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}
