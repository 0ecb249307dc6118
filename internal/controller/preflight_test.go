package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
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
	if snapshots, most := madeNow-made, float64(2+int(time.Since(start)/(10*time.Second))); snapshots > most {
		t.Errorf("%v snapshots made, want at most %v", snapshots, most)
	}
	if ranNow-ran < n {
		t.Errorf("%v preflights computed, want at least %d", ranNow-ran, n)
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

// TestRolloutPreflightBlock: a rollout with spec.rollout.preflight Block on a cluster built to
// deadlock (a Deployment of one replica with maxSurge 0, under a budget of minAvailable 1) does
// not start: its node stays uncordoned, status.preflight names the budget (BudgetBlocked, the
// budget never allows a disruption) and the Deployment (CannotSurge), RolloutHalted and Ready
// say PreflightBlocked, and a Warning Event names the findings. Once the budget is relaxed, the
// forecast is clean and the rollout starts.
func TestRolloutPreflightBlock(t *testing.T) {
	ctx := context.Background()
	readyNode(t, "block-a", nil)
	readyNode(t, "block-b", nil)
	labels := map[string]string{"app": "blocked"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "blocked"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
	mustCreate(t, d)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "blocked-rs", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	mustCreate(t, rs)
	pod := createPod(t, "blocked-x", "block-a", func(p *corev1.Pod) {
		p.Labels = labels
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	})
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The budget, as the disruption controller (not running here) would report it.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "blocked"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	mustCreate(t, pdb)
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}

	createRollout(t, "preflight-block", &nodemaintv1alpha1.RolloutSpec{Preflight: nodemaintv1alpha1.PreflightBlock}, "block-a")
	var halted *metav1.Condition
	eventually(t, "the rollout held by its forecast", func(ctx context.Context) (bool, string, error) {
		nm, err := getNM(ctx, "preflight-block")
		if err != nil || nm.Status.Preflight == nil {
			return false, "no preflight", err
		}
		p := nm.Status.Preflight
		has := func(reason, object string) bool {
			return slices.ContainsFunc(p.Findings, func(f nodemaintv1alpha1.PreflightFinding) bool {
				return f.Node == "block-a" && f.Severity == "Blocks" && f.Reason == reason && f.Object == object && slices.Contains(f.Pods, "default/blocked-x")
			})
		}
		halted = meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
		ready := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionReady)
		return p.Deadlocks == 2 && has(nodemaintv1alpha1.PreflightReasonBudgetBlocked, "PodDisruptionBudget default/blocked") &&
				has(nodemaintv1alpha1.PreflightReasonCannotSurge, "Deployment default/blocked") &&
				halted != nil && halted.Status == metav1.ConditionTrue && halted.Reason == nodemaintv1alpha1.ReasonPreflightBlocked &&
				strings.Contains(halted.Message, "block-a: BudgetBlocked (PodDisruptionBudget default/blocked)") &&
				ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == nodemaintv1alpha1.ReasonPreflightBlocked &&
				nm.Status.Rollout != nil && len(nm.Status.Rollout.InTurn) == 0 && nm.Status.Rollout.NodesWaiting == 1,
			fmt.Sprintf("preflight %+v, conditions %+v, rollout %+v", p, nm.Status.Conditions, nm.Status.Rollout), nil
	})
	e := expectWarning(t, "NodeMaintenance", "preflight-block", nodemaintv1alpha1.ReasonPreflightBlocked)
	for _, finding := range []string{"BudgetBlocked", "CannotSurge"} {
		if !strings.Contains(e.Note, finding) {
			t.Errorf("the Event %q does not name the finding %s", e.Note, finding)
		}
	}
	// Looked at again since: still held, the node not cordoned.
	expectReconciled(t, "nodemaintenance", "preflight-block", time.Now(), "")
	node := &corev1.Node{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: "block-a"}, node); err != nil || node.Spec.Unschedulable {
		t.Fatalf("block-a cordoned while the forecast holds the rollout (%v)", err)
	}

	// The budget relaxed (minAvailable 0, as the disruption controller then reports it): the
	// Deployment still cannot surge, but its pod may be evicted; nothing deadlocks, and the
	// rollout starts.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
	if err := k8s.Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 1, CurrentHealthy: 1, DesiredHealthy: 0, ExpectedPods: 1}
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	// The forecast is computed again within preflightworker.GatedRefresh (10s).
	testutil.Eventually(t, time.Minute, "the rollout started once the forecast is clean", func(ctx context.Context) (bool, string, error) {
		nm, err := getNM(ctx, "preflight-block")
		if err == nil {
			err = k8s.Get(ctx, types.NamespacedName{Name: "block-a"}, node)
		}
		if err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
		return nm.Status.Rollout != nil && len(nm.Status.Rollout.InTurn) == 1 && node.Spec.Unschedulable && c != nil && c.Status == metav1.ConditionFalse &&
				nm.Status.Preflight == nil,
			fmt.Sprintf("rollout %+v, halted %+v, preflight %+v, block-a unschedulable %v", nm.Status.Rollout, c, nm.Status.Preflight, node.Spec.Unschedulable), nil
	})
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}
