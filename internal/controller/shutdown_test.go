package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

func setReady(t *testing.T, node string, status corev1.ConditionStatus, since time.Time) {
	t.Helper()
	patchNodeStatus(t, node, func(n *corev1.Node) {
		ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(since), LastHeartbeatTime: metav1.NewTime(since)}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i] = ready
				return
			}
		}
		n.Status.Conditions = append(n.Status.Conditions, ready)
	})
}

// patchNodeStatus changes the node's status, as its kubelet would, with a strategic merge patch.
func patchNodeStatus(t *testing.T, node string, mutate func(*corev1.Node)) {
	t.Helper()
	patchNodeWith(t, node, func(ctx context.Context, n *corev1.Node, p client.Patch) error { return k8s.Status().Patch(ctx, n, p) }, mutate)
}

// patchNode changes the node's metadata or spec with a strategic merge patch.
func patchNode(t *testing.T, node string, mutate func(*corev1.Node)) {
	t.Helper()
	patchNodeWith(t, node, func(ctx context.Context, n *corev1.Node, p client.Patch) error { return k8s.Patch(ctx, n, p) }, mutate)
}

func patchNodeWith(t *testing.T, node string, patch func(context.Context, *corev1.Node, client.Patch) error, mutate func(*corev1.Node)) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	orig := n.DeepCopy()
	mutate(n)
	if err := patch(ctx, n, client.StrategicMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func hasOutOfServiceTaint(ctx context.Context, node string) (bool, error) {
	n := &corev1.Node{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
		return false, err
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeOutOfService && taint.Value == "nodeshutdown" && taint.Effect == corev1.TaintEffectNoExecute {
			return true, nil
		}
	}
	return false, nil
}

func expectOutOfService(t *testing.T, node string, want bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("out-of-service taint on %s: %v", node, want), func(ctx context.Context) (bool, string, error) {
		got, err := hasOutOfServiceTaint(ctx, node)
		return got == want, fmt.Sprint(got), err
	})
}

// setBootID sets the node's status.nodeInfo.bootID, as its kubelet reports it.
func setBootID(t *testing.T, node, bootID string) {
	t.Helper()
	patchNodeStatus(t, node, func(n *corev1.Node) { n.Status.NodeInfo.BootID = bootID })
}

