// Package evictionrequest holds the names nodemaint uses in KEP-4563's EvictionRequest API
// (lifecycle.k8s.io/v1alpha1): the requester nodemaint's drain writes into its EvictionRequests,
// the default responder every Eviction of a pod ends with, and the deadlines the KEP sets. The
// requester (internal/requester), the out-of-tree Eviction controller
// (internal/controller/eviction) and the responders import them from here.
package evictionrequest

import (
	"time"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
)

const (
	// Requester is the .spec.requester of the EvictionRequests nodemaint's node drain creates. The
	// API accepts a domain-prefixed label key outside the reserved *.k8s.io and *.kubernetes.io
	// domains; the Eviction controller sets it as a label key on the pod's Eviction, so
	// requesters find their Evictions with the selector "nodemaint.dev/node-maintenance".
	Requester = "nodemaint.dev/node-maintenance"

	// ImperativeEvictor is the default responder that the Eviction controller appends to every
	// pod's Eviction as the last one: it evicts the pod through the Eviction API (respecting its
	// PodDisruptionBudgets) with a back-off.
	ImperativeEvictor = lifecyclev1alpha1.EvictionResponderImperativeEviction
	// ImperativeEvictorPriority is the imperative evictor's priority (the *.k8s.io range 0-999 is
	// reserved for it and its kind).
	ImperativeEvictorPriority int32 = 100

	// ManagingControllerPriority is the priority the KEP asks the managing controller of a pod
	// (such as nodemaint's Deployment responder) to register with, leaving room both above (to
	// preempt it) and below (as a fallback).
	ManagingControllerPriority int32 = 10000

	// ControllerLabel marks every Eviction nodemaint's Eviction controller creates with the name
	// of the controller that created it (--eviction-controller-name: by default the namespace of
	// the installation's leader election). A controller writes to, and deletes, only the
	// Evictions with its own name; every other Eviction (another installation's, or the in-tree
	// controller's, which carries no such label) it reads only.
	ControllerLabel = "nodemaint.dev/eviction-controller"
)

// HeldForDrain is the imperative evictor's message while it holds a pod that only nodemaint's
// drain asks for. nodemaint's drain is the one requester whose eviction policy the protocol cannot
// carry (SignalOnly never evicts, a spec it cannot use does nothing destructive, a pod nobody
// answers for has the maintenance's response timeout first): so the drain decides itself when to
// evict such a pod, through the Eviction API as the imperative evictor would, and the imperative
// evictor only reports. A pod that another requester asks for is evicted as KEP-4563 says.
const HeldForDrain = "held for " + Requester + ": its drain evicts the pod once its response timeout runs out or a responder declined, and never under evictionPolicy SignalOnly"

// HeartbeatDeadline is how long an active responder may go without a heartbeat
// (.status.responders[].heartbeatTime, or its startTime before the first one) before the
// Eviction controller marks it Interrupted and passes the eviction over to the next responder.
const HeartbeatDeadline = 20 * time.Minute
