// Package drainpreflight says, before anything moves, what a drain of some nodes would meet: per
// node, what would block it (a PodDisruptionBudget that allows no disruption now, a DrainRule
// that does not parse), what would be lost (bare pods that are not recreated, pods whose
// replacement fits on no other node, emptyDir data, workloads that cannot surge and go down
// together) and what happens to the rest (skipped pods and why, Deployments that surge).
//
// It is pure: Run reads an Input (the cluster as listed by the caller: the plugin's
// preflight.Read, the controller's cache) and returns a Report.
// What preflights of one cluster share (the pods of each node, what each node has left, the
// workloads, the budgets) is a Snapshot, made once (NewSnapshot, from the objects by pointer)
// and read by any number of preflights of any targets (Snapshot.Run), concurrently too: the
// controller keeps one for every Planning maintenance. A preflight costs its targets' pods, plus
// for placing the displaced pods' replacements those pods times the cluster's nodes for each set
// of nodes out at once, which Spec.MaxChecks can bound.
// It classifies pods with the drain's own code (maintenance.Targeted, drain.Rules.Classify,
// drain.NewPlan) and decides whether a Deployment surges with the Deployment responder's own
// (surgepolicy.Surges), so it says what the drain would do. Whether a replacement fits on
// another node is checked with the scheduler's filters as k8s.io/component-helpers has them
// (node selector and required node affinity, taints and tolerations, cordons, volume node
// affinity) and resource requests against what is left of the nodes' allocatable. Inter-pod
// affinity and anti-affinity (but a single-pod Deployment's required anti-affinity on the
// hostname, for its surge: package hostaffinity), topology spread constraints and host ports
// are not evaluated. Its deadlock forecast names, before anything moves, what would hold a
// drain for good (Report.Deadlocks): budgets that allow no disruption and why, budgets the nodes
// out at once take more of than they allow, single-pod workloads nothing surges under such a
// budget, control-plane nodes out together.
package drainpreflight
