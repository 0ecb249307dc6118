// Package eviction decides what KEP-4563's evictionrequest-controller does about one target pod,
// purely: from the pod and the EvictionRequests and Evictions naming it, the one Eviction of the
// pod to create, its status (requesters, target responders from the pod's
// spec.evictionResponders by priority with the imperative evictor last, one active responder at a
// time, completion, interruption past the heartbeat deadline, cancellation when every requester
// withdrew), the conditions copied into the requests, the Evictions to collect, and whether the
// imperative evictor evicts the pod now (not while it backs off from a refusal, unless the pod's
// PodDisruptionBudgets changed since and allow it). The decision carries its Events and
// conditions as reasons and facts; messages.go words them. internal/evictioncontroller observes
// and applies.
package eviction
