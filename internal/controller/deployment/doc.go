// Package deployment is nodemaint's evacuation responder for Deployments (KEP-4212's
// NodeMaintenanceDeployment, out of tree): when pods of a Deployment with a rolling update and
// maxSurge > 0 are asked to leave their node (the EvacuationRequest pod condition, from any
// requester, or a KEP-4563 Eviction on which it is Active), it accepts (EvacuationInitiated=True),
// raises the Deployment's replicas by up to maxSurge, waits until the replacements are available,
// and scales back, with the evacuated pods given the lowest pod-deletion-cost so that their
// ReplicaSet removes exactly them. Pods go in waves of at most maxSurge.
//
// This package is the responder's reconciler: it observes a Deployment, its ReplicaSets, pods,
// Evictions and autoscalers from the cache, has internal/controller/deployment/deploymentdecide (pure,
// fuzzed) decide, and applies the plan: the pods' answers and marks, the Deployment's scale in one
// patch, the ReplicaSets' markers, the Evictions' progress and heartbeats, the Events and the
// metrics. It also holds the watches that bring a Deployment's changes and Release, the plugin's
// cleanup.
//
// All its state is on the API objects: the surge in an annotation of the Deployment, written in
// the same patch as spec.replicas; the pods to remove first in their deletion cost; its answers
// in the pods' conditions (or their Evictions). See docs/responder-protocol.md for the behavior
// in every case.
package deployment
