package nodedecide

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// OutOfServiceTaint is KEP-2268's taint: Kubernetes' pod GC and attach-detach controller then
// fail the node's pods and volumes over.
var OutOfServiceTaint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// readyCondition returns the node's Ready condition, or nil.
func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	c := readyCondition(node)
	return c != nil && c.Status == corev1.ConditionTrue
}

// outOfService decides the out-of-service taint of a node (opt-in, KEP-2268). It is wanted when a
// maintenance that drains the node asked for it, pods are stuck terminating on it, the node has
// been NotReady for the grace period, and there is positive evidence that it was shut down (see
// shutdownEvidence): NotReady alone may be a network partition, with the pods still running, and
// failing them over would run a StatefulSet's pod twice. Once applied, nodemaint's taint stays until
// the node is Ready again and no pod is stuck terminating on it, whether or not a maintenance
// still wants it; a taint someone else applied is never touched. A Ready node never gets it. It
// returns whether the taint should be there, when to look again, and whether only the evidence of
// the shutdown is missing (for an Event).
func outOfService(node *corev1.Node, pods []*corev1.Pod, intent maintenance.NodeIntent, now time.Time) (want bool, recheck time.Duration, unconfirmed bool) {
	stuck := false
	for _, pod := range pods {
		stuck = stuck || pod.DeletionTimestamp != nil
	}
	if node.Annotations[nodemaintv1alpha1.OutOfServiceAnnotation] != "" {
		return !NodeReady(node) || stuck, 0, false
	}
	if !intent.OutOfService || NodeReady(node) || !stuck {
		return false, 0, false
	}
	ready := readyCondition(node)
	notReadySince := node.CreationTimestamp.Time
	if ready != nil {
		notReadySince = ready.LastTransitionTime.Time
	}
	if wait := notReadySince.Add(intent.OutOfServiceGrace).Sub(now); wait > 0 {
		return false, wait, false
	}
	if !shutdownEvidence(node) {
		return false, 0, true
	}
	return true, 0, false
}

// shutdownEvidence reports whether something positively says the node was shut down: the cloud
// provider's shutdown taint, or a confirmation by the automation that shut it down, the annotation
// nodemaint.dev/shutdown-confirmed naming the node's current boot ID (so that a confirmation left
// from an earlier shutdown does not count once the node has booted again).
func shutdownEvidence(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == nodemaintv1alpha1.CloudProviderShutdownTaint {
			return true
		}
	}
	confirmed := node.Annotations[nodemaintv1alpha1.ShutdownConfirmedAnnotation]
	return confirmed != "" && confirmed == node.Status.NodeInfo.BootID
}
