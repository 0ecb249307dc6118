package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Bad input and things vanishing under a maintenance: each is reported clearly, changes nothing it
// should not, and puts no reconciler into an error loop.

// expectCondition waits until the NodeMaintenance's condition has the status and reason.
func expectCondition(t *testing.T, name, condType string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	eventually(t, name+" condition "+condType, func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: name}, nm); err != nil {
			return false, "", err
		}
		got = meta.FindStatusCondition(nm.Status.Conditions, condType)
		return got != nil && got.Status == status && got.Reason == reason && got.ObservedGeneration == nm.Generation,
			fmt.Sprintf("%+v", got), nil
	})
	return got
}

// expectWarning waits for a Warning Event of the reason about the object named name.
func expectWarning(t *testing.T, kind, name, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventually(t, "Warning Event "+reason+" on "+kind+" "+name, func(ctx context.Context) (bool, string, error) {
		var events eventsv1.EventList
		if err := k8s.List(ctx, &events); err != nil {
			return false, "", err
		}
		for _, e := range events.Items {
			if e.Reason == reason && e.Type == corev1.EventTypeWarning && e.Regarding.Kind == kind && e.Regarding.Name == name {
				found = e
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events, none %s on %s %s", len(events.Items), reason, kind, name), nil
	})
	return found
}

// reconcileErrors sums controller-runtime's reconcile error counter of both controllers.
func reconcileErrors(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func expectNoNewReconcileErrors(t *testing.T, before float64) {
	t.Helper()
	if after := reconcileErrors(t); after != before {
		t.Errorf("reconcile errors went from %v to %v", before, after)
	}
}

// TestNoNodesSelected: a selector that matches no node is reported in the status and by a
// Warning Event, is never Drained; nothing is touched.
func TestNoNodesSelected(t *testing.T) {
	createNode(t, "nonodes-node", nil, false)
	createNM(t, "nonodes", true, true, "", "no-such-node")
	c := expectCondition(t, "nonodes", nodemaintv1alpha1.ConditionNodesSelected, metav1.ConditionFalse, nodemaintv1alpha1.ReasonNoNodesSelected)
	if c.Message != "the nodeSelector selects no node" {
		t.Errorf("message %q", c.Message)
	}
	expectWarning(t, "NodeMaintenance", "nonodes", nodemaintv1alpha1.ReasonNoNodesSelected)
	// Nothing is drained: a typo in a node name must not read as done.
	expectStatus(t, "nonodes", "", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Drained: "False"})
	if c := expectCondition(t, "nonodes", nodemaintv1alpha1.ConditionDrained, metav1.ConditionFalse, nodemaintv1alpha1.ReasonNoNodesSelected); c.Message != "the nodeSelector selects no node: nothing is drained" {
		t.Errorf("Drained message %q", c.Message)
	}
	expectNode(t, "nonodes-node", restored)

	// A node that appears later and matches is selected, and the condition says so.
	createNode(t, "no-such-node", nil, false)
	c = expectCondition(t, "nonodes", nodemaintv1alpha1.ConditionNodesSelected, metav1.ConditionTrue, nodemaintv1alpha1.ReasonNodesSelected)
	if c.Message != "the nodeSelector selects 1 nodes" {
		t.Errorf("message %q", c.Message)
	}
	expectNode(t, "no-such-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "nonodes=DrainComplete", Condition: "True/DrainComplete"})
	deleteNMAndWait(t, "nonodes")
	expectNode(t, "no-such-node", restored)
}

// TestAllNodesSelected: a selector that matches every node of the cluster is most likely a
// mistake: a Warning Event and the status say so. It is carried out all the same (it may be
// meant), here only as a plan.
func TestAllNodesSelected(t *testing.T) {
	ctx := context.Background()
	createNode(t, "allnodes-a", nil, false)
	createNode(t, "allnodes-b", nil, false)
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "allnodes"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "nodemaint.dev/test-none", Operator: corev1.NodeSelectorOpDoesNotExist}},
		}}}},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	c := expectCondition(t, "allnodes", nodemaintv1alpha1.ConditionNodesSelected, metav1.ConditionTrue, nodemaintv1alpha1.ReasonAllNodesSelected)
	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("the nodeSelector selects every node of the cluster (%d nodes)", len(nodes.Items)); c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	e := expectWarning(t, "NodeMaintenance", "allnodes", nodemaintv1alpha1.ReasonAllNodesSelected)
	if e.Note != c.Message {
		t.Errorf("Event says %q, condition %q", e.Note, c.Message)
	}
	expectNode(t, "allnodes-b", testutil.NodeView{PlannedTaint: true, Maintenances: "allnodes=Planning", Condition: "True/Planning"})
	deleteNMAndWait(t, "allnodes")
	expectNode(t, "allnodes-a", restored)
	expectNode(t, "allnodes-b", restored)
}

