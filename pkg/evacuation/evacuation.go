package evacuation

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pod condition types of the protocol (KEP-4212 names).
const (
	// Request is set True by a requester that wants the pod to leave its node.
	Request corev1.PodConditionType = "EvacuationRequest"
	// Initiated is set by the pod's owner: True when it accepted and is moving the pod, False when
	// it cannot, which lets eviction start.
	Initiated corev1.PodConditionType = "EvacuationInitiated"
)

// ReasonNodeMaintenance is the Request reason of nodemaint's NodeMaintenance controller.
const ReasonNodeMaintenance = "NodeMaintenance"

// Annotations of nodemaint's Deployment responder (KEP-4212's deployment.kubernetes.io/evacuation-ready
// and status.replicasToEvacuate, as annotations since an out-of-tree controller cannot add status fields).
const (
	// EvacuationReadyAnnotation on a ReplicaSet says its pods' evacuation requests are answered.
	EvacuationReadyAnnotation = "nodemaint.dev/evacuation-ready"
	// ReplicasToEvacuateAnnotation on a ReplicaSet counts its pods with an evacuation request.
	ReplicasToEvacuateAnnotation = "nodemaint.dev/replicas-to-evacuate"
	// DeploymentReplicasToEvacuateAnnotation on a Deployment counts the pods of all its ReplicaSets
	// with an evacuation request. It is not ReplicasToEvacuateAnnotation because the Deployment
	// controller copies a Deployment's annotations onto its newest ReplicaSet.
	DeploymentReplicasToEvacuateAnnotation = "nodemaint.dev/deployment-replicas-to-evacuate"
	// SurgeAnnotation on a Deployment records a surge in progress, as JSON:
	// {"originalReplicas":3,"surge":2,"startTime":"2026-01-02T15:04:05.000000Z","uid":"<the Deployment's UID>"}.
	// While it is present, spec.replicas is originalReplicas+surge because of nodemaint; it is
	// removed, in the same write that returns spec.replicas to originalReplicas, when the surge
	// ends. A record naming another object's UID is not nodemaint's.
	SurgeAnnotation = "nodemaint.dev/evacuation-surge"
	// SurgeRevertedAnnotation on a Deployment counts the surges of its current evacuation whose
	// spec.replicas someone set back to the count before the surge (a GitOps engine's self-heal),
	// as JSON: {"uid":"<the Deployment's UID>","count":1,"replicas":2}. Removed when nothing of
	// the Deployment is asked to leave any more.
	SurgeRevertedAnnotation = "nodemaint.dev/surge-reverted"
	// SurgeBoundsAnnotation on a HorizontalPodAutoscaler records the bounds the Deployment
	// responder raised while a surge of the Deployment it targets is in progress, as JSON:
	// {"uid":"<the autoscaler's UID>","deployment":"web","minReplicas":3,"maxReplicas":3,"setMinReplicas":4,"setMaxReplicas":4}.
	// Written before the Deployment's spec.replicas is raised; when the surge ends, after the
	// Deployment scaled back, each bound that still holds the value set is restored and the
	// record removed.
	SurgeBoundsAnnotation = "nodemaint.dev/surge-bounds"
	// OriginalDeletionCostAnnotation on a pod says the Deployment responder lowered its
	// controller.kubernetes.io/pod-deletion-cost so that its ReplicaSet removes it first; the
	// value is the cost to restore ("" when the pod had none).
	OriginalDeletionCostAnnotation = "nodemaint.dev/original-pod-deletion-cost"
	// AcceptedEvictionAnnotation on a pod is the UID of the Eviction whose request a responder
	// accepted on the pod, with the marks that go with its acceptance (PodRequest.AcceptMarking):
	// the acceptance is that one write of the pod, and the Eviction hears from the responder at
	// its first heartbeat. It goes with the marks when the responder stops moving the pod (the
	// Deployment responder removes it when it restores the pod's deletion cost), and is only read
	// against the Eviction of that UID: an Eviction made again for the pod is a new request.
	AcceptedEvictionAnnotation = "nodemaint.dev/accepted-eviction"
)

// Condition returns the pod's condition of the given type, or nil.
func Condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// Requested reports whether some requester asks for the pod's evacuation.
func Requested(pod *corev1.Pod) bool {
	c := Condition(pod, Request)
	return c != nil && c.Status == corev1.ConditionTrue
}

// RequestedBy reports whether the requester with the given reason asks for the pod's evacuation.
func RequestedBy(pod *corev1.Pod, reason string) bool {
	c := Condition(pod, Request)
	return c != nil && c.Status == corev1.ConditionTrue && c.Reason == reason
}

