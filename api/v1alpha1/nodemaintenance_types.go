package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeMaintenanceSpec declares what should happen to the selected nodes. The phase of the maintenance
// follows from cordon and drain (KEP-4212): Planning (neither), Cordon (cordon only), Drain (both),
// and Maintenance Complete when both are set back to false.
//
// +kubebuilder:validation:XValidation:rule="!self.drain || self.cordon",message="drain: true requires cordon: true; a node is cordoned before it is drained"
// +kubebuilder:validation:XValidation:rule="size(self.nodeSelector.nodeSelectorTerms) > 0",message="nodeSelector must have at least one nodeSelectorTerm; an empty selector selects no node"
// +kubebuilder:validation:XValidation:rule="self.nodeSelector.nodeSelectorTerms.all(t, has(t.matchExpressions) || has(t.matchFields))",message="every nodeSelectorTerm needs matchExpressions or matchFields; an empty term selects no node"
// +kubebuilder:validation:XValidation:rule="self.nodeSelector.nodeSelectorTerms.all(t, !has(t.matchFields) || t.matchFields.all(f, f.key == 'metadata.name' && (f.operator == 'In' || f.operator == 'NotIn') && has(f.values) && size(f.values) > 0))",message="matchFields supports only metadata.name with operator In or NotIn and 1 to 256 node names"
// +kubebuilder:validation:XValidation:rule="!has(self.drainTimeoutAction) || self.drainTimeoutAction == 'Report' || has(self.drainTimeout)",message="drainTimeoutAction: Delete requires drainTimeout"
type NodeMaintenanceSpec struct {
	// nodeSelector selects the nodes under maintenance. Its terms are ORed, like a pod's required
	// node affinity. It may select many nodes. At most 16 terms of 32 requirements each
	// (hack/crd-bounds sets these limits in the CRD).
	// +required
	NodeSelector corev1.NodeSelector `json:"nodeSelector"`

	// cordon marks the selected nodes unschedulable (spec.unschedulable), so no new pods land there.
	// +optional
	// +default=false
	Cordon bool `json:"cordon"`

	// drain asks the owners of the pods on the selected nodes to move them (the EvacuationRequest pod
	// condition), and evicts the pods whose owners do not answer. It requires cordon.
	// +optional
	// +default=false
	Drain bool `json:"drain"`

	// reason says why the nodes are maintained. It is the message of the pods' EvacuationRequest
	// condition, and shows in `kubectl get nodemaintenances -o wide`.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// evacuationResponseTimeout is how long a pod's owner has to accept an evacuation request
	// (EvacuationInitiated=True) before the pod is evicted. KEP-4212's figure is 3m.
	// +optional
	// +default="3m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	EvacuationResponseTimeout *metav1.Duration `json:"evacuationResponseTimeout,omitempty"`

	// evictionPolicy says what happens to a pod whose owner did not accept its evacuation request in
	// time. Evict (the default) evicts it through the Eviction API, so PodDisruptionBudgets hold.
	// SignalOnly never evicts: nodemaint only requests evacuation and reports progress.
	// +optional
	// +default="Evict"
	EvictionPolicy EvictionPolicy `json:"evictionPolicy,omitempty"`

	// drainTimeout bounds the drain. When the selected nodes are not drained this long after drain
	// was set, the maintenance reports the DrainTimedOut condition naming what is left. It never
	// bypasses a PodDisruptionBudget unless drainTimeoutAction says so.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// drainTimeoutAction is what happens after drainTimeout. Report (the default) only reports.
	// Delete deletes the remaining pods, bypassing PodDisruptionBudgets: use it only when losing those
	// pods is acceptable.
	// +optional
	DrainTimeoutAction DrainTimeoutAction `json:"drainTimeoutAction,omitempty"`

	// shutdown configures what happens when a drained node is shut down for its maintenance.
	// +optional
	Shutdown *ShutdownSpec `json:"shutdown,omitempty"`
}

// EvictionPolicy says whether pods are evicted when their owners do not answer.
// +kubebuilder:validation:Enum=Evict;SignalOnly
type EvictionPolicy string

const (
	// EvictionPolicyEvict evicts the pods whose owners do not answer, through the Eviction API.
	EvictionPolicyEvict EvictionPolicy = "Evict"
	// EvictionPolicySignalOnly only requests evacuation; nothing is evicted.
	EvictionPolicySignalOnly EvictionPolicy = "SignalOnly"
)

// DrainTimeoutAction is what happens when a drain outlives its drainTimeout.
// +kubebuilder:validation:Enum=Report;Delete
type DrainTimeoutAction string

const (
	// DrainTimeoutActionReport reports the DrainTimedOut condition and keeps waiting.
	DrainTimeoutActionReport DrainTimeoutAction = "Report"
	// DrainTimeoutActionDelete deletes the remaining pods, bypassing PodDisruptionBudgets.
	DrainTimeoutActionDelete DrainTimeoutAction = "Delete"
)

// ShutdownSpec configures the out-of-service handling of KEP-2268 (non-graceful node shutdown).
type ShutdownSpec struct {
	// applyOutOfServiceTaint opts in to tainting a drained node that went NotReady while pods are
	// stuck terminating on it with node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, so that
	// Kubernetes fails its pods and volumes over. The taint is removed when the node is Ready again
	// and clean, or when the maintenance completes. A Ready node never gets it.
	// +optional
	ApplyOutOfServiceTaint bool `json:"applyOutOfServiceTaint,omitempty"`

	// notReadyGracePeriod is how long the node must have been NotReady before it is tainted.
	// +optional
	// +default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	NotReadyGracePeriod *metav1.Duration `json:"notReadyGracePeriod,omitempty"`
}

