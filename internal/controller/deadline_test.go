package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// A rollout that cordoned its node first (drain: false) for an hour, with drainTimeout 5m and
// drainTimeoutAction Delete, then drain: true: the node's drain starts then, recorded in the node;
// its pod is asked and not deleted, although the node's turn is far older than drainTimeout.
func TestRolloutCordonFirstThenDrainDeletesNothingYet(t *testing.T) {
	ctx := context.Background()
	const node, name = "deadline-a", "deadline-cordon-first"
	readyNode(t, node, nil)
	pod := createPod(t, "deadline-web", node, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: ptr.To(true)}}
	})
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: false, Reason: "kernel upgrade",
			DrainTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Minute}, DrainTimeoutAction: nodemaintv1alpha1.DrainTimeoutActionDelete,
			Rollout: &nodemaintv1alpha1.RolloutSpec{Release: nodemaintv1alpha1.ReleaseDrained},
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })

	eventually(t, "the node cordoned in its turn", func(ctx context.Context) (bool, string, error) {
		got, err := getNM(ctx, name)
		if err != nil || got.Status.Rollout == nil || len(got.Status.Rollout.InTurn) != 1 {
			return false, "not in turn yet", err
		}
		n := &corev1.Node{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
			return false, "", err
		}
		return n.Spec.Unschedulable, "not cordoned", nil
	})
	// The turn started an hour ago, as if the node had been cordoned that long.
	got, err := getNM(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	orig := got.DeepCopy()
	got.Status.Rollout.InTurn[0].Since = metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	if err := k8s.Status().Patch(ctx, got, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the turn's start an hour ago", func(ctx context.Context) (bool, string, error) {
		got, err := getNM(ctx, name)
		if err != nil || got.Status.Rollout == nil || len(got.Status.Rollout.InTurn) != 1 {
			return false, "", err
		}
		since := got.Status.Rollout.InTurn[0].Since
		return time.Since(since.Time) > 30*time.Minute, fmt.Sprintf("since %v", since), nil
	})

	setNM(t, name, true, true)
	var generation int64
	eventually(t, "the node's drain start recorded and the pod asked", func(ctx context.Context) (bool, string, error) {
		got, err := getNM(ctx, name)
		if err != nil {
			return false, "", err
		}
		generation = got.Generation
		n := &corev1.Node{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
			return false, "", err
		}
		r, ok := maintenance.ParseDrainStarts(n.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])[name]
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return false, "", err
		}
		return ok && r.Generation == generation && evacuation.RequestedBy(p, evacuation.ReasonNodeMaintenance),
			fmt.Sprintf("record %+v, pod conditions %+v", r, p.Status.Conditions), nil
	})
	// The controller has looked at the node with drain true (it recorded the start and asked);
	// once it looked again (a drain under way is looked at every 5s), the pod must be neither
	// deleted nor evicted: not before its response timeout, nor before the node's own drainTimeout.
	looked := time.Now()
	expectReconciled(t, "node", node, looked, "")
	p := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
		t.Fatalf("pod gone right after drain: true: %v", err)
	}
	if p.DeletionTimestamp != nil {
		t.Fatalf("pod deleted right after drain: true, before its response timeout")
	}
	n := &corev1.Node{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	if r := maintenance.ParseDrainStarts(n.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])[name]; time.Since(r.Start) > time.Minute {
		t.Fatalf("node's drain start %v: not when drain: true arrived", r.Start)
	}

	// The maintenance ends: the record goes with the rest.
	deleteNMAndWait(t, name)
	eventually(t, "the node's drain start removed", func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
			return false, "", err
		}
		_, ok := n.Annotations[nodemaintv1alpha1.DrainStartedAnnotation]
		return !ok, fmt.Sprintf("annotations %v", n.Annotations), nil
	})
}
