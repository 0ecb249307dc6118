package evictiondecide

import (
	"time"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"

	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// EventReason is what an Event on an Eviction reports; its value is the Event's reason.
type EventReason string

const (
	// EvictionCreated: the controller created the Eviction of a pod for its EvictionRequests.
	EvictionCreated EventReason = "EvictionCreated"
	// ResponderActive: a responder became the active responder.
	ResponderActive EventReason = "ResponderActive"
	// ResponderCompleted: the active responder set its completionTime.
	ResponderCompleted EventReason = "ResponderCompleted"
	// ResponderInterrupted: the active responder went without a heartbeat past the deadline.
	ResponderInterrupted EventReason = "ResponderInterrupted"
	// ResponderCanceled: the active responder is canceled, every requester having withdrawn.
	ResponderCanceled EventReason = "ResponderCanceled"
	// CanceledDueToNoRequesters: the Eviction failed, every requester having withdrawn (its
	// Failed condition's reason).
	CanceledDueToNoRequesters = EventReason(lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters)
	// NoFurtherResponder: the Eviction failed, no responder having evicted the target (its
	// Failed condition's reason).
	NoFurtherResponder = EventReason(lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder)
	// PodEvicted: the imperative evictor evicted the target through the Eviction API.
	PodEvicted EventReason = "Evicted"
)

// Event is an Event on an Eviction: what happened (Reason) and the facts its note tells
// (messages.go words them).
type Event struct {
	// Eviction names the Eviction the Event is about.
	Eviction string
	Reason   EventReason
	// Responder names the responder whose state changed, or the one that evicted the pod.
	Responder string
	// ResponderMessage is what a completed responder last said (its status message).
	ResponderMessage string
	// HeartbeatDeadline is how long an interrupted responder went without a heartbeat.
	HeartbeatDeadline time.Duration
	// Ended: the responder was interrupted for reporting no completion within
	// GracefulCompletionDelay of the pod's end.
	Ended bool
	// Pod names the target pod (EvictionCreated, PodEvicted).
	Pod string
	// Requests counts the EvictionRequests a created Eviction is for (its owners).
	Requests int
}

// Recorded reports whether the change is worth an Event on the Eviction, beyond its log line:
// what disrupts the pod (the imperative evictor's eviction), what goes wrong (a responder
// interrupted, no responder left), a responder handing over (completed its turn: declined, or
// done with its part), and the end of a canceled eviction. The routine steps of every pod's
// eviction (created, a responder made active, canceled with it) are in the Eviction's status and
// the controller's log: an Event each was 2.6 Events a pod moved, more than the pod's own writes.
func (e Event) Recorded() bool {
	switch e.Reason {
	case EvictionCreated, ResponderActive, ResponderCanceled:
		return false
	}
	return true
}

// CreatedEvent is the Event of the Eviction's creation.
func CreatedEvent(e *lifecyclev1alpha1.Eviction) Event {
	ev := Event{Eviction: e.Name, Reason: EvictionCreated, Requests: len(e.OwnerReferences)}
	if e.Spec.Target.Pod != nil {
		ev.Pod = e.Spec.Target.Pod.Name
	}
	return ev
}

// EvictedEvent is the Event of the imperative evictor's eviction of the Eviction's target pod.
func EvictedEvent(e *lifecyclev1alpha1.Eviction, pod string) Event {
	return Event{Eviction: e.Name, Reason: PodEvicted, Responder: evictionrequest.ImperativeEvictor, Pod: pod}
}
