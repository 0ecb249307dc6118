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
		if held.Annotations[karpenter] != "true" || held.Annotations[ca] != "true" || len(HeldAutoscalers(held)) != 2 {
			t.Fatalf("annotations %v; want both autoscalers held and recorded", held.Annotations)
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
		if held.Annotations[karpenter] != "true" || held.Annotations[ca] != "false" || len(HeldAutoscalers(held)) != 0 {
			t.Fatalf("annotations %v; want another writer's left alone and not recorded", held.Annotations)
		}
		released := decide(held, nil).Node
		if released.Annotations[karpenter] != "true" || released.Annotations[ca] != "false" {
			t.Fatalf("annotations %v after the maintenance; want another writer's as they were", released.Annotations)
		}
	})
	t.Run("a value changed during the maintenance stays", func(t *testing.T) {
		node := &corev1.Node{}
		node.Name = "n1"
		held := decide(node, deleting("kernel")).Node
		held.Annotations[karpenter] = "false"
		released := decide(held, nil).Node
		if released.Annotations[karpenter] != "false" || released.Annotations[ca] != "" {
			t.Fatalf("annotations %v; want karpenter's changed value kept, nodemaint's own removed", released.Annotations)
		}
	})
	t.Run("spec.autoscalers Ignore", func(t *testing.T) {
		node := &corev1.Node{}
		node.Name = "n1"
		nm := deleting("kernel")
		nm.Spec.Autoscalers = nodemaintv1alpha1.AutoscalerPolicyIgnore
		if d := decide(node, nm); d.Node.Annotations[karpenter] != "" || d.Node.Annotations[ca] != "" {
			t.Fatalf("annotations %v; want none", d.Node.Annotations)
		}
	})
	t.Run("a node Karpenter is removing is reported, not held", func(t *testing.T) {
		node := &corev1.Node{}
		node.Name = "n1"
		node.Spec.Taints = []corev1.Taint{{Key: nodemaintv1alpha1.KarpenterDisruptedTaint, Effect: corev1.TaintEffectNoSchedule}}
		d := decide(node, deleting("kernel"))
		if d.Node.Annotations[karpenter] != "" || d.Node.Annotations[ca] != "" || d.Report.RemovedBy != nodemaintv1alpha1.RemovedByKarpenter {
			t.Fatalf("annotations %v, removed by %q; want none, and Karpenter reported", d.Node.Annotations, d.Report.RemovedBy)
		}
	})
}
