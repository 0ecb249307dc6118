package drain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// dashboardPath is the Grafana dashboard the chart ships (its one source).
const dashboardPath = "../../../config/default/prometheus/dashboard.json"

// TestMetrics drains a node in a rollout of one node: a Deployment the responder surges, a bare
// pod evicted at once and one a PodDisruptionBudget holds until the budget is deleted. The
// controller's metrics move as the drain does: the pod held by its reason, the node cordoned and
// in its turn, evictions refused then done, the surge and its answer, then the node drained,
// released and uncordoned, the drain's duration; the maintenance's series go with it. A real
// Prometheus scrapes the controller meanwhile, and every query of the dashboard returns data.
func TestMetrics(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	ns := framework.Namespace(t)
	start := time.Now()
	controller := framework.NewController(t)
	controller.Start()
	target := controller.MetricsTarget()
	prom := framework.StartPrometheus(t, "nodemaint-controller-metrics", target)

	drained := node(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "never"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "precious"}}},
	}
	web := framework.NewDeployment(ns, "web", 1)
	web.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
	}}
	web.Spec.Template.Annotations = map[string]string{localcluster.PodReadyDelayAnnotation: "1s"}
	onlyOn(t, drained, func() {
		create(t, pdb, barePod(ns, "precious", map[string]string{"app": "precious"}), barePod(ns, "bare", nil))
		framework.CreateDeployment(t, web)
		waitRunning(t, ns, 3)
	})

	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(drained), Cordon: true, Drain: true, Reason: "e2e metrics",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Second},
			Rollout:                   &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Release: nodemaintv1alpha1.ReleaseDrained},
		},
	}
	create(t, nm)
	t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), nm) })
	mine := func(labels ...string) map[string]string {
		m := map[string]string{"maintenance": "metrics"}
		for i := 0; i+1 < len(labels); i += 2 {
			m[labels[i]] = labels[i+1]
		}
		return m
	}

	// Held by the budget: the metrics say why, and that the node is cordoned in its turn.
	var held framework.Metrics
	expectMetrics(t, target, "the drain held by the budget", func(m framework.Metrics) []string {
		held = m
		return check(m,
			want("nodemaint_maintenance_pods_blocked", mine("reason", "PodDisruptionBudget"), eq(1)),
			want("nodemaint_maintenance_pods", mine("state", "pending_evacuation"), eq(1)),
			want("nodemaint_maintenance_nodes", mine("state", "cordoned"), eq(1)),
			want("nodemaint_maintenance_nodes", mine("state", "drained"), eq(0)),
			want("nodemaint_maintenance_rollout_nodes", mine("state", "in_turn"), eq(1)),
			want("nodemaint_maintenance_rollout_nodes", mine("state", "done"), eq(0)),
			want("nodemaint_maintenance_condition", mine("type", "Drained", "status", "False"), eq(1)),
			want("nodemaint_evictions_total", map[string]string{"result": "refused"}, atLeast(1)),
			want("nodemaint_evictions_total", map[string]string{"result": "evicted"}, atLeast(1)), // the bare pod
			want("nodemaint_responder_surges_total", map[string]string{"outcome": "started"}, atLeast(1)),
			want("nodemaint_responder_surges_total", map[string]string{"outcome": "completed"}, atLeast(1)),
			want("nodemaint_responder_answer_duration_seconds", map[string]string{"answer": "accepted"}, atLeast(1)),
			want("nodemaint_evacuation_answer_duration_seconds", map[string]string{"answer": "accepted"}, atLeast(1)),
			want("nodemaint_drain_duration_seconds", nil, eq(0)),
			want("nodemaint_node_drain_duration_seconds", nil, eq(0)),
		)
	})
	evictedWhileHeld, _ := held.Value("nodemaint_evictions_total", map[string]string{"result": "evicted"})

	// The budget goes: the pod is evicted, the node drained and released, the rollout done.
	if err := framework.Client().Delete(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	expectMetrics(t, target, "the node drained and released", func(m framework.Metrics) []string {
		_, blocked := m.Value("nodemaint_maintenance_pods_blocked", mine())
		problems := check(m,
			want("nodemaint_maintenance_pods", mine("state", "pending_evacuation"), eq(0)),
			want("nodemaint_maintenance_nodes", mine("state", "cordoned"), eq(0)),
			want("nodemaint_maintenance_nodes", mine("phase", "MaintenanceComplete", "state", "selected"), eq(1)),
			want("nodemaint_maintenance_rollout_nodes", mine("state", "done"), eq(1)),
			want("nodemaint_maintenance_rollout_nodes", mine("state", "in_turn"), eq(0)),
			want("nodemaint_maintenance_condition", mine("type", "Drained", "status", "True"), eq(1)),
			want("nodemaint_evictions_total", map[string]string{"result": "evicted"}, atLeast(evictedWhileHeld+1)),
			want("nodemaint_drain_duration_seconds", nil, eq(1)),
			want("nodemaint_node_drain_duration_seconds", nil, eq(1)),
		)
		if blocked {
			problems = append(problems, "nodemaint_maintenance_pods_blocked still reported")
		}
		return problems
	})

	// Prometheus has scraped the whole drain: every query of the dashboard returns data over it.
	testutil.Eventually(t, timeout, "Prometheus scraped the end of the drain", func(ctx context.Context) (bool, string, error) {
		series, err := prom.QueryRange(ctx, "nodemaint_drain_duration_seconds_count", time.Now().Add(-5*time.Second), time.Now(), time.Second)
		return err == nil && len(series) == 1 && len(series[0].Values) > 0 && series[0].Values[len(series[0].Values)-1][1] == "1", "", err
	})
	// A few scrapes more, for the rates after the last observation: three samples since.
	seen := time.Now()
	testutil.Eventually(t, timeout, "Prometheus scraped 3 times after the end of the drain", func(ctx context.Context) (bool, string, error) {
		now := time.Now()
		expr := fmt.Sprintf("count_over_time(nodemaint_drain_duration_seconds_count[%dms])", now.Sub(seen).Milliseconds())
		series, err := prom.QueryRange(ctx, expr, now, now, time.Second)
		if err != nil || len(series) != 1 || len(series[0].Values) == 0 {
			return false, fmt.Sprint(series), err
		}
		n, err := strconv.ParseFloat(fmt.Sprint(series[0].Values[0][1]), 64)
		return n >= 3, fmt.Sprintf("%v samples", n), err
	})
	end := time.Now()
	for _, q := range dashboardQueries(t) {
		series, err := prom.QueryRange(t.Context(), q.expr, start, end, time.Second)
		switch {
		case err != nil:
			t.Errorf("panel %q: %v", q.panel, err)
		case !anyNumber(series):
			t.Errorf("panel %q: no data for %s", q.panel, q.expr)
		}
	}

	// Deleted, the maintenance leaves no series behind.
	if err := framework.Client().Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "NodeMaintenance metrics gone", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm)
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	expectMetrics(t, target, "no series of the deleted maintenance", func(m framework.Metrics) []string {
		var left []string
		for name := range m {
			if _, ok := m.Value(name, mine()); ok && strings.HasPrefix(name, "nodemaint_maintenance_") {
				left = append(left, name)
			}
		}
		return left
	})
}

