package deploymentdecide

// What the responder reports on the Evictions it accepted (KEP-4563), beyond its answers: the
// pods the surge in progress is for, the surge's progress and expected completion, and the
// removal of a replaced pod. internal/controller/deployment writes them (its heartbeats).

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// SurgeWave are the UIDs of the pods the surge in progress is for: the oldest requests among the
// pods it evacuates, as many as it surged (as startWave chose them). Every pod it evacuates is
// marked and its scale-back may remove any of them, but only these hear of its progress: the
// others' reports, which would change with it, wait for their own wave.
func SurgeWave(in Input) map[types.UID]bool {
	state, err := surgepolicy.Parse(in.Deployment)
	if err != nil || state == nil {
		return nil
	}
	var candidates []*corev1.Pod
	for _, pod := range livePods(in.Pods) {
		if evacuation.Requested(pod) && !timedOut(pod) {
			candidates = append(candidates, pod)
		}
	}
	sortWave(candidates)
	wave := map[types.UID]bool{}
	for _, pod := range candidates[:min(len(candidates), int(state.Surge))] {
		wave[pod.UID] = true
	}
	return wave
}

// SurgeProgress is what the responder reports of a pod whose wave surges for it: the surge and, as
// the expected completion, the time by which it completes or gives up (its patience since its
// last progress). The message does not count the replacements Ready: each count would be a
// write of every Eviction of the wave (the Deployment's own status and Events count them), and
// the expected completion moved later by their progress waits for the next write (evacuation's
// Progress).
func SurgeProgress(in Input) evacuation.Progress {
	d := in.Deployment
	state, err := surgepolicy.Parse(d)
	if err != nil || state == nil {
		return evacuation.Progress{}
	}
	created := surgePods(livePods(in.Pods), state)
	deadline := lastProgress(created, state).Add(patience(d, in.ReplicaSets, created, in.SurgeTimeout))
	return evacuation.Progress{
		Reason:             surgepolicy.ReasonSurge,
		Message:            surgeProgressMessage(d.Name, state.OriginalReplicas, ptr.Deref(d.Spec.Replicas, 1)),
		ExpectedCompletion: deadline,
	}
}

// Accepting is what the responder reports of a pod it accepted to move and whose wave has not
// come: what its acceptance says (Answer.Message).
func Accepting(deployment string) evacuation.Progress {
	return evacuation.Progress{Reason: surgepolicy.ReasonSurge, Message: acceptedMessage(deployment)}
}

// Removing is the progress of a pod its Deployment replaced, which its ReplicaSet is removing:
// expected to be gone at the end of its grace period.
func Removing(deployment string, pod *corev1.Pod) evacuation.Progress {
	p := evacuation.Progress{Reason: surgepolicy.ReasonSurge, Message: removingMessage(deployment)}
	if pod.DeletionTimestamp != nil {
		p.ExpectedCompletion = pod.DeletionTimestamp.Time
	}
	return p
}
