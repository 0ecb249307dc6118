// Package controller is the home of nodemaint's maintenance controllers, one package each:
//
//   - node: the node controller makes one node and its pods what the NodeMaintenances selecting
//     it want together (cordon, taint, condition, annotation, the pods' evacuation requests,
//     evictions);
//   - nodemaintenance: the NodeMaintenance controller keeps each NodeMaintenance's finalizer,
//     status, rollout, preflight and Events;
//   - drainrule: the DrainRule controller reports whether each rule's selectors parse;
//
// and what they share: observe (the observation of a node, from the cache, that both decide
// from) and protocol (the ways of asking owners to move their pods). KEP-4563's Eviction
// controller is internal/controller/eviction; setup.Controllers sets them all up.
//
// The tests of this package run the controllers together as nodemaint-controller does, on a
// real kube-apiserver and etcd (envtest).
package controller
