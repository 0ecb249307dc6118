// Package evictiondecide decides what KEP-4563's evictionrequest-controller does about one target pod,
// purely, as upstream's controller and imperative-eviction responder do (kubernetes/kubernetes
// pkg/controller/evictionrequest, imperativeevictionresponder): from the pod and the
// EvictionRequests and Evictions naming it, per target UID, the Eviction to create (pod-<n>-<pod>,
// none while one is under way), its status (requesters, target responders from the pod's
// spec.evictionResponders by priority with the imperative evictor last, one active responder at a
// time, completion, interruption past the heartbeat deadline or, once the pod ended, past a grace,
// cancellation when every requester withdrew, the final conditions), the conditions and observed
// generation of the requests (or why they are invalid), the Evictions to collect, and whether the
// imperative evictor evicts the pod now (not while it backs off from a refusal, unless the pod's
// PodDisruptionBudgets changed since and allow it). The decision carries its Events and
// conditions as reasons and facts; messages.go words them. internal/controller/eviction observes
// and applies.
package evictiondecide
