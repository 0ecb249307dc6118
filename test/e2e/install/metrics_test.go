package install

import (
	"io"
	"net/http"
	"strings"
	"testing"

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

	resp, err := framework.GetMetrics(ctrl.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\ncontroller_runtime_reconcile_total{") {
		t.Errorf("a scrape as %s (nodemaint-metrics-reader): %d, want 200 with the controller's metrics:\n%.300s",
			framework.MetricsReaderServiceAccount, resp.StatusCode, body)
	}
}
