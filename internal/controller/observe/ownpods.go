package observe

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// OwnPods selects nodemaint-controller's own pods: nodemaint asks them to move like any other pod
// (its Deployment surges a replacement first), but never evicts or deletes them, so that a drain
// never takes down the controller that runs it, and drainTimeoutAction Delete never deletes it.
type OwnPods struct {
	// Namespace is where the controller runs.
	Namespace string
	// Selector selects its pods there (the Deployment's pod labels).
	Selector labels.Selector
}

// Match reports whether the pod is one of the controller's own. A nil OwnPods matches none.
func (o *OwnPods) Match(pod *corev1.Pod) bool {
	return o != nil && o.Selector != nil && !o.Selector.Empty() &&
		pod.Namespace == o.Namespace && o.Selector.Matches(labels.Set(pod.Labels))
}
