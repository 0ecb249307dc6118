package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// While a maintenance is Planning, its status says what a drain would meet, as `kubectl
// maintenance preflight` does; once it cordons, the preflight is gone.
func TestPreflightInStatusWhilePlanning(t *testing.T) {
	createNode(t, "pre-a", nil, false)
	createPod(t, "pre-bare", "pre-a") // no controller: lost once evicted
	createNM(t, "preflight-planned", false, false, "kernel upgrade", "pre-a")
	eventually(t, "the preflight in the status", func(ctx context.Context) (bool, string, error) {
		nm, err := getNM(ctx, "preflight-planned")
		if err != nil || nm.Status.Preflight == nil {
			return false, "no preflight", err
		}
		p := nm.Status.Preflight
		for _, f := range p.Findings {
			if f.Node == "pre-a" && f.Severity == "Loses" && f.Reason == "BarePod" && f.Count == 1 && f.Pods[0] == "default/pre-bare" {
				return p.NodesLosing == 1 && p.Assumption != "", fmt.Sprintf("%+v", p), nil
			}
		}
		return false, fmt.Sprintf("%+v", p), nil
	})
	setNM(t, "preflight-planned", true, false)
	eventually(t, "the preflight gone once cordoned", func(ctx context.Context) (bool, string, error) {
		nm, err := getNM(ctx, "preflight-planned")
		return err == nil && nm.Status.Phase == nodemaintv1alpha1.PhaseCordon && nm.Status.Preflight == nil, fmt.Sprintf("phase %s, preflight %+v", nm.Status.Phase, nm.Status.Preflight), err
	})
}

// TestPreflightFromTheCache: fifty Planning maintenances get their preflight with not one list
// from the API server of what the preflight reads, from a snapshot of the cache shared by all of
// them: a few snapshots (the nodes and pods of the test arriving, the planned-maintenance taint),
// not one a maintenance.
func TestPreflightFromTheCache(t *testing.T) {
	createNode(t, "cached-a", nil, false)
	createNode(t, "cached-b", nil, false)
	createPod(t, "cached-bare", "cached-a")
	lists := preflightLists(t)
	made, ran := counter(t, "nodemaint_preflight_snapshots_total"), counter(t, "nodemaint_preflights_total")
	start := time.Now()
	const n = 50
	for i := range n {
		createNM(t, fmt.Sprintf("cached-%02d", i), false, false, "planned", "cached-a", "cached-b")
	}
	eventually(t, "every maintenance's preflight in its status", func(ctx context.Context) (bool, string, error) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := k8s.List(ctx, &list); err != nil {
			return false, "", err
		}
		done := 0
		for _, nm := range list.Items {
			if !strings.HasPrefix(nm.Name, "cached-") {
				continue
			}
			if p := nm.Status.Preflight; p != nil && len(p.Findings) == 1 && p.Findings[0].Reason == "BarePod" && p.Findings[0].Pods[0] == "default/cached-bare" {
				done++
			}
		}
		return done == n, fmt.Sprintf("%d of %d", done, n), nil
	})
	if got := preflightLists(t); got != lists {
		t.Errorf("the controller listed what the preflight reads %v times from the API server, want none", got-lists)
	}
	madeNow, ranNow := counter(t, "nodemaint_preflight_snapshots_total"), counter(t, "nodemaint_preflights_total")
	// A snapshot at most every 10s (preflightFloor), one more for a start between two.
	if snapshots, most := madeNow-made, float64(2+int(time.Since(start)/(10*time.Second))); snapshots > most || ranNow-ran < n {
		t.Errorf("%v snapshots made (at most %v), %v preflights computed (at least %d)", snapshots, most, ranNow-ran, n)
	}
}

// preflightLists counts the controller's lists, from the API server, of the kinds the preflight
// reads. (Its informers fill their caches with watches: WatchListClient.)
func preflightLists(t *testing.T) float64 {
	t.Helper()
	watches := 0
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{"nodes": true, "pods": true, "poddisruptionbudgets.policy": true, "deployments.apps": true, "replicasets.apps": true,
		"statefulsets.apps": true, "horizontalpodautoscalers.autoscaling": true, "persistentvolumeclaims": true, "persistentvolumes": true,
		"namespaces": true, "drainrules.nodemaint.dev": true}
	var n float64
	for _, f := range families {
		if f.GetName() != "nodemaint_api_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case !kinds[labels["resource"]]:
			case labels["verb"] == "list":
				n += m.GetCounter().GetValue()
			case labels["verb"] == "watch":
				watches++
			}
		}
	}
	if watches == 0 {
		t.Fatal("no watch counted: the controller's requests are not counted")
	}
	return n
}

// counter is the value of the counter name of the controllers' metrics.
func counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
