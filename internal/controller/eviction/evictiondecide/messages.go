package evictiondecide

// The words of the decision: the conditions' messages, the Events' type, action and note, and
// the imperative evictor's status message, from the facts the decision carries. The conditions'
// and the imperative evictor's messages are those of upstream's evictionrequest-controller and
// imperative-eviction responder (kubernetes/kubernetes, KEP-4563), which responders and
// requesters written for them may read; nodemaint's own steps have words of their own.

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"

	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// conditionMessage is the message of an Eviction's (and its requests') condition with the
// reason, upstream's words.
func conditionMessage(reason lifecyclev1alpha1.EvictionConditionReason) string {
	switch reason {
	case lifecyclev1alpha1.EvictionConditionReasonPodDeleted:
		return "Target pod has been deleted."
	case lifecyclev1alpha1.EvictionConditionReasonPodTerminal:
		return "Pod has reached terminal state."
	case lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters:
		return "No active requesters with eviction intent."
	case lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder:
		return "All responders have completed without evicting the target."
	}
	return ""
}

// waitingForEviction is the message of a request's conditions before its Eviction reports.
const waitingForEviction = "waiting for an Eviction to report on progress"

// invalidReason is why a request or an Eviction is invalid (EvictionInvalid).
type invalidReason int

const (
	// invalidNotFound: no pod of the request's name exists.
	invalidNotFound invalidReason = iota
	// invalidUIDMismatch: the pod of that name has another UID (the detail says which).
	invalidUIDMismatch
	// invalidSchedulingGroup: the pod is in a scheduling group (a Workload/PodGroup).
	invalidSchedulingGroup
	// invalidDuplicate: another Eviction of the target is under way.
	invalidDuplicate
)

// invalidMessage is the message of the Failed condition (EvictionInvalid) for why, upstream's
// words.
func invalidMessage(why invalidReason, detail string) string {
	switch why {
	case invalidNotFound:
		return "Target pod not found."
	case invalidUIDMismatch:
		return "Target pod UID mismatch: " + detail + "."
	case invalidSchedulingGroup:
		return "Target pod references a SchedulingGroup. Eviction is currently not supported."
	}
	return "Active Eviction already exists for the same target."
}

// Note is the Event's note.
func (e Event) Note() string {
	switch e.Reason {
	case EvictionCreated:
		return fmt.Sprintf("Eviction of pod %s for %d requester(s)", e.Pod, e.Requests)
	case ResponderActive:
		return e.Responder + " is the active responder"
	case ResponderCompleted:
		if e.ResponderMessage == "" {
			return e.Responder + " completed"
		}
		return e.Responder + " completed: " + e.ResponderMessage
	case ResponderInterrupted:
		if e.Ended {
			return fmt.Sprintf("%s: no completion reported within %s of the pod's end", e.Responder, GracefulCompletionDelay)
		}
		return fmt.Sprintf("%s: no heartbeat for %s", e.Responder, e.HeartbeatDeadline)
	case ResponderCanceled:
		return e.Responder + ": every requester withdrew"
	case CanceledDueToNoRequesters, NoFurtherResponder:
		// The Eviction's Failed condition's message.
		return conditionMessage(lifecyclev1alpha1.EvictionConditionReason(e.Reason))
	case PodEvicted:
		return fmt.Sprintf("%s evicted pod %s through the Eviction API", e.Responder, e.Pod)
	}
	return string(e.Reason)
}

