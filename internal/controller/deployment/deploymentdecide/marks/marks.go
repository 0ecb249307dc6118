// Package marks holds the marks the Deployment evacuation responder keeps: the pods' lowered
// deletion cost (the pods a ReplicaSet removes first), the ReplicaSets' markers and the
// Deployment's count of pods to evacuate, as annotations to write (a nil value removes one).
// Pure: the responder's decision computes them, its reconciler writes them.
package marks

import (
	"math"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// lowestDeletionCost is the pod-deletion-cost of the pods a ReplicaSet is to remove first.
const lowestDeletionCost = math.MinInt32

// IsMarked reports whether the responder lowered the pod's deletion cost.
func IsMarked(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[evacuation.OriginalDeletionCostAnnotation]
	return ok
}

// Marked returns the pods whose deletion cost the responder lowered.
func Marked(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if IsMarked(pod) {
			out = append(out, pod)
		}
	}
	return out
}

// Markers are the annotations the responder keeps on a ReplicaSet: the number of its pods with
// an evacuation request and, while the Deployment answers them by surging, evacuation-ready.
// Copies of the Deployment's own nodemaint annotations, which the Deployment controller puts on
// its newest ReplicaSet (and updates, never removes), are removed once the Deployment no longer
// has them and the evacuation has no more steps (moreSteps false): the surge record's copy goes
// once, not after every wave, whose next one copies it again. A nil value removes the
// annotation.
func Markers(rs *appsv1.ReplicaSet, pods []*corev1.Pod, ready bool, deploymentAnnotations map[string]string, moreSteps bool) map[string]*string {
	n := 0
	for _, pod := range pods {
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.UID == rs.UID && pod.DeletionTimestamp.IsZero() && evacuation.Requested(pod) {
			n++
		}
	}
	want := map[string]*string{
		evacuation.ReplicasToEvacuateAnnotation: nil,
		evacuation.EvacuationReadyAnnotation:    nil,
	}
	if n > 0 {
		want[evacuation.ReplicasToEvacuateAnnotation] = ptr.To(strconv.Itoa(n))
		if ready {
			want[evacuation.EvacuationReadyAnnotation] = ptr.To("true")
		}
	}
	for _, key := range []string{evacuation.SurgeAnnotation, evacuation.DeploymentReplicasToEvacuateAnnotation, evacuation.SurgeRevertedAnnotation} {
		if _, copied := deploymentAnnotations[key]; !copied && !moreSteps {
			want[key] = nil
		}
	}
	return want
}

// ToEvacuate counts the pods with an evacuation request, for the Deployment's marker.
func ToEvacuate(pods []*corev1.Pod) int {
	n := 0
	for _, pod := range pods {
		if pod.DeletionTimestamp.IsZero() && evacuation.Requested(pod) {
			n++
		}
	}
	return n
}

// CountCanWait reports whether bringing the annotations cur to want can wait for the responder's
// next write of the object: only a count's value changes (not whether there is one, nor any
// other annotation) while the evacuation has more steps (moreSteps: a surge in progress, pods
// waiting for a wave), the next of which writes the Deployment and brings the counts up to
// date. Requests arrive and pods leave one by one, and each count written is a write the API
// server sends to every watcher of Deployments or ReplicaSets: written at each change, the counts
// would cost nearly one write of each per evacuated pod.
func CountCanWait(cur map[string]string, want map[string]*string, moreSteps bool) bool {
	if !moreSteps {
		return false
	}
	for key, value := range want {
		was, had := cur[key]
		switch {
		case value == nil && !had:
		case value == nil || !had:
			return false // a count appears or goes
		case *value == was:
		case key != evacuation.ReplicasToEvacuateAnnotation && key != evacuation.DeploymentReplicasToEvacuateAnnotation:
			return false
		}
	}
	return true
}

// DeletionCost are the annotations that lower the pod's deletion cost to the lowest, saving the
// one it had (lowest), or restore the saved one. The restore also removes the record of an
// Eviction accepted with the mark (evacuation.AcceptedEvictionAnnotation): the mark is what the
// record stands for, and a pod the responder no longer moves keeps no trace of it (an Eviction
// still asking is then accepted again).
func DeletionCost(pod *corev1.Pod, lowest bool) map[string]*string {
	if lowest {
		return map[string]*string{
			evacuation.OriginalDeletionCostAnnotation: ptr.To(pod.Annotations[corev1.PodDeletionCost]),
			corev1.PodDeletionCost:                    ptr.To(strconv.Itoa(lowestDeletionCost)),
		}
	}
	saved := pod.Annotations[evacuation.OriginalDeletionCostAnnotation]
	cost := map[string]*string{evacuation.OriginalDeletionCostAnnotation: nil, corev1.PodDeletionCost: nil}
	if saved != "" {
		cost[corev1.PodDeletionCost] = &saved
	}
	if _, accepted := pod.Annotations[evacuation.AcceptedEvictionAnnotation]; accepted {
		cost[evacuation.AcceptedEvictionAnnotation] = nil
	}
	return cost
}

// SetAnnotation sets the annotation, or removes it when value is nil: how the annotations the
// decision returns (Markers, DeletionCost) are written on an object in memory.
func SetAnnotation(obj metav1.Object, key string, value *string) {
	a := obj.GetAnnotations()
	if value == nil {
		delete(a, key)
		obj.SetAnnotations(a)
		return
	}
	if a == nil {
		a = map[string]string{}
	}
	a[key] = *value
	obj.SetAnnotations(a)
}
