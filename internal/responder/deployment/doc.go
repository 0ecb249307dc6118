// Package deployment is nodemaint's evacuation responder for Deployments (KEP-4212's
// NodeMaintenanceDeployment, out of tree): when pods of a Deployment with a rolling update and
// maxSurge > 0 are asked to leave their node (the EvacuationRequest pod condition, from any
// requester), it accepts (EvacuationInitiated=True), raises the Deployment's replicas by up to
// maxSurge, waits until the replacements are available, and scales back, with the evacuated
// pods given the lowest pod-deletion-cost so that their ReplicaSet removes exactly them. Pods
// go in waves of at most maxSurge.
//
// All its state is on the API objects: the surge in an annotation of the Deployment, written in
// the same patch as spec.replicas; the pods to remove first in their deletion cost; its answers
// in the pods' conditions. See docs/responder-protocol.md for the behavior in every case.
package deployment