// TestOutOfService: a drained node that is NotReady past the grace period with a pod stuck
// terminating gets the out-of-service taint only with positive evidence that it was shut down:
// without it (a network partition looks the same) it is never tainted and a Warning Event says
// what is missing; a confirmation of an earlier boot does not count; the confirmation of the
// current boot, or the cloud provider's shutdown taint, does. nodemaint's taint stays while the
// node is Ready with a pod still stuck, and goes once nothing is. A Ready node never gets it, nor
// a node of a maintenance that did not opt in.
func TestOutOfService(t *testing.T) {
	ctx := context.Background()
	createNode(t, "oos-node", nil, false)
	createNode(t, "oos-cloud", nil, false)
	createNode(t, "oos-ready", nil, false)
	createNode(t, "oos-optout", nil, false)
	for _, n := range []string{"oos-node", "oos-cloud", "oos-ready", "oos-optout"} {
		setReady(t, n, corev1.ConditionTrue, time.Now())
		setBootID(t, n, n+"-boot-2")
		createPod(t, n+"-app", n) // evicted after 1s, then stuck terminating without a kubelet
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "oos"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor("oos-node", "oos-cloud", "oos-ready"), Cordon: true, Drain: true,
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Second},
			Shutdown:                  &nodemaintv1alpha1.ShutdownSpec{ApplyOutOfServiceTaint: true, NotReadyGracePeriod: &nodemaintv1alpha1.Duration{Duration: 2 * time.Second}},
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	createDrainNM(t, "oos-optout", time.Second, "oos-optout")
	for _, n := range []string{"oos-node", "oos-cloud", "oos-ready", "oos-optout"} {
		expectEvicted(t, n+"-app")
	}

	// oos-node goes NotReady (shut down, or only cut off: nothing says which yet), with a
	// confirmation left from its previous boot.
	patchNode(t, "oos-node", func(n *corev1.Node) {
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, nodemaintv1alpha1.ShutdownConfirmedAnnotation, "oos-node-boot-1")
	})
	setReady(t, "oos-node", corev1.ConditionFalse, time.Now().Add(-time.Hour))
	setReady(t, "oos-optout", corev1.ConditionFalse, time.Now().Add(-time.Hour))
	e := expectWarning(t, "Node", "oos-node", "ShutdownNotConfirmed")
	if !strings.Contains(e.Note, nodemaintv1alpha1.ShutdownConfirmedAnnotation) {
		t.Errorf("the Event does not name the annotation %s that confirms the shutdown: %q", nodemaintv1alpha1.ShutdownConfirmedAnnotation, e.Note)
	}
	if !strings.Contains(e.Note, "oos-node-boot-2") {
		t.Errorf("the Event does not name the value oos-node-boot-2 that confirms the shutdown: %q", e.Note)
	}
	if got, err := hasOutOfServiceTaint(ctx, "oos-node"); err != nil || got {
		t.Fatalf("tainted without evidence of shutdown: %v %v", got, err)
	}

	// The automation that shut it down confirms it, for the current boot.
	patchNode(t, "oos-node", func(n *corev1.Node) {
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, nodemaintv1alpha1.ShutdownConfirmedAnnotation, "oos-node-boot-2")
	})
	expectOutOfService(t, "oos-node", true)
	eventually(t, "status reports out-of-service", func(ctx context.Context) (bool, string, error) {
		obj := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "oos"}, obj)
		return obj.Status.Nodes["oos-node"].OutOfService, fmt.Sprintf("%+v", obj.Status.Nodes), err
	})

	// The cloud provider's shutdown taint is evidence too.
	patchNode(t, "oos-cloud", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodemaintv1alpha1.CloudProviderShutdownTaint, Effect: corev1.TaintEffectNoSchedule})
	})
	setReady(t, "oos-cloud", corev1.ConditionFalse, time.Now().Add(-time.Hour))
	expectOutOfService(t, "oos-cloud", true)

	for _, n := range []string{"oos-ready", "oos-optout"} {
		if got, err := hasOutOfServiceTaint(ctx, n); err != nil || got {
			t.Errorf("node %s tainted out-of-service: %v %v", n, got, err)
		}
	}

	// Back, Ready again, with the pod still stuck terminating: the taint stays until it is gone.
	setBootID(t, "oos-node", "oos-node-boot-3")
	setReady(t, "oos-node", corev1.ConditionTrue, time.Now())
	// Keeping the taint writes nothing. Someone uncordons the node by hand: the node reconciler
	// cordons it again, in a write decided from the node as it is since (Ready), which would also
	// have removed the taint.
	patchNode(t, "oos-node", func(n *corev1.Node) { n.Spec.Unschedulable = false })
	eventually(t, "oos-node cordoned again", func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "oos-node"}, n)
		return n.Spec.Unschedulable, "", err
	})
	if got, err := hasOutOfServiceTaint(ctx, "oos-node"); err != nil || !got {
		t.Fatalf("taint removed while a pod is still stuck terminating: %v %v", got, err)
	}
	pod, err := getPod(ctx, "oos-node-app")
	if err != nil {
		t.Fatal(err)
	}
	deletePod(pod)
	expectOutOfService(t, "oos-node", false)
}

// TestVolumesDetach: the drain completes only once the volumes of drained pods are detached.
func TestVolumesDetach(t *testing.T) {
	ctx := context.Background()
	createNode(t, "vol-node", nil, false)
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "vol-data"},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "csi.example.com", NodeName: "vol-node",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-data")},
		},
	}
	if err := k8s.Create(ctx, va); err != nil {
		t.Fatal(err)
	}
	createDrainNM(t, "vol", time.Second, "vol-node")
	eventually(t, "drain waits for the volume", func(ctx context.Context) (bool, string, error) {
		obj := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "vol"}, obj)
		c := meta.FindStatusCondition(obj.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
		return c != nil && c.Reason == nodemaintv1alpha1.ReasonVolumesAttached && obj.Status.Nodes["vol-node"].VolumesAttached == 1, fmt.Sprintf("%+v %+v", c, obj.Status.Nodes), err
	})
	if err := k8s.Delete(ctx, va); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "vol", "vol-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 1, Drained: "True"})
}

