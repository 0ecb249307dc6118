package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

func setReady(t *testing.T, node string, status corev1.ConditionStatus, since time.Time) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	orig := n.DeepCopy()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(since), LastHeartbeatTime: metav1.NewTime(since)}
	replaced := false
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i], replaced = ready, true
		}
	}
	if !replaced {
		n.Status.Conditions = append(n.Status.Conditions, ready)
	}
	if err := k8s.Status().Patch(ctx, n, client.StrategicMergeFrom(orig)); err != nil {
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

// TestOutOfService: a drained node that is NotReady past the grace period with a pod stuck
// terminating gets the out-of-service taint; it goes when the node is Ready again. A Ready node
// never gets it, nor a node of a maintenance that did not opt in.
func TestOutOfService(t *testing.T) {
	ctx := context.Background()
	createNode(t, "oos-node", nil, false)
	createNode(t, "oos-ready", nil, false)
	createNode(t, "oos-optout", nil, false)
	setReady(t, "oos-node", corev1.ConditionTrue, time.Now())
	setReady(t, "oos-ready", corev1.ConditionTrue, time.Now())
	setReady(t, "oos-optout", corev1.ConditionTrue, time.Now())
	for _, n := range []string{"oos-node", "oos-ready", "oos-optout"} {
		createPod(t, n+"-app", n) // bare: evicted at once, then stuck terminating without a kubelet
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "oos"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor("oos-node", "oos-ready"), Cordon: true, Drain: true,
			Shutdown: &nodemaintv1alpha1.ShutdownSpec{ApplyOutOfServiceTaint: true, NotReadyGracePeriod: &nodemaintv1alpha1.Duration{Duration: 2 * time.Second}},
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	createDrainNM(t, "oos-optout", time.Second, "oos-optout")
	for _, n := range []string{"oos-node", "oos-ready", "oos-optout"} {
		expectEvicted(t, n+"-app")
	}

	// The node is shut down: NotReady, but only just.
	setReady(t, "oos-node", corev1.ConditionFalse, time.Now())
	setReady(t, "oos-optout", corev1.ConditionFalse, time.Now().Add(-time.Hour))
	if got, err := hasOutOfServiceTaint(ctx, "oos-node"); err != nil || got {
		t.Fatalf("tainted before the grace period: %v %v", got, err)
	}
	expectOutOfService(t, "oos-node", true)
	eventually(t, "status reports out-of-service", func(ctx context.Context) (bool, string, error) {
		obj := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "oos"}, obj)
		return obj.Status.Nodes["oos-node"].OutOfService, fmt.Sprintf("%+v", obj.Status.Nodes), err
	})
	for _, n := range []string{"oos-ready", "oos-optout"} {
		if got, err := hasOutOfServiceTaint(ctx, n); err != nil || got {
			t.Errorf("node %s tainted out-of-service: %v %v", n, got, err)
		}
	}

	// Back: Ready again, the taint goes.
	setReady(t, "oos-node", corev1.ConditionTrue, time.Now())
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
		return c != nil && c.Reason == "VolumesAttached" && obj.Status.Nodes["vol-node"].VolumesAttached == 1, fmt.Sprintf("%+v %+v", c, obj.Status.Nodes), err
	})
	if err := k8s.Delete(ctx, va); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "vol", "vol-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 1, Drained: "True"})
}

// TestDrainTimeout: past drainTimeout the maintenance reports DrainTimedOut naming what is left;
// with drainTimeoutAction Delete the pods left are deleted, PodDisruptionBudget or not.
func TestDrainTimeout(t *testing.T) {
	ctx := context.Background()
	createNode(t, "deadline-node", nil, false)
	createPod(t, "deadline-held", "deadline-node", ownedByReplicaSet)
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "deadline"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor("deadline-node"), Cordon: true, Drain: true,
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Hour},
			DrainTimeout:              &nodemaintv1alpha1.Duration{Duration: 2 * time.Hour},
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	// drainTimeout with Delete is at least the response timeout (the API server refuses less):
	// rather than wait 2h, the admin moves the drain's start 3h back; the controller keeps an
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
	notEvicted(t, "deadline-held")

	orig := nm.DeepCopy()
	nm.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionDelete
	if err := k8s.Patch(ctx, nm, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	expectEvicted(t, "deadline-held")
}
