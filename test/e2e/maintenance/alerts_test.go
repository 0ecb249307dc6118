package maintenance_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

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
