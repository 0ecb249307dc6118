package controller_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

func expectNode(t *testing.T, name string, want testutil.NodeView) {
	t.Helper()
	eventually(t, "node "+name, func(ctx context.Context) (bool, string, error) {
		got, err := testutil.ViewNode(ctx, k8s, name)
		return got == want, fmt.Sprintf("got %+v, want %+v", got, want), err
	})
}

func requestOf(ctx context.Context, name string) (string, error) {
	pod := &corev1.Pod{}
	err := k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, pod)
	return testutil.Request(pod), err
}

func expectRequest(t *testing.T, pod, want string) {
	t.Helper()
	eventually(t, "EvacuationRequest of "+pod, func(ctx context.Context) (bool, string, error) {
		got, err := requestOf(ctx, pod)
		return got == want, fmt.Sprintf("got %q, want %q", got, want), err
	})
}

func expectStatus(t *testing.T, name, node string, want testutil.StatusView) {
	t.Helper()
	want.UpToDate = true
	eventually(t, "status of "+name, func(ctx context.Context) (bool, string, error) {
		got, err := testutil.ViewStatus(ctx, k8s, name, node)
		return got == want, fmt.Sprintf("got %+v, want %+v", got, want), err
	})
}

func daemonSetPod(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds-uid", Controller: ptr.To(true)}}
}

func mirrorPod(p *corev1.Pod) {
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
}

func setPodCondition(t *testing.T, name string, cond corev1.PodCondition) {
	t.Helper()
	testutil.SetPodCondition(t, k8s, name, cond)
}

var restored = testutil.NodeView{}

