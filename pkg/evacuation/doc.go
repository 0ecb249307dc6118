// Package evacuation is the evacuation protocol of KEP-4212 "Declarative Node Maintenance", for the
// owners of pods: operators of databases, virtual machines, message brokers, and nodemaint's own
// Deployment responder.
//
// A requester (nodemaint, for a NodeMaintenance that drains a node; a descheduler) asks for a pod to
// leave its node by setting the pod condition EvacuationRequest=True with a reason naming the
// requester. The pod's owner answers:
//
//   - Accept: EvacuationInitiated=True. The owner moves the pod (for example it starts a replacement
//     elsewhere first) and then deletes it. The requester does not evict the pod while it is accepted.
//   - Decline: EvacuationInitiated=False, with a reason. The requester may evict the pod (through
//     the Eviction API, so PodDisruptionBudgets hold).
//   - No answer: after the requester's timeout (3m by default), the requester may evict the pod.
//
// A requester withdraws its request by removing the condition (nodemaint does when the maintenance
// ends early). An owner that accepted must then stop moving the pod and clear EvacuationInitiated.
//
// Requesters never overwrite another requester's True request; owners must not set EvacuationRequest.
//
// Where the cluster serves KEP-4563's EvictionRequest API (lifecycle.k8s.io/v1alpha1), a request
// may instead come as an Eviction of the pod on which the responder is Active. PodRequest answers
// both the same way (For finds the pod's request, on either protocol): Accept, Progress (on an
// Eviction also its heartbeat), Decline and Complete. See docs/responder-protocol.md.
package evacuation
