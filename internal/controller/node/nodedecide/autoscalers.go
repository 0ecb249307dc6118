package nodedecide

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// AutoscalerAnnotations are the annotations that keep Karpenter and the cluster autoscaler from
// removing a node, in the order nodemaint records them.
var AutoscalerAnnotations = []string{
	nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation,
	nodemaintv1alpha1.ClusterAutoscalerScaleDownDisabledAnnotation,
}

// RemovedBy names the autoscaler already removing the node, as its taint says
// (nodemaintv1alpha1.RemovedByKarpenter or RemovedByClusterAutoscaler), or "".
func RemovedBy(node *corev1.Node) string {
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case nodemaintv1alpha1.KarpenterDisruptedTaint:
			return nodemaintv1alpha1.RemovedByKarpenter
		case nodemaintv1alpha1.ClusterAutoscalerToBeDeletedTaint:
			return nodemaintv1alpha1.RemovedByClusterAutoscaler
		}
	}
	return ""
}

// HeldAutoscalers are the autoscaler annotations nodemaint set on the node (its record,
// nodemaintv1alpha1.AutoscalersHeldAnnotation).
func HeldAutoscalers(node *corev1.Node) []string {
	var out []string
	for _, k := range strings.Split(node.Annotations[nodemaintv1alpha1.AutoscalersHeldAnnotation], ",") {
		if slices.Contains(AutoscalerAnnotations, k) {
			out = append(out, k)
		}
	}
	return out
}

// holdAutoscalers sets on want, a copy of the node, the autoscaler annotations when hold, and
// removes those nodemaint set when not. An annotation is set only where no one set it, and
// recorded as nodemaint's; a recorded one is removed only while it still says "true", so another
// writer's value stays. A node an autoscaler is already removing gets no new annotation: nodemaint
// reports it rather than fight it.
func holdAutoscalers(want *corev1.Node, hold bool) {
	held := HeldAutoscalers(want)
	var record []string
	for _, k := range AutoscalerAnnotations {
		_, present := want.Annotations[k]
		ours := slices.Contains(held, k)
		switch {
		case hold && ours && present:
			record = append(record, k)
		case hold && !present && RemovedBy(want) == "":
			setAnnotation(want, k, "true")
			record = append(record, k)
		case !hold && ours && want.Annotations[k] == "true":
			delete(want.Annotations, k)
		}
	}
	if len(record) > 0 {
		setAnnotation(want, nodemaintv1alpha1.AutoscalersHeldAnnotation, strings.Join(record, ","))
	} else {
		delete(want.Annotations, nodemaintv1alpha1.AutoscalersHeldAnnotation)
	}
}