// TestDrainTimeout: past drainTimeout the maintenance reports DrainTimedOut naming what is left;
// with drainTimeoutAction Delete the pods left are deleted, PodDisruptionBudget or not, except
// nodemaint-controller's own, once the node's own drain ran drainTimeout (the node's record,
// restarted by the change to Delete) and each pod was asked its response timeout before.
func TestDrainTimeout(t *testing.T) {
	ctx := context.Background()
	createNode(t, "deadline-node", nil, false)
	held := createPod(t, "deadline-held", "deadline-node", ownedByReplicaSet, withLabels(map[string]string{"app": "deadline-held"}))
	createPod(t, "deadline-controller", "deadline-node", ownedByReplicaSet, withLabels(ownPodLabels))
	// A budget that allows nothing holds the pod: evictions (after the 1s response timeout)
	// are refused, as in a real drain that times out.
	held.Status.Phase = corev1.PodRunning
	held.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := k8s.Status().Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "deadline-guard"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "deadline-held"}}},
	}
	if err := k8s.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pdb) })
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "deadline"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor("deadline-node"), Cordon: true, Drain: true,
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Second},
			DrainTimeout:              &nodemaintv1alpha1.Duration{Duration: 2 * time.Hour},
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	// Rather than wait 2h, the admin moves the drain's start 3h back; the controller keeps an
	// existing drainStartTime.
	eventually(t, "drainStartTime", func(ctx context.Context) (bool, string, error) {
		err := k8s.Get(ctx, types.NamespacedName{Name: "deadline"}, nm)
		return nm.Status.DrainStartTime != nil, fmt.Sprintf("%+v", nm.Status), err
	})
	started := nm.DeepCopy()
	nm.Status.DrainStartTime = &metav1.Time{Time: nm.Status.DrainStartTime.Add(-3 * time.Hour)}
	if err := k8s.Status().Patch(ctx, nm, client.MergeFrom(started)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "DrainTimedOut", func(ctx context.Context) (bool, string, error) {
		obj := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "deadline"}, obj)
		c := meta.FindStatusCondition(obj.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "default/deadline-held"), fmt.Sprintf("%+v", c), err
	})
	expectBlocked(t, "deadline", "deadline-node", "deadline-held", nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, "deadline-guard")
	notEvicted(t, "deadline-held")

	orig := nm.DeepCopy()
	nm.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionDelete
	if err := k8s.Patch(ctx, nm, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	// The change restarts the node's drain (a new generation): nothing is deleted before that
	// drain ran drainTimeout. The admin moves that start 3h back too.
	node := &corev1.Node{}
	eventually(t, "the node's drain start recorded for the new generation", func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Name: "deadline-node"}, node); err != nil {
			return false, "", err
		}
		r := maintenance.ParseDrainStarts(node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])["deadline"]
		return r.Generation == nm.Generation, fmt.Sprintf("record %+v, generation %d", r, nm.Generation), nil
	})
	notEvicted(t, "deadline-held")
	starts := maintenance.ParseDrainStarts(node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])
	r := starts["deadline"]
	r.Start = r.Start.Add(-3 * time.Hour)
	starts["deadline"] = r
	before := node.DeepCopy()
	node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation] = maintenance.FormatDrainStarts(starts)
	if err := k8s.Patch(ctx, node, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	expectEvicted(t, "deadline-held")
	// nodemaint-controller's own pod is never deleted, not even past drainTimeout with Delete.
	expectBlocked(t, "deadline", "deadline-node", "deadline-controller", nodemaintv1alpha1.BlockedReasonProtected, "never evicted or deleted")
	notEvicted(t, "deadline-controller")
}
