package maintenance_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// gateRules fire the alert NodemaintE2EGate while the test's gauge is above 0.
const gateRules = `groups:
- name: e2e
  interval: 1s
  rules:
  - alert: NodemaintE2EGate
    expr: nodemaint_e2e_gate > 0
    labels: {severity: critical}
`

// TestRolloutHaltsOnAlerts: a rollout that selects an alert halts while the alert fires in a real
// Prometheus server, and resumes when it clears: before its first node (nothing cordoned), and
// between two nodes (the node in its turn finishes; the next waits).
func TestRolloutHaltsOnAlerts(t *testing.T) {
	gate := prometheus.NewGauge(prometheus.GaugeOpts{Name: "nodemaint_e2e_gate", Help: "1 fires the e2e alert."})
	gate.Set(1)
	target := serveGauge(t, gate)
	prom := framework.StartPrometheusWithRules(t, "e2e-gate", gateRules, target)
	c := framework.NewController(t)
	c.Start(append(controllerArgs, "--prometheus-url="+prom.URL(), "--prometheus-poll-interval=1s")...)

	first, second := node(1), node(2)
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "gated"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(first, second), Cordon: true, Drain: true,
			EvictionPolicy: nodemaintv1alpha1.EvictionPolicySignalOnly,
			Rollout: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Release: nodemaintv1alpha1.ReleaseManual,
				HaltOnAlerts: &nodemaintv1alpha1.AlertSelector{AlertNames: []string{"NodemaintE2EGate"}, MatchLabels: map[string]string{"severity": "critical"}}},
		},
	}
	if err := framework.Client().Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), nm) })

	expectGate(t, "gated", nodemaintv1alpha1.ReasonAlertsFiring, 0, 0)
	gate.Set(0)
	expectGate(t, "gated", nodemaintv1alpha1.ReasonRolling, 1, 0)
	gate.Set(1)
	expectGate(t, "gated", nodemaintv1alpha1.ReasonAlertsFiring, 1, 0)
	// The node in its turn finishes it; the next does not start while the alert fires.
	cur := &nodemaintv1alpha1.NodeMaintenance{}
	if err := framework.Client().Get(t.Context(), types.NamespacedName{Name: "gated"}, cur); err != nil {
		t.Fatal(err)
	}
	inTurn := cur.Status.Rollout.InTurn[0].Name
	completeTurn(t, inTurn, "gated")
	expectGate(t, "gated", nodemaintv1alpha1.ReasonAlertsFiring, 0, 1)
	gate.Set(0)
	expectGate(t, "gated", nodemaintv1alpha1.ReasonRolling, 1, 1)
}

// expectGate waits until the rollout's RolloutHalted condition has the reason, with inTurn
// nodes in their turn and done released.
func expectGate(t *testing.T, name, reason string, inTurn, done int32) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("%s: RolloutHalted %s, %d in turn, %d done", name, reason, inTurn, done), func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, nm); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
		r := nm.Status.Rollout
		if c == nil || r == nil {
			return false, "no rollout status yet", nil
		}
		got := fmt.Sprintf("%s %s (%s), %d in turn, %d done", c.Status, c.Reason, c.Message, r.NodesInTurn, r.NodesDone)
		ok := c.Reason == reason && r.NodesInTurn == inTurn && r.NodesDone == done
		if reason == nodemaintv1alpha1.ReasonAlertsFiring {
			ok = ok && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "NodemaintE2EGate")
		}
		return ok, got, nil
	})
}

// serveGauge serves the gauge's metric over HTTP for Prometheus to scrape, until the test ends.
func serveGauge(t *testing.T, g prometheus.Gauge) framework.MetricsTarget {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return framework.MetricsTarget{Scheme: "http", Address: l.Addr().String(), Path: "/metrics"}
}

// unanswered is a stand-in Prometheus that accepts every request and never answers: a
// blackholed Prometheus. It counts the requests it received and those that ended (the client gave
// up), and lets the held ones go when the test ends.
type unanswered struct {
	url             string
	received, ended atomic.Int32
}

