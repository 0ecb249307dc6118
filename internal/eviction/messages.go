package eviction

// The words of the decision: the conditions' messages, the Events' type, action and note, and
// the imperative evictor's status message, from the facts the decision carries. The condition
// message of a pod in a Workload/PodGroup is KEP-4563's.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"

	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// conditionMessage is the message of an Eviction's or EvictionRequest's condition with the
// reason; pod names the target (EvictionInvalid).
func conditionMessage(reason lifecyclev1alpha1.EvictionConditionReason, pod string) string {
	switch reason {
	case lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction:
		return "the target is scheduled for eviction"
	case lifecyclev1alpha1.EvictionConditionReasonPodDeleted:
		return "the target pod no longer exists"
	case lifecyclev1alpha1.EvictionConditionReasonPodTerminal:
		return "the target pod reached a terminal phase"
	case lifecyclev1alpha1.EvictionConditionReasonSucceeded:
		return "the target was evicted"
	case lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid:
		return fmt.Sprintf("Target Pod %s is part of a Workload/PodGroup. Eviction of such pods is currently not supported.", pod)
	case lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters:
		return "every requester withdrew its eviction intent"
	case lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder:
		return "no responder evicted the target and no further responder is available"
	}
	return ""
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
		return fmt.Sprintf("%s: no heartbeat for %s", e.Responder, e.HeartbeatDeadline)
	case ResponderCanceled:
		return e.Responder + ": every requester withdrew"
	case CanceledDueToNoRequesters, NoFurtherResponder:
		// The Eviction's Failed condition's message.
		return conditionMessage(lifecyclev1alpha1.EvictionConditionReason(e.Reason), "")
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
	// backingOff: the last eviction was refused (the detail says what the API server said).
	backingOff
	// terminating: the pod is terminating.
	terminating
	// heldForDrain: only nodemaint's drain asks for the pod's eviction, and evicts it itself.
	heldForDrain
	// unsupported: a DaemonSet or mirror pod, which the Eviction API does not evict.
	unsupported
	// protected: a pod nodemaint must not evict (the detail says why).
	protected
)

// imperativeMessage is the imperative evictor's status message (.status.responders[].message)
// for the step, with its detail.
func imperativeMessage(step imperativeStep, detail string) string {
	switch step {
	case backingOff:
		return "Could not evict the pod, retrying with a back-off: " + detail
	case terminating:
		return "the pod is terminating"
	case heldForDrain:
		return evictionrequest.HeldForDrain
	case unsupported:
		return "API-initiated eviction of DaemonSet and mirror pods is not supported"
	case protected:
		return detail + ": not evicted by nodemaint"
	}
	return "evicting the pod through the Eviction API"
}

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
