package deployment

// The marks the responder keeps: the pods' lowered deletion cost (the pods a ReplicaSet removes
// first) and the ReplicaSets' markers.

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

// isMarked reports whether the responder lowered the pod's deletion cost.
func isMarked(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[evacuation.OriginalDeletionCostAnnotation]
	return ok
}

func marked(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if isMarked(pod) {
			out = append(out, pod)
		}
	}
	return out
}

// markers are the annotations the responder keeps on a ReplicaSet: the number of its pods with
// an evacuation request and, while the Deployment answers them by surging, evacuation-ready.
// Copies of the Deployment's own nodemaint annotations, which the Deployment controller puts on
// its newest ReplicaSet (and updates, never removes), are removed once the Deployment no longer
// has them and the evacuation has no more steps (moreSteps false): the surge record's copy goes
// once, not after every wave, whose next one copies it again. A nil value removes the
// annotation.
func markers(rs *appsv1.ReplicaSet, pods []*corev1.Pod, ready bool, deploymentAnnotations map[string]string, moreSteps bool) map[string]*string {
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
	for _, key := range []string{evacuation.SurgeAnnotation, evacuation.DeploymentReplicasToEvacuateAnnotation} {
		if _, copied := deploymentAnnotations[key]; !copied && !moreSteps {
			want[key] = nil
		}
	}
	return want
}

// toEvacuate counts the pods with an evacuation request, for the Deployment's marker.
func toEvacuate(pods []*corev1.Pod) int {
	n := 0
	for _, pod := range pods {
		if pod.DeletionTimestamp.IsZero() && evacuation.Requested(pod) {
			n++
		}
	}
	return n
}

// countCanWait reports whether bringing the annotations cur to want can wait for the responder's
// next write of the object: only a count's value changes (not whether there is one, nor any
// other annotation) while the evacuation has more steps (moreSteps: a surge in progress, pods
// waiting for a wave), the next of which writes the Deployment and brings the counts up to
// date. Requests arrive and pods leave one by one, and each count written is a write the API
// server sends to every watcher of Deployments or ReplicaSets: in the benchmark's scenario M,
// the counts were nearly one write of each per evacuated pod, and once surges waited, the pods
// a completed surge removed still cost a write of each per pod.
func countCanWait(cur map[string]string, want map[string]*string, moreSteps bool) bool {
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
