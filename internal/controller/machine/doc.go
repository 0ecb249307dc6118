// Package machine holds the Cluster API controller (opt-in, --cluster-api): nodemaint takes over
// the drain of a Machine that Cluster API deletes, through the Machine's pre-drain hook. For a
// Machine being deleted that carries nodemaint's hook (nodemaintv1alpha1.ClusterAPIPreDrainHook),
// it creates a NodeMaintenance of the Machine's node in the Machine's workload cluster, removes
// the hook once that maintenance reports the node Drained (or its drainTimeout ran out), and the
// maintenance goes with the node (its owner) or the Machine. Cluster API's own drain then finds
// the node empty.
//
// The workload cluster is reached as Cluster API's own controllers reach it: through the
// Cluster's kubeconfig Secret (<cluster>-kubeconfig, key value; Workloads), where nodemaint runs
// too and drains; or, for the one Cluster named by --cluster-api-self, through this cluster's
// own client (self-hosted). The node is the Machine's only if its spec.providerID is the
// Machine's. A NodeMaintenance says which cluster's Machine it is for (its kube-system
// namespace's UID, nodemaintv1alpha1.MachineClusterAnnotation): a cluster that is another's
// workload cluster and runs Cluster API too holds the other's, and deletes only its own (machinedecide.Own).
// Observe and apply (Reconciler), decide (machinedecide.Decide, pure): the controller's shape.
package machine