func serveUnanswered(t *testing.T) *unanswered {
	t.Helper()
	u := &unanswered{}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.received.Add(1)
		select {
		case <-r.Context().Done():
			u.ended.Add(1)
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the held requests
	u.url = srv.URL
	return u
}

// TestUnansweredPrometheusStallsNothing: ten rollouts with haltOnAlerts against a Prometheus that
// never answers halt, and stall nothing else: a maintenance created while they wait gets its
// status before any read of that Prometheus has given up. The reads happen off the reconcile
// path; were they on it, every worker would wait on them (as many rollouts as workers), and the
// other maintenance's status would come only after a read timed out.
func TestUnansweredPrometheusStallsNothing(t *testing.T) {
	const workers, rollouts = 8, 10
	prom := serveUnanswered(t)
	c := framework.NewController(t)
	c.Start(append(controllerArgs, "--prometheus-url="+prom.url, "--prometheus-poll-interval=1s", fmt.Sprintf("--concurrency=%d", workers))...)

	var names []string
	for i := range rollouts {
		name := fmt.Sprintf("unanswered-%d", i)
		names = append(names, name)
		nm := &nodemaintv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
				NodeSelector: testutil.NodeSelectorFor(node(1), node(2)), Cordon: true, Drain: true,
				EvictionPolicy: nodemaintv1alpha1.EvictionPolicySignalOnly,
				Rollout: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Release: nodemaintv1alpha1.ReleaseManual,
					HaltOnAlerts: &nodemaintv1alpha1.AlertSelector{AlertNames: []string{"NodemaintE2EUnanswered"}}},
			},
		}
		if err := framework.Client().Create(t.Context(), nm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), nm) })
	}
	// The controller took the rollouts up: as many as it has workers got their finalizer, the
	// first write of a reconcile. A reconcile that waited on Prometheus would wait still.
	testutil.Eventually(t, timeout, fmt.Sprintf("%d of the rollouts have the finalizer", workers), func(ctx context.Context) (bool, string, error) {
		n := 0
		for _, name := range names {
			nm := &nodemaintv1alpha1.NodeMaintenance{}
			if err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, nm); err != nil {
				return false, "", err
			}
			if slices.Contains(nm.Finalizers, nodemaintv1alpha1.Finalizer) {
				n++
			}
		}
		return n >= workers, fmt.Sprintf("%d with the finalizer, Prometheus asked %d times", n, prom.received.Load()), nil
	})
	if prom.received.Load() == 0 {
		t.Fatalf("Prometheus never asked: want one read held at least")
	}
	if prom.ended.Load() > 0 {
		t.Fatalf("%d reads of Prometheus given up: want none yet", prom.ended.Load())
	}

	created := time.Now()
	createNM(t, "beside-unanswered", false, false, "", node(3))
	var endedAtStatus int32
	testutil.Eventually(t, timeout, "status of beside-unanswered", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := framework.Client().Get(ctx, types.NamespacedName{Name: "beside-unanswered"}, nm); err != nil {
			return false, "", err
		}
		endedAtStatus = prom.ended.Load()
		return nm.Status.ObservedGeneration == nm.Generation && nm.Status.Phase != "", fmt.Sprintf("phase %q", nm.Status.Phase), nil
	})
	t.Logf("status of the maintenance beside %d waiting rollouts written %v after its creation; %d reads of Prometheus given up by then",
		rollouts, time.Since(created).Round(10*time.Millisecond), endedAtStatus)
	if endedAtStatus > 0 {
		t.Fatalf("the status of a maintenance without haltOnAlerts came only after %d reads of an unanswering Prometheus gave up: the reads hold the workers", endedAtStatus)
	}

	// Every rollout halts, fail closed, and says why; no node starts its turn (cordoned).
	for _, name := range names {
		testutil.Eventually(t, timeout, name+" halts on alerts unknown", func(ctx context.Context) (bool, string, error) {
			nm := &nodemaintv1alpha1.NodeMaintenance{}
			if err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, nm); err != nil {
				return false, "", err
			}
			c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
			if c == nil || nm.Status.Rollout == nil {
				return false, "no rollout status yet", nil
			}
			return c.Status == metav1.ConditionTrue && c.Reason == nodemaintv1alpha1.ReasonAlertsUnknown && strings.Contains(c.Message, "Prometheus") &&
				nm.Status.Rollout.NodesInTurn == 0, fmt.Sprintf("%s %s (%s), %d in turn", c.Status, c.Reason, c.Message, nm.Status.Rollout.NodesInTurn), nil
		})
	}
	first := &nodemaintv1alpha1.NodeMaintenance{}
	if err := framework.Client().Get(t.Context(), types.NamespacedName{Name: names[0]}, first); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", names[0], meta.FindStatusCondition(first.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted).Message)
	for _, n := range []string{node(1), node(2)} {
		if v, err := testutil.ViewNode(t.Context(), framework.Client(), n); err != nil || v.Unschedulable {
			t.Errorf("node %s waits for its turn: %+v (%v), want it not cordoned", n, v, err)
		}
	}
	for _, name := range append(names, "beside-unanswered") {
		deleteNM(t, name)
	}
	for _, name := range append(names, "beside-unanswered") {
		expectGone(t, name)
	}
	expectNode(t, node(1), restored)
	expectNode(t, node(2), restored)
}