// Accepted reports whether the pod's owner accepted the evacuation (EvacuationInitiated=True).
func Accepted(pod *corev1.Pod) bool {
	c := Condition(pod, Initiated)
	return c != nil && c.Status == corev1.ConditionTrue
}

// Declined reports whether the pod's owner declined the evacuation (EvacuationInitiated=False).
func Declined(pod *corev1.Pod) bool {
	c := Condition(pod, Initiated)
	return c != nil && c.Status == corev1.ConditionFalse
}

// SetCondition sets (or replaces) a condition on the pod in memory, keeping LastTransitionTime when
// the status does not change. It reports whether anything changed.
func SetCondition(pod *corev1.Pod, cond corev1.PodCondition) bool {
	if cond.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = metav1.Now()
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return false
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
		*c = cond
		return true
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
	return true
}

// RemoveCondition removes the condition of the given type from the pod in memory. It reports whether
// anything changed.
func RemoveCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			pod.Status.Conditions = append(pod.Status.Conditions[:i], pod.Status.Conditions[i+1:]...)
			return true
		}
	}
	return false
}

// Accept marks the pod's evacuation as accepted by its owner (EvacuationInitiated=True). It patches
// the pod's status with a strategic merge patch, which touches only this condition.
func Accept(ctx context.Context, c client.Client, pod *corev1.Pod, reason, message string) error {
	return Answer(ctx, c, pod, &corev1.PodCondition{
		Type: Initiated, Status: corev1.ConditionTrue, Reason: reason, Message: message,
	}, nil)
}

// Decline tells the requester the owner cannot move the pod (EvacuationInitiated=False), so it may
// be evicted.
func Decline(ctx context.Context, c client.Client, pod *corev1.Pod, reason, message string) error {
	return Answer(ctx, c, pod, &corev1.PodCondition{
		Type: Initiated, Status: corev1.ConditionFalse, Reason: reason, Message: message,
	}, nil)
}

// Withdraw removes the owner's EvacuationInitiated condition, e.g. after the request went away.
func Withdraw(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	return Answer(ctx, c, pod, nil, nil)
}

// Answer writes the owner's answer on the pod's conditions together with pod annotations that go
// with it (such as a lowered pod-deletion-cost), in one write: cond sets EvacuationInitiated
// (keeping its LastTransitionTime when the status stays), nil removes it; annotations are set, a
// nil value removes one. Nothing is written when nothing changes; pod is updated to what the API
// server returned.
//
// Every write applies to the pod observed only (its metadata.uid; a pod created again under its
// name is refused with 422, which Stale reports). The answer is a strategic merge patch of
// pods/status, built from the condition and the annotations alone (see ConditionPatch), which kube-apiserver applies to the pod's
// metadata.annotations too (its pod status strategy resets the spec, not the metadata). Should
// an API server drop them, the pod it returns says so and the annotations are written with a
// second patch, of the pod itself.
func Answer(ctx context.Context, c client.Client, pod *corev1.Pod, cond *corev1.PodCondition, annotations map[string]*string) error {
	var (
		changed bool
		entry   any
	)
	if cond != nil {
		changed = SetCondition(pod, *cond)
		entry = *Condition(pod, cond.Type)
	} else {
		changed = RemoveCondition(pod, Initiated)
		entry = deleteCondition(Initiated)
	}
	annotated := setAnnotations(pod, annotations)
	if !changed {
		if !annotated {
			return nil
		}
		return c.Patch(ctx, pod, AnnotationsPatch(pod.UID, annotations))
	}
	// The owner's own condition: the UID alone is a precondition (a requester's write since the
	// read does not make the answer wrong).
	if err := c.Status().Patch(ctx, pod, statusPatch(metav1.ObjectMeta{UID: pod.UID}, entry, annotations)); err != nil {
		return err
	}
	if !setAnnotations(pod, annotations) {
		return nil
	}
	// The API server did not keep the annotations written through pods/status.
	return c.Patch(ctx, pod, AnnotationsPatch(pod.UID, annotations))
}

// setAnnotations sets the annotations on the pod in memory (a nil value removes one) and reports
// whether anything changed.
func setAnnotations(pod *corev1.Pod, annotations map[string]*string) bool {
	changed := false
	for key, value := range annotations {
		cur, has := pod.Annotations[key]
		switch {
		case value == nil && has:
			delete(pod.Annotations, key)
		case value != nil && (!has || cur != *value):
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[key] = *value
		default:
			continue
		}
		changed = true
	}
	return changed
}