// TestPhases walks one NodeMaintenance through Planning, Cordon, Drain, Drain Complete and
// Maintenance Complete, checking the node, the pods and the status at every step.
func TestPhases(t *testing.T) {
	createNode(t, "phases-node", nil, false)
	createNode(t, "phases-other", nil, false)
	createPod(t, "phases-app", "phases-node")
	createPod(t, "phases-ds", "phases-node", daemonSetPod)
	createPod(t, "phases-mirror", "phases-node", mirrorPod)
	createPod(t, "phases-elsewhere", "phases-other")

	createNM(t, "phases", false, false, "kernel upgrade", "phases-node")
	expectNode(t, "phases-node", testutil.NodeView{PlannedTaint: true, Maintenances: "phases=Planning", Condition: "True/Planning"})
	expectStatus(t, "phases", "phases-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhasePlanning, Selected: 1, Pending: 1, NodePending: 1, Drained: "False"})
	expectRequest(t, "phases-app", "")

	setNM(t, "phases", true, false)
	expectNode(t, "phases-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "phases=Cordon", Condition: "True/Cordon"})
	expectStatus(t, "phases", "phases-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseCordon, Selected: 1, Pending: 1, NodePending: 1, Drained: "False"})
	expectRequest(t, "phases-app", "")

	setNM(t, "phases", true, true)
	expectRequest(t, "phases-app", "True/NodeMaintenance/kernel upgrade")
	expectNode(t, "phases-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "phases=Drain", Condition: "True/Drain"})
	expectStatus(t, "phases", "phases-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 1, Pending: 1, NodePending: 1, Drained: "False"})
	expectRequest(t, "phases-ds", "")
	expectRequest(t, "phases-mirror", "")
	expectRequest(t, "phases-elsewhere", "")
	expectNode(t, "phases-other", restored)

	// The owner accepts: the pod counts as evacuating.
	setPodCondition(t, "phases-app", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Test"})
	expectStatus(t, "phases", "phases-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 1, Pending: 1, Evacuating: 1, NodePending: 1, NodeEvacuating: 1, Drained: "False"})

	// Someone else removes the pod: the drain is complete.
	deletePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "phases-app"}})
	expectStatus(t, "phases", "phases-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 1, Drained: "True"})
	expectNode(t, "phases-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "phases=DrainComplete", Condition: "True/DrainComplete"})

	setNM(t, "phases", false, false)
	expectStatus(t, "phases", "phases-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseMaintenanceComplete, Selected: 1, Drained: "False"})
	expectNode(t, "phases-node", restored)

	deleteNMAndWait(t, "phases")
	expectNode(t, "phases-node", restored)
}

// TestOverlappingMaintenances: the union of two maintenances holds the node; the last one out
// restores it.
func TestOverlappingMaintenances(t *testing.T) {
	createNode(t, "overlap-node", nil, false)
	createPod(t, "overlap-app", "overlap-node")
	createNM(t, "overlap-a", true, true, "firmware", "overlap-node")
	createNM(t, "overlap-b", true, true, "kernel", "overlap-node")
	expectNode(t, "overlap-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "overlap-a=Drain,overlap-b=Drain", Condition: "True/Drain"})
	expectRequest(t, "overlap-app", "True/NodeMaintenance/firmware")

	deleteNMAndWait(t, "overlap-a")
	expectNode(t, "overlap-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "overlap-b=Drain", Condition: "True/Drain"})
	expectRequest(t, "overlap-app", "True/NodeMaintenance/kernel")

	deleteNMAndWait(t, "overlap-b")
	expectNode(t, "overlap-node", restored)
	expectRequest(t, "overlap-app", "")
}

// TestPreCordonedNodeStaysCordoned: nodemaint restores only what it changed.
func TestPreCordonedNodeStaysCordoned(t *testing.T) {
	createNode(t, "precordoned-node", nil, true)
	createNM(t, "precordoned", true, false, "", "precordoned-node")
	expectNode(t, "precordoned-node", testutil.NodeView{Unschedulable: true, Maintenances: "precordoned=Cordon", Condition: "True/Cordon"})
	deleteNMAndWait(t, "precordoned")
	expectNode(t, "precordoned-node", testutil.NodeView{Unschedulable: true})
}

// TestOtherRequesterUntouched: a True EvacuationRequest of another requester is neither
// overwritten nor withdrawn.
func TestOtherRequesterUntouched(t *testing.T) {
	createNode(t, "other-node", nil, false)
	createPod(t, "other-app", "other-node")
	createPod(t, "other-mine", "other-node")
	setPodCondition(t, "other-app", corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: "Descheduler", Message: "rebalancing"})
	createNM(t, "other", true, true, "maintenance", "other-node")
	expectRequest(t, "other-mine", "True/NodeMaintenance/maintenance")
	expectRequest(t, "other-app", "True/Descheduler/rebalancing")
	deleteNMAndWait(t, "other")
	expectRequest(t, "other-mine", "")
	expectRequest(t, "other-app", "True/Descheduler/rebalancing")
}

// TestManualUncordonReverted: uncordoning a node under maintenance is undone, with Warning Events.
func TestManualUncordonReverted(t *testing.T) {
	ctx := context.Background()
	createNode(t, "uncordon-node", nil, false)
	createNM(t, "uncordon", true, false, "", "uncordon-node")
	expectNode(t, "uncordon-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "uncordon=Cordon", Condition: "True/Cordon"})

	node := &corev1.Node{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: "uncordon-node"}, node); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`))); err != nil {
		t.Fatal(err)
	}
	expectNode(t, "uncordon-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "uncordon=Cordon", Condition: "True/Cordon"})
	for _, kind := range []string{"Node", "NodeMaintenance"} {
		eventually(t, "Warning Event on the "+kind, func(ctx context.Context) (bool, string, error) {
			var events eventsv1.EventList
			if err := k8s.List(ctx, &events); err != nil {
				return false, "", err
			}
			for _, e := range events.Items {
				if e.Reason == "UncordonReverted" && e.Type == corev1.EventTypeWarning && e.Regarding.Kind == kind {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d events, none UncordonReverted on a %s", len(events.Items), kind), nil
		})
	}
	deleteNMAndWait(t, "uncordon")
	expectNode(t, "uncordon-node", restored)
}

// TestSelectorChange: a node that stops being selected is restored.
func TestSelectorChange(t *testing.T) {
	ctx := context.Background()
	createNode(t, "sel-a", nil, false)
	createNode(t, "sel-b", nil, false)
	createPod(t, "sel-app", "sel-a")
	nm := createNM(t, "sel", true, true, "", "sel-a")
	expectRequest(t, "sel-app", "True/NodeMaintenance/")
	orig := nm.DeepCopy()
	nm.Spec.NodeSelector = testutil.NodeSelectorFor("sel-b")
	if err := k8s.Patch(ctx, nm, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	expectNode(t, "sel-a", restored)
	expectRequest(t, "sel-app", "")
	expectNode(t, "sel-b", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "sel=DrainComplete", Condition: "True/DrainComplete"})
	deleteNMAndWait(t, "sel")
	expectNode(t, "sel-b", restored)
}
