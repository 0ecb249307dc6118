package v1alpha1

// Labels, annotations, taints and conditions nodemaint puts on or reads from core objects.
const (
	// DrainLabel on a pod overrides every DrainRule: "skip" or "wait-completed".
	DrainLabel = "nodemaint.dev/drain"
	// DrainLabelSkip leaves the pod on the node.
	DrainLabelSkip = "skip"
	// DrainLabelWaitCompleted waits for the pod to complete; it is never evicted.
	DrainLabelWaitCompleted = "wait-completed"

	// MaintenancesAnnotation on a node lists the NodeMaintenances that maintain it, with their
	// phases: "name=Phase,name=Phase", sorted by name.
	MaintenancesAnnotation = "nodemaint.dev/maintenances"
	// CordonedAnnotation on a node says nodemaint cordoned it, so it uncordons it at the end.
	// A node that was cordoned before nodemaint touched it does not carry it and stays cordoned.
	CordonedAnnotation = "nodemaint.dev/cordoned"

	// OutOfServiceAnnotation on a node says nodemaint applied the out-of-service taint, so it
	// removes it again; a taint someone else applied stays.
	OutOfServiceAnnotation = "nodemaint.dev/out-of-service"

	// ShutdownConfirmedAnnotation on a node confirms that it was shut down, for the out-of-service
	// taint (spec.shutdown): its value is the node's status.nodeInfo.bootID of the boot that was
	// shut down, so the confirmation lapses by itself when the node boots again.
	ShutdownConfirmedAnnotation = "nodemaint.dev/shutdown-confirmed"

	// CloudProviderShutdownTaint is the taint the cloud provider's node lifecycle controller puts
	// on a node whose instance is shut down: evidence of shutdown for the out-of-service taint.
	CloudProviderShutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"

	// ControlPlaneLabel marks a control-plane node (kubeadm's node-role label). nodemaint takes a
	// rollout's control-plane nodes one at a time and refuses a maintenance that would take two at
	// once: it counts each as a member of a stacked etcd.
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

	// PlannedMaintenanceTaint is the PreferNoSchedule taint of a node whose maintenance is only
	// planned, so new pods prefer other nodes.
	PlannedMaintenanceTaint = "nodemaint.dev/maintenance-planned"

	// CompleteAnnotation on a node completes its turn in the rollouts it names (release Manual):
	// NodeMaintenance names, comma-separated. `kubectl maintenance complete NODE` sets it.
	CompleteAnnotation = "nodemaint.dev/complete"

	// DrainStartedAnnotation on a node records, per NodeMaintenance that drains it, when that
	// maintenance's drain started on this node: a JSON object from the maintenance's name to its
	// start, metadata.generation and UID. drainTimeoutAction Delete counts from it. nodemaint
	// writes it in the node patch that cordons the node for the drain and drops a maintenance's
	// entry once it no longer drains the node.
	DrainStartedAnnotation = "nodemaint.dev/drain-started"

	// AutoscalersHeldAnnotation on a node lists the autoscaler annotations nodemaint set on it
	// (KarpenterDoNotDisruptAnnotation, ClusterAutoscalerScaleDownDisabledAnnotation),
	// comma-separated, so that it removes those and only those once no maintenance holds the node.
	AutoscalersHeldAnnotation = "nodemaint.dev/autoscalers-held"
	// KarpenterDoNotDisruptAnnotation on a node keeps Karpenter from disrupting it (Karpenter's
	// karpenter.sh/v1 DoNotDisruptAnnotationKey).
	KarpenterDoNotDisruptAnnotation = "karpenter.sh/do-not-disrupt"
	// ClusterAutoscalerScaleDownDisabledAnnotation on a node keeps the cluster autoscaler from
	// scaling it down.
	ClusterAutoscalerScaleDownDisabledAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// KarpenterDisruptedTaint is the taint Karpenter puts on a node it is removing (karpenter.sh/v1
	// DisruptedTaintKey).
	KarpenterDisruptedTaint = "karpenter.sh/disrupted"
	// ClusterAutoscalerToBeDeletedTaint is the taint the cluster autoscaler puts on a node it is
	// removing.
	ClusterAutoscalerToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
	// RemovedByKarpenter and RemovedByClusterAutoscaler name the autoscaler removing a node in
	// status.nodes[].removedBy.
	RemovedByKarpenter         = "Karpenter"
	RemovedByClusterAutoscaler = "ClusterAutoscaler"

	// ClusterAPIPreDrainHook on a Cluster API Machine hands the drain of its node to nodemaint
	// (with --cluster-api): Cluster API's pre-drain delete hook
	// (pre-drain.delete.hook.machine.cluster.x-k8s.io/<name>) named nodemaint. Its value names
	// the hook's owner, as Cluster API asks; nodemaint reads only the key.
	ClusterAPIPreDrainHook = "pre-drain.delete.hook.machine.cluster.x-k8s.io/nodemaint"
	// MachineNamespaceLabel and MachineNameLabel on a NodeMaintenance name the Cluster API
	// Machine it drains the node of (the name hashed where it is too long for a label value);
	// MachineAnnotation names it as namespace/name.
	MachineNamespaceLabel = "nodemaint.dev/machine-namespace"
	MachineNameLabel      = "nodemaint.dev/machine-name"
	MachineAnnotation     = "nodemaint.dev/machine"
	// MachineClusterAnnotation on a NodeMaintenance created for a Cluster API Machine names the
	// cluster the Machine is in: the UID of that cluster's kube-system namespace. A nodemaint
	// with --cluster-api deletes the NodeMaintenance of a Machine gone only where it names its
	// own cluster (or nothing, created by an older nodemaint): a cluster both the workload
	// cluster of a management cluster and running Cluster API itself holds the management
	// cluster's, of Machines it does not have.
	MachineClusterAnnotation = "nodemaint.dev/machine-cluster"

	// NodeConditionReasonNodeMaintenance is the reason of the KEP-5683 node conditions nodemaint
	// sets (MaintenancePlanned, MaintenanceInProgress, DrainInProgress, Drained); it removes only
	// those of that reason, never another tool's.
	NodeConditionReasonNodeMaintenance = "NodeMaintenance"

	// NodeConditionUnderMaintenance is the node condition that advertises the maintenance: True
	// with the phase as reason and the NodeMaintenances in the message.
	NodeConditionUnderMaintenance = "UnderMaintenance"

	// Finalizer keeps a NodeMaintenance until its nodes and pods are restored.
	Finalizer = "nodemaint.dev/cleanup"
)