// Type is the Event's type: Warning when the eviction met a problem.
func (e Event) Type() string {
	if e.Reason == ResponderInterrupted || e.Reason == NoFurtherResponder {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// Action is what the controller did that the Event reports.
func (e Event) Action() string {
	switch e.Reason {
	case EvictionCreated:
		return "Create"
	case PodEvicted:
		return "Evict"
	}
	return "Reconcile"
}

// imperativeStep is what the imperative evictor does about the pod while it is active.
type imperativeStep int

const (
	// evicting: it evicts the pod through the Eviction API.
	evicting imperativeStep = iota
	// refused: the last evictions were refused (the detail says what the API server said of the
	// last one; attempts counts them).
	refused
	// evicted: its eviction went through; the pod as read is not terminating yet.
	evicted
	// terminatingEvicted: the pod is terminating after its eviction.
	terminatingEvicted
	// terminating: the pod is terminating, deleted by someone else.
	terminating
	// podGone: the pod is gone (completes).
	podGone
	// podDeletedTerminal: the pod is terminating and terminal (completes; the detail is its phase).
	podDeletedTerminal
	// podTerminal: the pod is terminal (completes; the detail is its phase).
	podTerminal
	// heldForDrain: only nodemaint's drain asks for the pod's eviction, and evicts it itself.
	heldForDrain
	// unsupported: a DaemonSet or mirror pod, which the Eviction API does not evict (completes).
	unsupported
	// protected: a pod nodemaint must not evict (completes; the detail says why).
	protected
)

// viaEviction is what upstream's responder's message says of a pod it evicted.
const viaEviction = "pod has been been marked for deletion via the /eviction subresource"

// notEvictedSuffix ends the message of the imperative evictor that completed without evicting.
const notEvictedSuffix = ": not evicted by nodemaint"

// imperativeMessage is the imperative evictor's status message (.status.responders[].message)
// for the step about the pod named pod, with its detail: upstream's imperative-eviction
// responder's words, but for nodemaint's own steps (held, unsupported, protected).
func imperativeMessage(step imperativeStep, pod, detail string, attempts int) string {
	switch step {
	case refused:
		return fmt.Sprintf("%q pod deletion via the /eviction subresource failed (attempts=%d): %s", pod, attempts, detail)
	case evicted:
		return fmt.Sprintf("%q %s and will be terminated gracefully", pod, viaEviction)
	case terminatingEvicted:
		return fmt.Sprintf("%q %s and is being terminated gracefully", pod, viaEviction)
	case terminating:
		return fmt.Sprintf("%q pod has been been marked for deletion and is being terminated gracefully", pod)
	case podGone:
		return fmt.Sprintf("%q pod has been deleted and fully terminated", pod)
	case podDeletedTerminal:
		return fmt.Sprintf("%q pod has been deleted and fully terminated (pod phase=%q)", pod, detail)
	case podTerminal:
		return fmt.Sprintf("%q pod has been fully terminated (pod phase=%q)", pod, detail)
	case heldForDrain:
		return evictionrequest.HeldForDrain
	case unsupported:
		return "API-initiated eviction of DaemonSet and mirror pods is not supported" + notEvictedSuffix
	case protected:
		return detail + notEvictedSuffix
	}
	return fmt.Sprintf("%q pod is being evicted via the /eviction subresource", pod)
}

// notEvicted: the imperative evictor's message says it completed without evicting the pod
// (unsupported, protected).
func notEvicted(msg string) bool { return strings.HasSuffix(msg, notEvictedSuffix) }

// evictedByUs: the imperative evictor's message says it evicted the pod.
func evictedByUs(msg string) bool { return strings.Contains(msg, viaEviction) }

// standAsideMessage says why the Eviction controller leaves a pod to another Eviction controller:
// that controller's Eviction of the pod (eviction), or, without one, that another controller
// answers in the cluster (yield: which).
func standAsideMessage(eviction, yield string) string {
	if eviction != "" {
		return "Eviction " + eviction + " of another Eviction controller answers for the pod"
	}
	return "another Eviction controller answers in the cluster (" + yield + "): no Eviction is created"
}

// YieldMessage names another Eviction controller that answers in the cluster, from one of its
// Evictions (namespace/name): by the controller name it is marked with (evictionrequest.ControllerLabel),
// or, unmarked, as a controller that is not nodemaint (the in-tree one, or an earlier nodemaint).
func YieldMessage(controller string, marked bool, namespace, name string) string {
	if marked {
		return fmt.Sprintf("nodemaint's Eviction controller %q created Eviction %s/%s", controller, namespace, name)
	}
	return fmt.Sprintf("Eviction %s/%s was created by a controller that does not mark its Evictions", namespace, name)
}