// expectMetrics scrapes the controller until problems returns none.
func expectMetrics(t *testing.T, target framework.MetricsTarget, what string, problems func(framework.Metrics) []string) {
	t.Helper()
	testutil.Eventually(t, timeout, what, func(ctx context.Context) (bool, string, error) {
		m, err := framework.ScrapeMetrics(ctx, target)
		if err != nil {
			return false, "", err
		}
		p := problems(m)
		return len(p) == 0, strings.Join(p, "; "), nil
	})
}

type expectation struct {
	name   string
	labels map[string]string
	ok     func(float64) bool
	desc   string
}

func want(name string, labels map[string]string, cond func() (func(float64) bool, string)) expectation {
	ok, desc := cond()
	return expectation{name, labels, ok, desc}
}

func eq(v float64) func() (func(float64) bool, string) {
	return func() (func(float64) bool, string) {
		return func(x float64) bool { return x == v }, "= " + fmt.Sprint(v)
	}
}

func atLeast(v float64) func() (func(float64) bool, string) {
	return func() (func(float64) bool, string) {
		return func(x float64) bool { return x >= v }, ">= " + fmt.Sprint(v)
	}
}

// check returns what of the expectations the metrics do not meet.
func check(m framework.Metrics, exps ...expectation) []string {
	var out []string
	for _, e := range exps {
		v, ok := m.Value(e.name, e.labels)
		if !ok && e.labels != nil {
			out = append(out, fmt.Sprintf("%s%v missing, want %s", e.name, e.labels, e.desc))
			continue
		}
		if !e.ok(v) {
			out = append(out, fmt.Sprintf("%s%v = %v, want %s", e.name, e.labels, v, e.desc))
		}
	}
	return out
}

type dashboardQuery struct{ panel, expr string }

// dashboardQueries are the queries of the dashboard's panels, with Grafana's variables as a
// dashboard showing every maintenance over a short range would set them.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$maintenance", ".*", "$__rate_interval", "1m", "$__range", "5m")
	var out []dashboardQuery
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			out = append(out, dashboardQuery{p.Title, vars.Replace(target.Expr)})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no queries in %s", dashboardPath)
	}
	return out
}

// anyNumber reports whether some point of the series is a number (not NaN).
func anyNumber(series []framework.Series) bool {
	for _, s := range series {
		for _, v := range s.Values {
			str, _ := v[1].(string)
			if f, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(f) {
				return true
			}
		}
	}
	return false
}
