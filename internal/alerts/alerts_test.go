package alerts

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

func TestSelected(t *testing.T) {
	firing := []Alert{
		{Name: "EtcdMembersDown", Labels: map[string]string{"severity": "critical"}},
		{Name: "KubePodCrashLooping", Labels: map[string]string{"severity": "warning", "namespace": "prod"}},
		{Name: "EtcdMembersDown", Labels: map[string]string{"severity": "critical", "instance": "b"}},
		{Name: "Watchdog", Labels: map[string]string{"severity": "none"}},
	}
	for name, tc := range map[string]struct {
		sel  nodemaintv1alpha1.AlertSelector
		want []string
	}{
		"by name":          {nodemaintv1alpha1.AlertSelector{AlertNames: []string{"KubePodCrashLooping", "Absent"}}, []string{"KubePodCrashLooping"}},
		"by labels":        {nodemaintv1alpha1.AlertSelector{MatchLabels: map[string]string{"severity": "critical"}}, []string{"EtcdMembersDown"}},
		"both":             {nodemaintv1alpha1.AlertSelector{AlertNames: []string{"KubePodCrashLooping"}, MatchLabels: map[string]string{"namespace": "dev"}}, nil},
		"name and a label": {nodemaintv1alpha1.AlertSelector{AlertNames: []string{"KubePodCrashLooping", "Watchdog"}, MatchLabels: map[string]string{"namespace": "prod"}}, []string{"KubePodCrashLooping"}},
		"no filter":        {nodemaintv1alpha1.AlertSelector{MatchLabels: map[string]string{}}, []string{"EtcdMembersDown", "KubePodCrashLooping", "Watchdog"}},
	} {
		if got := Selected(firing, &tc.sel); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// TestPrometheusReadsFiring reads Prometheus's /api/v1/alerts as the server answers it: pending
// alerts do not count, and one read serves the callers within its freshness.
func TestPrometheusReadsFiring(t *testing.T) {
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/alerts" {
			http.NotFound(w, r)
			return
		}
		reads.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"alerts":[
			{"labels":{"alertname":"EtcdMembersDown","severity":"critical"},"annotations":{},"state":"firing","activeAt":"2026-01-01T12:00:00Z","value":"1e+00"},
			{"labels":{"alertname":"KubePodCrashLooping"},"annotations":{},"state":"pending","activeAt":"2026-01-01T12:00:00Z","value":"1e+00"}]}}`))
	}))
	defer srv.Close()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	p, err := NewPrometheus(srv.URL, time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := p.Firing(t.Context())
		if err != nil || len(got) != 1 || got[0].Name != "EtcdMembersDown" || got[0].Labels["severity"] != "critical" {
			t.Fatalf("firing %+v, %v; want EtcdMembersDown only", got, err)
		}
	}
	if reads.Load() != 1 {
		t.Errorf("%d reads for three callers within a minute, want 1", reads.Load())
	}
	srv.Close()
	clk.SetTime(clk.Now().Add(time.Minute))
	if _, err := p.Firing(t.Context()); err == nil {
		t.Fatal("no error from a Prometheus that is gone")
	}
}