// TestNodeDeletedMidMaintenance: a selected node deleted during the drain drops out of the
// status; the maintenance completes on the nodes left, without reconcile errors.
func TestNodeDeletedMidMaintenance(t *testing.T) {
	ctx := context.Background()
	createNode(t, "nodedel-keep", nil, false)
	createNode(t, "nodedel-gone", nil, false)
	createPod(t, "nodedel-app-keep", "nodedel-keep")
	createPod(t, "nodedel-app-gone", "nodedel-gone")
	createNM(t, "nodedel", true, true, "", "nodedel-keep", "nodedel-gone")
	expectStatus(t, "nodedel", "nodedel-gone", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 2, Pending: 2, NodePending: 1, Drained: "False"})
	expectRequest(t, "nodedel-app-gone", "True/NodeMaintenance/")

	before := reconcileErrors(t)
	if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nodedel-gone"}}); err != nil {
		t.Fatal(err)
	}
	// No pod garbage collector runs here: the pod stays bound to the deleted node, and no longer
	// counts, as its node is not selected any more.
	expectStatus(t, "nodedel", "nodedel-gone", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 1, Pending: 1, Drained: "False"})
	eventually(t, "deleted node out of the status", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "nodedel"}, nm)
		_, listed := nm.Status.Nodes["nodedel-gone"]
		return !listed && len(nm.Status.Nodes) == 1, fmt.Sprintf("nodes %v", nm.Status.Nodes), err
	})
	deletePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nodedel-app-keep"}})
	expectStatus(t, "nodedel", "nodedel-keep", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 1, Drained: "True"})
	deleteNMAndWait(t, "nodedel")
	expectNode(t, "nodedel-keep", restored)
	expectRequest(t, "nodedel-app-gone", "True/NodeMaintenance/") // untouched: its node is gone
	expectNoNewReconcileErrors(t, before)
}

// TestPodDeletedMidEvacuation: a pod that vanishes while its owner evacuates it simply stops
// counting; the others go on, without reconcile errors.
func TestPodDeletedMidEvacuation(t *testing.T) {
	createNode(t, "poddel-node", nil, false)
	createPod(t, "poddel-a", "poddel-node")
	createPod(t, "poddel-b", "poddel-node")
	createNM(t, "poddel", true, true, "", "poddel-node")
	expectRequest(t, "poddel-a", "True/NodeMaintenance/")
	setPodCondition(t, "poddel-a", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Test"})
	expectStatus(t, "poddel", "poddel-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 1, Pending: 2, Evacuating: 1, NodePending: 2, NodeEvacuating: 1, Drained: "False"})

	before := reconcileErrors(t)
	deletePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "poddel-a"}})
	expectStatus(t, "poddel", "poddel-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 1, Pending: 1, NodePending: 1, Drained: "False"})
	eventually(t, "the deleted pod is no longer named", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "poddel"}, nm)
		var names []string
		total := int32(0)
		for _, b := range nm.Status.Nodes["poddel-node"].Blocked {
			names = append(names, b.Pods...)
			total += b.Count
		}
		return total == 1 && len(names) == 1 && names[0] == "default/poddel-b", fmt.Sprintf("blocked %+v", nm.Status.Nodes["poddel-node"].Blocked), err
	})
	deletePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "poddel-b"}})
	expectStatus(t, "poddel", "poddel-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 1, Drained: "True"})
	expectNoNewReconcileErrors(t, before)
	deleteNMAndWait(t, "poddel")
	expectNode(t, "poddel-node", restored)
}

// TestInvalidNodeSelector: a selector the API server accepts but that does not parse (Gt takes
// an integer) selects no node, and the status and a Warning Event say why.
func TestInvalidNodeSelector(t *testing.T) {
	createNode(t, "invalidsel-node", map[string]string{"rack": "7"}, false)
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "invalidsel"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpGt, Values: []string{"six"}}},
		}}}},
	}
	if err := k8s.Create(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	c := expectCondition(t, "invalidsel", nodemaintv1alpha1.ConditionNodesSelected, metav1.ConditionFalse, nodemaintv1alpha1.ReasonInvalidNodeSelector)
	if !strings.Contains(c.Message, `"six"`) {
		t.Errorf("the message does not quote the bad value: %q", c.Message)
	}
	expectWarning(t, "NodeMaintenance", "invalidsel", nodemaintv1alpha1.ReasonInvalidNodeSelector)
	expectNode(t, "invalidsel-node", restored)
	deleteNMAndWait(t, "invalidsel")
}