// Phase is the phase of a NodeMaintenance (KEP-4212).
// +kubebuilder:validation:Enum=Planning;Cordon;Drain;DrainComplete;MaintenanceComplete
type Phase string

const (
	// PhasePlanning: the maintenance is announced; nodes get a PreferNoSchedule taint only.
	PhasePlanning Phase = "Planning"
	// PhaseCordon: the selected nodes are unschedulable.
	PhaseCordon Phase = "Cordon"
	// PhaseDrain: the pods on the selected nodes are being moved off.
	PhaseDrain Phase = "Drain"
	// PhaseDrainComplete: every targeted pod is gone from every selected node.
	PhaseDrainComplete Phase = "DrainComplete"
	// PhaseMaintenanceComplete: cordon and drain were set back to false; nodes are restored.
	PhaseMaintenanceComplete Phase = "MaintenanceComplete"
)

// Condition types of a NodeMaintenance.
const (
	// ConditionDrained is True when every targeted pod on every selected node is gone.
	ConditionDrained = "Drained"
	// ConditionDrainTimedOut is True when the drain outlived spec.drainTimeout.
	ConditionDrainTimedOut = "DrainTimedOut"
	// ConditionNodesSelected says whether the nodeSelector selects any node: False with reason
	// NoNodesSelected or InvalidNodeSelector when it selects none, True with reason
	// AllNodesSelected when it selects every node of a cluster of several, else True with reason
	// NodesSelected.
	ConditionNodesSelected = "NodesSelected"
)

// NodeMaintenanceStatus is what the controller observed.
type NodeMaintenanceStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is the phase of the maintenance.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// selectedNodes counts the nodes the nodeSelector selects.
	// +optional
	SelectedNodes int32 `json:"selectedNodes"`

	// podsPendingEvacuation counts the targeted pods still on the selected nodes.
	// +optional
	PodsPendingEvacuation int32 `json:"podsPendingEvacuation"`

	// podsEvacuating counts the targeted pods whose owners accepted the evacuation.
	// +optional
	PodsEvacuating int32 `json:"podsEvacuating"`

	// drainStartTime is when the controller first saw drain requested; drainTimeout counts from
	// it. It is cleared when drain is set back to false.
	// +optional
	DrainStartTime *metav1.Time `json:"drainStartTime,omitempty"`

	// nodes holds the progress of every selected node, by node name.
	// +optional
	// +kubebuilder:validation:MaxProperties=10000
	Nodes map[string]NodeMaintenanceNodeStatus `json:"nodes,omitempty"`

	// conditions: Drained, DrainTimedOut, NodesSelected.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeMaintenanceNodeStatus is the progress of one node.
type NodeMaintenanceNodeStatus struct {
	// podsPendingEvacuation counts the targeted pods still on the node.
	PodsPendingEvacuation int32 `json:"podsPendingEvacuation"`

	// podsEvacuating counts the targeted pods whose owners accepted the evacuation
	// (EvacuationInitiated=True).
	PodsEvacuating int32 `json:"podsEvacuating"`

	// blocked names what keeps pods on the node: a few pod names per reason, and how many pods
	// share it. Every pod held counts in exactly one entry.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Blocked []BlockedPods `json:"blocked,omitempty"`

	// volumesAttached counts the volumes of drained pods still attached to the node: the drain
	// completes once they are detached. Volumes of skipped pods do not count.
	// +optional
	VolumesAttached int32 `json:"volumesAttached,omitempty"`

	// outOfService is true while nodemaint keeps the node tainted
	// node.kubernetes.io/out-of-service (see spec.shutdown).
	// +optional
	OutOfService bool `json:"outOfService,omitempty"`
}

// BlockedPods names pods that are held on a node for one reason.
type BlockedPods struct {
	// reason is a CamelCase word: PodDisruptionBudget, WaitingForOwner, WaitCompleted, Terminating,
	// Skipped, Evicting, EvictionFailed... and Other, which sums up the reasons past the 16th.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`

	// message explains it for a person, e.g. the PodDisruptionBudget's own message.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// pods are a few of the pods (namespace/name).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	Pods []string `json:"pods,omitempty"`

	// count is how many pods are held for this reason, including those not named.
	Count int32 `json:"count"`
}

// NodeMaintenance declares maintenance of a set of nodes: cordon them, move their pods off, and
// report progress per node (KEP-4212).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nm,categories=nodemaint
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Cordon",type=boolean,JSONPath=`.spec.cordon`
// +kubebuilder:printcolumn:name="Drain",type=boolean,JSONPath=`.spec.drain`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.selectedNodes`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.podsPendingEvacuation`
// +kubebuilder:printcolumn:name="Evacuating",type=integer,JSONPath=`.status.podsEvacuating`,priority=1
// +kubebuilder:printcolumn:name="Drained",type=string,JSONPath=`.status.conditions[?(@.type=="Drained")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeMaintenance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeMaintenanceSpec `json:"spec"`
	// +optional
	Status NodeMaintenanceStatus `json:"status,omitempty"`
}

// NodeMaintenanceList is a list of NodeMaintenances.
//
// +kubebuilder:object:root=true
type NodeMaintenanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeMaintenance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodeMaintenance{}, &NodeMaintenanceList{})
}
