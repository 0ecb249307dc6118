package nodedecide

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// A maintenance that cordons or drains a node keeps Karpenter and the cluster autoscaler from
// removing it, and gives the node back as it found it.
func TestAutoscalersHeldAndRestored(t *testing.T) {
	karpenter, ca := nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation, nodemaintv1alpha1.ClusterAutoscalerScaleDownDisabledAnnotation
	decide := func(node *corev1.Node, nm *nodemaintv1alpha1.NodeMaintenance) Decision {
		var nms []*nodemaintv1alpha1.NodeMaintenance
		if nm != nil {
			nms = append(nms, nm)
		}
		return Decide(observeClassed(node, nil, false, nil, nms...), t0)
	}
	t.Run("held while draining, given back once released", func(t *testing.T) {
		node := &corev1.Node{}
		node.Name = "n1"
		held := decide(node, deleting("kernel")).Node
		wantAnnotations(t, "while draining", held.Annotations, map[string]string{karpenter: "true", ca: "true"})
		if got := HeldAutoscalers(held); len(got) != 2 {
			t.Fatalf("held autoscalers recorded %v; want both", got)
		}
		if d := decide(held, deleting("kernel")); d.NodeChanged {
			t.Fatalf("held again: %v", d.Node.Annotations)
		}
		released := decide(held, nil).Node
		for _, k := range []string{karpenter, ca, nodemaintv1alpha1.AutoscalersHeldAnnotation} {
			if _, ok := released.Annotations[k]; ok {
				t.Fatalf("%s left after the maintenance: %v", k, released.Annotations)
			}
		}
	})
	t.Run("another writer's values stay", func(t *testing.T) {
		node := &corev1.Node{}
		node.Name = "n1"
		node.Annotations = map[string]string{karpenter: "true", ca: "false"}
		held := decide(node, deleting("kernel")).Node
		wantAnnotations(t, "while draining (another writer's left alone)", held.Annotations, map[string]string{karpenter: "true", ca: "false"})
		if got := HeldAutoscalers(held); len(got) != 0 {
			t.Fatalf("held autoscalers recorded %v; want none (another writer's)", got)
		}
		released := decide(held, nil).Node
		wantAnnotations(t, "after the maintenance (another writer's as they were)", released.Annotations, map[string]string{karpenter: "true", ca: "false"})
	})
	t.Run("a value changed during the maintenance stays", func(t *testing.T) {
		node := &corev1.Node{}
		node.Name = "n1"
		held := decide(node, deleting("kernel")).Node
		held.Annotations[karpenter] = "false"
		released := decide(held, nil).Node
		wantAnnotations(t, "after the maintenance (karpenter's changed value kept, nodemaint's own removed)", released.Annotations, map[string]string{karpenter: "false", ca: ""})
	})
	t.Run("spec.autoscalers Ignore", func(t *testing.T) {
		node := &corev1.Node{}
		node.Name = "n1"
		nm := deleting("kernel")
		nm.Spec.Autoscalers = nodemaintv1alpha1.AutoscalerPolicyIgnore
		d := decide(node, nm)
		wantAnnotations(t, "under Ignore", d.Node.Annotations, map[string]string{karpenter: "", ca: ""})
	})
	t.Run("a node Karpenter is removing is reported, not held", func(t *testing.T) {
		node := &corev1.Node{}
		node.Name = "n1"
		node.Spec.Taints = []corev1.Taint{{Key: nodemaintv1alpha1.KarpenterDisruptedTaint, Effect: corev1.TaintEffectNoSchedule}}
		d := decide(node, deleting("kernel"))
		wantAnnotations(t, "on a node Karpenter removes", d.Node.Annotations, map[string]string{karpenter: "", ca: ""})
		if d.Report.RemovedBy != nodemaintv1alpha1.RemovedByKarpenter {
			t.Fatalf("removed by %q; want %q reported", d.Report.RemovedBy, nodemaintv1alpha1.RemovedByKarpenter)
		}
	})
}

// wantAnnotations checks each wanted annotation ("" for absent or empty) on its own, and stops the
// test if any differs.
func wantAnnotations(t *testing.T, when string, got, want map[string]string) {
	t.Helper()
	failed := false
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: annotation %s = %q; want %q", when, k, got[k], v)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
}
