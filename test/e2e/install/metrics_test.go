package install

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

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
	framework.Eventually(t, time.Minute, what, func(context.Context) (bool, error) {
		resp, err := get()
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\ncontroller_runtime_reconcile_total{") {
			return false, fmt.Errorf("%d, want 200 with the controller's metrics: %.300s", resp.StatusCode, body)
		}
		return true, nil
	})
}

// TestServiceMonitorCredentials applies the chart's ServiceMonitor credentials (the scraper
// ServiceAccount, its token Secret and its binding to nodemaint-metrics-reader) to the cluster
// and scrapes a running controller with the token kube-controller-manager put in the Secret, as
// the prometheus-operator would.
func TestServiceMonitorCredentials(t *testing.T) {
	scraper := controller + "-metrics-scraper"
	objs := parse(t, helmTemplate(t, "--set", "serviceMonitor.enabled=true"))
	var manifests bytes.Buffer
	for _, k := range []string{"ServiceAccount/" + namespace + "/" + scraper, "Secret/" + namespace + "/" + scraper, "ClusterRoleBinding/" + scraper} {
		obj := objs[k]
		if obj == nil {
			t.Fatalf("the chart renders no %s", k)
		}
		b, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		manifests.Write(b)
		manifests.WriteString("\n")
	}
	apply(t, manifests.String(), nil)

	var token string
	framework.Eventually(t, time.Minute, "the scraper's token in Secret "+scraper, func(ctx context.Context) (bool, error) {
		out, err := framework.Kubectl(t, "-n", namespace, "get", "secret", scraper, "-o", "jsonpath={.data.token}")
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, out)
		}
		decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
		token = string(decoded)
		return token != "", err
	})

	ctrl := framework.NewController(t)
	ctrl.Start()
	// The binding reaches the API server's authorizer through its informer: a moment.
	waitForMetrics(t, "a scrape with the ServiceMonitor's token",
		func() (*http.Response, error) { return framework.GetMetricsWithToken(ctrl.MetricsURL(), token) })
}
