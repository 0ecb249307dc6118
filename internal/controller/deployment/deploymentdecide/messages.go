package deploymentdecide

// The words of the decision: the Events' type, action and note, the pods' EvacuationInitiated
// messages and what the responder reports on the Evictions it accepted, from the facts the plan
// carries. Why a Deployment does not surge is surgepolicy's words, passed on.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
)

// Note is the Event's note.
func (e Event) Note() string {
	switch e.Reason {
	case SurgeStarted:
		return fmt.Sprintf("scaling from %d to %d replicas to evacuate %d of the %s asked to leave (%s), all marked to go first when it scales back",
			e.Original+e.Was, e.Original+e.Surge, e.Surge, count(e.Asked), podNames(e.Pods))
	case SurgeExtended:
		return fmt.Sprintf("scaling from %d to %d replicas: the surge evacuates %d of the %s asked to leave now, %d more than before",
			e.Original+e.Was, e.Original+e.Surge, e.Surge, count(e.Asked), e.Surge-e.Was)
	case SurgeCompleted:
		return fmt.Sprintf("%d replacements are available; scaled back to %d replicas, which removes %d of the %s asked to leave (%s)",
			e.Surge, e.Original, e.Surge, count(e.Asked), podNames(e.Pods))
	case SurgeRolledBack:
		if len(e.Pods) == 0 {
			// None of the surge's pods is there (not created yet): no pod of its to name.
			return fmt.Sprintf("%s; scaled back to %d replicas", e.rollbackCause(), e.Original)
		}
		return fmt.Sprintf("%s; scaled back to %d replicas, which removes the surge's pods %s", e.rollbackCause(), e.Original, podNames(e.Pods))
	case SurgeTimedOut:
		return fmt.Sprintf("gave up the evacuation of %s (%s): %s", count(len(e.Pods)), podNames(e.Pods), timedOutMessage)
	case EvacuationAccepted:
		return "accepted the evacuation of pods asked to leave their nodes: each leaves once a surged replacement is available (the pods' EvacuationInitiated condition)"
	case EvacuationDeclined:
		return fmt.Sprintf("declined the evacuation of %s (%s), %s: %s", count(len(e.Pods)), podNames(e.Pods), e.PolicyReason, e.PolicyMessage)
	case InvalidSurgeState:
		return fmt.Sprintf("%s; removed it and left spec.replicas at %d", e.Problem, e.Replicas)
	case ScaledDuringSurge:
		note := fmt.Sprintf("spec.replicas was set to %d during a surge from %d to %d; keeping %d",
			e.Replicas, e.Original, e.Original+e.Surge, e.Replicas)
		if e.Reverts > 0 && e.Reverts < surgepolicy.RevertLimit {
			note += fmt.Sprintf(" (set back to the count before the surge: %d of the %d times that leave its pods to eviction)", e.Reverts, surgepolicy.RevertLimit)
		}
		return note
	case ReplicasReverted:
		return fmt.Sprintf("the surge from %d to %d replicas was set back too; declining the evacuation of its pods: %s",
			e.Original, e.Original+e.Surge, surgepolicy.RevertedMessage(e.Replicas, e.Reverts))
	case ScaleBackBounded:
		return fmt.Sprintf("a surge record would have the Deployment scaled back to %d replicas, below what nodemaint could have set "+
			"(at least %d: 1, or its HorizontalPodAutoscaler's own minReplicas; by at most maxSurge); scaled back to %d", e.Original, e.Min, e.Replicas)
	case SurgeAdopted:
		return fmt.Sprintf("the HorizontalPodAutoscaler scaled the Deployment to %d replicas, its raised minReplicas, before the responder did: "+
			"that is the surge of %d from %d replicas, which goes on", e.Original+e.Surge, e.Surge, e.Original)
	case AutoscalerRaised:
		return fmt.Sprintf("raised HorizontalPodAutoscaler %s from minReplicas %d, maxReplicas %d to %d, %d for the surge to %d replicas, "+
			"so that it does not scale the Deployment back before the replacements are available; restored when the surge ends",
			e.Autoscaler, e.MinWas, e.MaxWas, e.Min, e.Max, e.Replicas)
	case AutoscalerRestored:
		note := fmt.Sprintf("the surge is over: HorizontalPodAutoscaler %s back from minReplicas %d, maxReplicas %d to %d, %d",
			e.Autoscaler, e.MinWas, e.MaxWas, e.Min, e.Max)
		if len(e.Kept) > 0 {
			note += fmt.Sprintf(" (%s changed by someone else during the surge: kept)", strings.Join(e.Kept, " and "))
		}
		return note
	case InvalidBoundsRecord:
		return fmt.Sprintf("HorizontalPodAutoscaler %s: %s; removed it and left its bounds as they are", e.Autoscaler, e.Problem)
	case AutoscaledSurgeUndone:
		return fmt.Sprintf("HorizontalPodAutoscaler %s scaled the Deployment to %d replicas from its minReplicas raised for the surge, "+
			"before it saw them restored; scaled back to %d", e.Autoscaler, e.Original+e.Surge, e.Original)
	}
	return string(e.Reason)
}

