package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// MetricsReaderServiceAccount is the ServiceAccount, in ControllerNamespace, that the tests scrape
// the controller's metrics as: bound to the ClusterRole nodemaint-metrics-reader of config/rbac,
// as a cluster's Prometheus is.
const MetricsReaderServiceAccount = "metrics-reader-e2e"

// MetricsReaderClusterRole is config/rbac's ClusterRole that lets a scraper get /metrics.
const MetricsReaderClusterRole = "nodemaint-metrics-reader"

// metricsToken is the bearer token of MetricsReaderServiceAccount, made once per package.
var metricsToken = sync.OnceValues(func() (string, error) {
	ctx := context.Background()
	c := cluster.Client()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderServiceAccount, Namespace: ControllerNamespace}}
	if _, err := c.CoreV1().ServiceAccounts(ControllerNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderServiceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReaderClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: MetricsReaderServiceAccount, Namespace: ControllerNamespace}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	return ServiceAccountToken(ctx, ControllerNamespace, MetricsReaderServiceAccount)
})

// MetricsReaderToken returns the bearer token GetMetrics sends: of MetricsReaderServiceAccount,
// bound to nodemaint-metrics-reader. A Prometheus the tests run scrapes with it
// (authorization.credentials_file), over https with tls_config.insecure_skip_verify.
func MetricsReaderToken() (string, error) { return metricsToken() }

// ServiceAccountToken returns a bearer token of the ServiceAccount (TokenRequest API), valid 24h.
func ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	tr, err := cluster.Client().CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// metricsHTTP is the client of the controller's metrics endpoint: its certificate is the
// self-signed one the controller makes at start (no --metrics-cert-path), so it is not verified.
var metricsHTTP = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // self-signed, on 127.0.0.1
}

// GetMetrics GETs url+"/metrics" (url: Controller.MetricsURL) as a scraper does: over HTTPS,
// with the bearer token of a ServiceAccount bound to nodemaint-metrics-reader. Every scrape of
// the tests goes through it. An answer other than 200 OK is an error, so that a refused scrape
// never reads as metrics that are absent.
func GetMetrics(url string) (*http.Response, error) {
	token, err := metricsToken()
	if err != nil {
		return nil, err
	}
	resp, err := GetMetricsWithToken(url, token)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s/metrics: %s: %s", url, resp.Status, body)
	}
	return resp, nil
}

// GetMetricsWithToken GETs url+"/metrics" with the bearer token, none if empty.
func GetMetricsWithToken(url, token string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return metricsHTTP.Do(req)
}
