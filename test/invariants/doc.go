// Package invariants watches a cluster while nodemaint works on it and records every breach of
// what nodemaint promises a cluster admin (docs: /work/shared/PRODUCT.md's Promises):
//
//   - a PodDisruptionBudget is never violated: the number of healthy pods it selects (Ready, not
//     terminating, counted from the pods themselves) never drops below what its minAvailable or
//     maxUnavailable allows (KindPodDisruptionBudget; promise 5);
//   - with the audit log, a pod that left by a deletion of nodemaint's that a maintenance's
//     drainTimeoutAction Delete allowed (below) breaches neither: Delete bypasses budgets by
//     design (promise 4). Such breaches are held until the deletion is judged, then excused;
//   - a surge-capable Deployment (RollingUpdate with maxSurge > 0, not paused, not scaled by a
//     HorizontalPodAutoscaler, and whose pods found room: none of them unschedulable) never has
//     fewer Ready pods than the replicas its user asked for (KindDeploymentReady; promise 5). The
//     Deployment responder declines the others, and evictions through their budgets move them;
//     their budgets are checked as every budget is;
//   - [audit log] nothing is asked to move (the EvacuationRequest condition, or an EvictionRequest of
//     nodemaint's), evicted or deleted before its node's cordon was written
//     (KindNotCordoned; promise 1);
//   - [audit log] nothing is evicted or deleted while every maintenance draining the node is SignalOnly or
//     has a spec nodemaint cannot use (SpecValid False, spec.Problems()), and no EvictionRequest of
//     nodemaint's asks for the eviction of a pod that no maintenance selecting the node would evict:
//     whatever Eviction controller runs carries it out (KindSignalOnly; promise 2);
//   - [audit log] nothing is asked to move that every maintenance selecting the node skips (its
//     spec.podSelector, label policy, DrainRules) (KindSkippedPod; promise 4);
//   - [audit log] nothing is evicted or deleted that every maintenance draining the node (and, for a
//     deletion, asking for it) skips: its spec.podSelector does not select the pod, the pod label
//     nodemaint.dev/drain: skip under drainLabelPolicy Honor, a DrainRule with behavior Skip
//     (KindSkippedPod; promise 4);
//   - [audit log] nothing is deleted but by a maintenance with drainTimeoutAction Delete, once its
//     drainTimeout has run since the node's drain started (cordoned, and drained by the maintenance)
//     and its evacuationResponseTimeout since the pod was first asked
//     (KindDeletionNotDue; promises 3 and 4);
//   - with a stand-in Prometheus (Options.Prometheus), no node starts its turn of a rollout with
//     spec.rollout.haltOnAlerts unless an answer the stand-in gave within the controller's
//     answer age before the turn was usable (no warnings) and had none of the selected alerts
//     firing: not while they fire, nor without a trustworthy answer (KindAlertGate);
//   - no two control-plane nodes (label node-role.kubernetes.io/control-plane) are cordoned for one
//     NodeMaintenance at once: a rollout takes them one at a time, and a maintenance without a
//     rollout that selects several is refused (KindControlPlaneTogether, judged from the nodes);
//   - [audit log] an eviction's grace period is no longer than the shortest the maintenances it is
//     for allow (their spec.evictionGracePeriodSeconds, else the pod's own), a deletion's no longer
//     than the longest (KindGracePeriod; promises 4 and 5);
//   - [audit log] nodemaint sets an autoscaler annotation on a node only while a maintenance
//     cordoning it holds autoscalers (spec.autoscalers not Ignore) (KindAutoscalers);
//   - with Options.ClusterAPI (machines.go), [audit log of the Machines' cluster] nodemaint releases
//     its pre-drain hook from a Cluster API Machine only once the Machine's node is drained of the
//     pods its drain waits for, or the Machine has no node, or that node does not exist in the
//     cluster of the drain or is not the Machine's (another spec.providerID), or the Machine's
//     NodeMaintenance timed out or went (KindMachineHook); a NodeMaintenance of a Machine selects
//     only a node of the Machine's providerID (KindMachineNode); the Machines may be in another
//     cluster (Cluster API's management cluster) than the nodes;
//   - once the maintenances are over, nothing of nodemaint's is left (CheckClean; promise 7): no
//     cordon, taint, label, annotation or condition on nodes, no evacuation condition, label or
//     annotation on pods, no annotation on Deployments and ReplicaSets, every Deployment back at
//     its replicas, no EvictionRequest of nodemaint's (nor one with its labels or annotations),
//     no Eviction naming nodemaint or of a pod that is gone, no NodeMaintenance stuck in its
//     deletion, and (Options.ClusterAPI) none of a Machine that is gone.
//
// The checks marked [audit log] judge nodemaint-controller's own acts on pods, read from the API
// server's audit log (Options.AuditLog, acts.go) as they happen.
//
// Not checked: that an eviction waited for the pod's response timeout (promise 3 for
// evictions: the owner's answer is not in the audit log at the level it is written), that a
// deletion was asked for by a user allowed to delete pods (admission's job), promises 6 and 8.
//
// The act checks attribute by the audit log's user, so a pod the ReplicaSet controller deletes
// (the Deployment responder's surge scaling down) or an eviction by an admin is not nodemaint's;
// they order the cordon and the act by the API server's own timestamps, and judge each act
// against the maintenances the watch saw around it (acts.go says how, and what that can miss).
// Without an audit log (the benchmarks, a cluster that writes none) they are off and the rest
// works as before; test/localcluster writes one and test/e2e/framework passes it
// (framework.CheckerOptions).
//
// The budget and Deployment checks run on every watch event (client-go informers), so no breach falls
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
// before the relist is still found (gap.go). With Options.Witness no pod can vanish unseen. The
// audit log has no gaps: the acts inside one are judged once its relists are delivered.
//
// The package does not import testing: the end-to-end tests and the benchmarks both use it.
package invariants