// rollbackCause says why a surge is rolled back.
func (e Event) rollbackCause() string {
	switch e.Rollback {
	case RollbackIneligible:
		return e.PolicyMessage
	case RollbackWithdrawn:
		return fmt.Sprintf("%s still to be evacuated for a surge of %d (withdrawn: %s)", count(e.Asked), e.Surge, podNames(e.Withdrawn))
	case RollbackNoProgress:
		return fmt.Sprintf("the replacements made no progress for %v (%v after the surge started)",
			e.Patience.Round(time.Second), e.Elapsed.Round(time.Second))
	case RollbackReleased:
		return "nodemaint's Deployment responder is being removed"
	}
	return string(e.Rollback)
}

// Type is the Event's type: Warning when the responder undid or gave up something.
func (e Event) Type() string {
	switch e.Reason {
	case InvalidSurgeState, ScaledDuringSurge, SurgeTimedOut, InvalidBoundsRecord, AutoscaledSurgeUndone, ReplicasReverted, ScaleBackBounded:
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// Action is what the responder did that the Event reports: surge the Deployment, or answer its
// pods' evacuation.
func (e Event) Action() string {
	switch e.Reason {
	case EvacuationAccepted, EvacuationDeclined, SurgeTimedOut:
		return "Evacuate"
	}
	return "Surge"
}

// timedOutMessage is the message of a pod whose evacuation the responder gave up.
const timedOutMessage = "the Deployment's surge did not become available in time: eviction moves the pod"

// Message is the message of the pod's EvacuationInitiated the answer sets; "" when it removes it.
func (a Answer) Message() string {
	switch {
	case a.Status == "":
		return ""
	case a.Status == corev1.ConditionFalse && a.Reason == surgepolicy.ReasonSurgeTimedOut:
		return timedOutMessage
	case a.Status == corev1.ConditionTrue:
		return acceptedMessage(a.Deployment)
	}
	return a.PolicyMessage
}

// acceptedMessage is what the responder says of a pod it accepted to move.
func acceptedMessage(deployment string) string {
	return fmt.Sprintf("Deployment %s surges a replacement before the pod is removed", deployment)
}

// surgeProgressMessage is what the responder reports of a pod whose wave surges for it.
func surgeProgressMessage(deployment string, original, replicas int32) string {
	return fmt.Sprintf("Deployment %s surged from %d to %d replicas: the pod goes once the replacements are available",
		deployment, original, replicas)
}

// removingMessage is what the responder reports of a pod its Deployment replaced.
func removingMessage(deployment string) string {
	return fmt.Sprintf("Deployment %s replaced the pod; it is being removed", deployment)
}

// count says how many pods there are.
func count(pods int) string {
	if pods == 1 {
		return "1 pod"
	}
	return strconv.Itoa(pods) + " pods"
}

// podNames lists a few of the pod names.
func podNames(pods []string) string {
	const most = 5
	switch {
	case len(pods) == 0:
		return "no pods"
	case len(pods) > most:
		return strings.Join(pods[:most], ", ") + " and " + strconv.Itoa(len(pods)-most) + " more"
	}
	return strings.Join(pods, ", ")
}
