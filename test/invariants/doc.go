// Package invariants watches a cluster while nodemaint works on it and records every breach of
// what nodemaint promises a cluster admin:
//
//   - a PodDisruptionBudget is never violated: the number of healthy pods it selects (Ready, not
//     terminating, counted from the pods themselves) never drops below what its minAvailable or
//     maxUnavailable allows;
//   - a surge-capable Deployment (RollingUpdate with maxSurge > 0, not paused) never has fewer
//     Ready pods than the replicas its user asked for;
//   - once the maintenances are over, nothing of nodemaint's is left (CheckClean): no cordon,
//     taint, annotation or condition on nodes, no evacuation condition or annotation on pods, no
//     annotation on Deployments and ReplicaSets, and every Deployment back at its replicas.
//
// The first two are checked on every watch event (client-go informers), so no breach falls
// between two polls. Only a voluntary disruption violates them, as only those are what a
// PodDisruptionBudget governs: the check runs when a healthy pod is deleted or starts
// terminating, never when it merely turns not Ready (a failed probe, or its node going NotReady
// when its kubelet stops reporting: involuntary, and nobody's eviction), nor because a budget or
// a replica count went up. Pods that are not Ready still do not count as healthy, so a voluntary
// disruption while others are down is a violation. A budget or Deployment is checked only once
// it was seen fully available, so workloads still starting up when the checker starts, or when
// they are created, are no false positives.
//
// After a watch gap (an API server restart) the informers list again and deliver what changed in
// no particular order. The checker then reconstructs what happened inside the gap from what the
// objects carry (deletion and Ready timestamps) and replays it in order, so a breach that healed
// before the relist is still found (gap.go). With Options.Witness no pod can vanish unseen.
//
// The package does not import testing: the end-to-end tests and the benchmarks both use it.
package invariants
