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
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.maxBlockedNodes) || self.rollout.maxBlockedNodes == 0 || has(self.drainTimeout)",message="rollout.maxBlockedNodes requires drainTimeout: a node's drain is blocked when it is not drained within drainTimeout after its turn started"
// +kubebuilder:validation:XValidation:rule="!has(self.drainTimeoutAction) || self.drainTimeoutAction == 'Report' || !has(self.drainTimeout) || !self.drainTimeout.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(h|m|s|ms|us|ns))+$') || (duration(self.drainTimeout) >= duration('5m') && duration(self.drainTimeout) >= (has(self.evacuationResponseTimeout) && self.evacuationResponseTimeout.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(h|m|s|ms|us|ns))+$') ? duration(self.evacuationResponseTimeout) : duration('3m')))",message="drainTimeoutAction: Delete requires a drainTimeout of at least 5m and at least evacuationResponseTimeout (default 3m): pods are deleted only after every owner had its chance to answer"
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
	// (EvacuationInitiated=True) before the pod is evicted. KEP-4212's figure is 3m. Between 1s and
	// 24h.
	// +optional
	// +default="3m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(h|m|s|ms|us|ns))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="evacuationResponseTimeout must be a duration between 1s and 24h, such as 90s, 15m or 1h30m (units h, m, s, ms, us, ns; no days or weeks)"
	EvacuationResponseTimeout *Duration `json:"evacuationResponseTimeout,omitempty"`

	// evictionPolicy says what happens to a pod whose owner did not accept its evacuation request in
	// time. Evict (the default) evicts it through the Eviction API, so PodDisruptionBudgets hold.
	// SignalOnly never evicts: nodemaint only requests evacuation and reports progress.
	// +optional
	// +default="Evict"
	EvictionPolicy EvictionPolicy `json:"evictionPolicy,omitempty"`

	// drainTimeout bounds the drain. When the selected nodes are not drained this long after drain
	// was set, the maintenance reports the DrainTimedOut condition naming what is left. It never
	// bypasses a PodDisruptionBudget unless drainTimeoutAction says so. Between 1s and 168h; with
	// drainTimeoutAction Delete at least 5m and at least evacuationResponseTimeout.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(h|m|s|ms|us|ns))+$') && duration(self) >= duration('1s') && duration(self) <= duration('168h')",message="drainTimeout must be a duration between 1s and 168h, such as 90s, 15m or 1h30m (units h, m, s, ms, us, ns; no days or weeks)"
	DrainTimeout *Duration `json:"drainTimeout,omitempty"`

	// drainTimeoutAction is what happens after drainTimeout. Report (the default) only reports.
	// Delete deletes the remaining pods, bypassing PodDisruptionBudgets: use it only when losing those
	// pods is acceptable.
	// +optional
	DrainTimeoutAction DrainTimeoutAction `json:"drainTimeoutAction,omitempty"`

	// shutdown configures what happens when a drained node is shut down for its maintenance.
	// +optional
	Shutdown *ShutdownSpec `json:"shutdown,omitempty"`

	// drainLabelPolicy says whether the pod label nodemaint.dev/drain (skip, wait-completed) may
	// override the DrainRules. Honor (the default): a pod's owner can keep its pod on the node or
	// make the drain wait for it to complete. Ignore: only DrainRules, which cluster admins write,
	// decide; pods carrying the label are drained like the others. When several maintenances drain
	// one node, Ignore wins for the pods it selects (podSelector), though each maintenance evicts
	// and deletes by its own policy. Skipped pods are counted and named in the status either way.
	// +optional
	// +default="Honor"
	DrainLabelPolicy DrainLabelPolicy `json:"drainLabelPolicy,omitempty"`

	// autoscalers says whether Karpenter and the cluster autoscaler are kept from removing a node
	// while this maintenance cordons or drains it (a drained, empty node waiting for its reboot
	// looks like one to consolidate). Hold (the default) annotates the node
	// karpenter.sh/do-not-disrupt=true and cluster-autoscaler.kubernetes.io/scale-down-disabled=true,
	// each only where no one else set it, and removes what it set once no maintenance holds the
	// node; another writer's value is never touched. Ignore leaves them free to remove it. A node
	// they are already removing is reported (status.nodes[].removedBy), never held.
	// +optional
	// +default="Hold"
	Autoscalers AutoscalerPolicy `json:"autoscalers,omitempty"`

	// podSelector limits the drain to the pods it selects, by their labels (kubectl drain's
	// --pod-selector). The pods it does not select are left running and reported as skipped, like
	// pods a Skip DrainRule keeps: not asked to move, never evicted or deleted by this
	// maintenance. When several maintenances drain one node, a pod is drained if one of them
	// selects it, and each evicts and deletes only the pods it selects itself. Omitted: every
	// targeted pod. At most 32 matchLabels and 16 matchExpressions of 32 values each
	// (hack/crd-bounds sets these limits and the rules that refuse what does not parse).
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// evictionGracePeriodSeconds is the grace period, in seconds, of every eviction and deletion
	// nodemaint sends for this maintenance (kubectl drain's --grace-period): the pod gets this
	// long to terminate instead of its own terminationGracePeriodSeconds. When several
	// maintenances evict or delete one pod, the shortest applies, one that sets none counting as
	// the pod's own. Pods their owners move (a Deployment's surge) terminate as their owners
	// remove them. Between 1 and 86400 (24h); 0 is refused: it would kill the pod at once, with no
	// grace at all. Omitted: each pod's own terminationGracePeriodSeconds.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 86400",message="evictionGracePeriodSeconds must be between 1 and 86400 (24h); 0 would kill the pods at once, with no grace: omit it to give each pod its own terminationGracePeriodSeconds"
	EvictionGracePeriodSeconds *int64 `json:"evictionGracePeriodSeconds,omitempty"`

	// rollout rolls the maintenance through the selected nodes a few at a time (see RolloutSpec).
	// Without it, every selected node is cordoned and drained at once.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`
}

// AutoscalerPolicy says whether node autoscalers are kept from removing a node under maintenance.
// +kubebuilder:validation:Enum=Hold;Ignore
type AutoscalerPolicy string

const (
	// AutoscalerPolicyHold keeps Karpenter and the cluster autoscaler from removing the node.
	AutoscalerPolicyHold AutoscalerPolicy = "Hold"
	// AutoscalerPolicyIgnore leaves them free to remove it.
	AutoscalerPolicyIgnore AutoscalerPolicy = "Ignore"
)

// DrainLabelPolicy says whether pods' nodemaint.dev/drain labels override DrainRules.
// +kubebuilder:validation:Enum=Honor;Ignore
type DrainLabelPolicy string

const (
	// DrainLabelPolicyHonor lets the pod label nodemaint.dev/drain override DrainRules.
	DrainLabelPolicyHonor DrainLabelPolicy = "Honor"
	// DrainLabelPolicyIgnore ignores the pod label: only DrainRules decide.
	DrainLabelPolicyIgnore DrainLabelPolicy = "Ignore"
)

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
	// applyOutOfServiceTaint opts in to tainting a drained node that is shut down while pods are
	// stuck terminating on it with node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, so that
	// Kubernetes fails its pods and volumes over (KEP-2268). NotReady alone is no proof of a
	// shutdown (a network partition looks the same while the pods still run): the node must also
	// carry positive evidence, the cloud provider's node.cloudprovider.kubernetes.io/shutdown
	// taint or the annotation nodemaint.dev/shutdown-confirmed set to the node's current
	// status.nodeInfo.bootID by the automation that shut it down. The taint is removed once the
	// node is Ready again and no pod is stuck terminating on it. A Ready node never gets it.
	// +optional
	ApplyOutOfServiceTaint bool `json:"applyOutOfServiceTaint,omitempty"`

	// notReadyGracePeriod is how long the node must have been NotReady, with evidence of its
	// shutdown, before it is tainted. Between 1s and 24h.
	// +optional
	// +default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(h|m|s|ms|us|ns))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="notReadyGracePeriod must be a duration between 1s and 24h, such as 90s, 15m or 1h30m (units h, m, s, ms, us, ns; no days or weeks)"
	NotReadyGracePeriod *Duration `json:"notReadyGracePeriod,omitempty"`
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
	// PhaseDrainComplete: every targeted pod is gone from every selected node, and at least one
	// node is selected.
	PhaseDrainComplete Phase = "DrainComplete"
	// PhaseMaintenanceComplete: cordon and drain were set back to false; nodes are restored.
	PhaseMaintenanceComplete Phase = "MaintenanceComplete"

	// PhaseReleased and PhaseFailed are a node's phase in a rollout once its turn ended (the node
	// annotation only): released, or released as failed (not drained in time, onNodeFailure
	// Continue). The node is restored; the entry stays until the maintenance ends, so that the
	// node is not taken again.
	PhaseReleased Phase = "Released"
	PhaseFailed   Phase = "Failed"
)

// Condition types of a NodeMaintenance.
const (
	// ConditionDrained is True when every targeted pod on every selected node is gone; never when
	// the nodeSelector selects no node (False, reason NoNodesSelected). Its message names a few of
	// the pods the drain skipped and left running.
	ConditionDrained = "Drained"
	// ConditionDrainTimedOut is True when the drain outlived spec.drainTimeout.
	ConditionDrainTimedOut = "DrainTimedOut"
	// ConditionNodesSelected says whether the nodeSelector selects any node: False with reason
	// NoNodesSelected or InvalidNodeSelector when it selects none, True with reason
	// AllNodesSelected when it selects every node of a cluster of several, else True with reason
	// NodesSelected.
	ConditionNodesSelected = "NodesSelected"
	// ConditionSpecValid is False, reason InvalidSpec, while the spec has a field the controller
	// cannot use (NodeMaintenanceSpec.Problems: a duration or podSelector stored before the API
	// server refused it); the message names the field and its value. The maintenance then keeps cordoning and may
	// request evacuation, but never evicts, deletes or taints. Absent when the spec is valid.
	ConditionSpecValid = "SpecValid"
	// ConditionRolloutHalted says whether a rollout starts no new node, and why (spec.rollout).
	ConditionRolloutHalted = "RolloutHalted"
	// ConditionNodesOverMaintenanceLimit is True, reason TooManyMaintenances, while the
	// maintenance waits for a place on some of its selected nodes: at most 64 NodeMaintenances act
	// on one node at once (those the node already names keep their place, then the oldest), and
	// these nodes have that many acting already. The message counts those nodes and names a few.
	// The maintenance does nothing to them (no cordon, taint, evacuation request, eviction or
	// deletion) until a place frees, then acts on each as on the others; it is not Drained
	// before. Absent otherwise.
	ConditionNodesOverMaintenanceLimit = "NodesOverMaintenanceLimit"
	// ConditionPodDeletionGranted is present only with drainTimeoutAction Delete, and says
	// whether the controller may delete pods, which the install grants only when asked (Helm
	// value podDeletion.enabled; kustomize component config/pod-deletion). False, reason
	// PodDeletionNotGranted: nothing is deleted; the pods left after drainTimeout are evicted
	// through their PodDisruptionBudgets, as with drainTimeoutAction Report.
	ConditionPodDeletionGranted = "PodDeletionGranted"
	// ConditionReady says whether the maintenance reached what its spec asks (kstatus semantics,
	// so that GitOps tools wait on it): True when a drain is Drained (reason Drained; a rollout
	// drained node by node included), a cordon holds on every selected node (Cordoned; False,
	// Cordoning, until it does; RolloutComplete for a rollout that only cordons), a Planning maintenance is announced
	// (Planned), or the maintenance is complete (MaintenanceComplete). Otherwise False with the
	// reason and message of what it waits for: the spec (InvalidSpec), the nodeSelector
	// (NoNodesSelected, InvalidNodeSelector), the drain's timeout (DrainTimedOut), a halted
	// rollout (its RolloutHalted reason), or the drain under way (Drained's reason).
	ConditionReady = "Ready"
)

// Reasons of the NodeMaintenance conditions. NoNodesSelected is a reason of both Drained and
// NodesSelected.
const (
	// Drained.
	ReasonDrainNotRequested = "DrainNotRequested"
	ReasonPodsPending       = "PodsPending"
	ReasonVolumesAttached   = "VolumesAttached"
	ReasonDrained           = "Drained"
	ReasonNoNodesSelected   = "NoNodesSelected"
	// DrainTimedOut.
	ReasonWithinDrainTimeout = "WithinDrainTimeout"
	ReasonDrainTimedOut      = "DrainTimedOut"
	// NodesSelected.
	ReasonNodesSelected       = "NodesSelected"
	ReasonAllNodesSelected    = "AllNodesSelected"
	ReasonInvalidNodeSelector = "InvalidNodeSelector"
	// ReasonEtcdQuorumAtRisk (NodesSelected False): a maintenance without spec.rollout that cordons
	// or drains selects more than one control-plane node, which it would take at once; it does
	// not start.
	ReasonEtcdQuorumAtRisk = "EtcdQuorumAtRisk"
	// SpecValid.
	ReasonInvalidSpec = "InvalidSpec"
	// PodDeletionGranted.
	ReasonPodDeletionGranted    = "PodDeletionGranted"
	ReasonPodDeletionNotGranted = "PodDeletionNotGranted"
	// NodesOverMaintenanceLimit, Drained, and the blocked entry of a node the maintenance waits
	// for a place on.
	ReasonTooManyMaintenances = "TooManyMaintenances"

	ReasonRolling                   = "Rolling"
	ReasonRolloutComplete           = "RolloutComplete"
	ReasonReplacementsUnschedulable = "ReplacementsUnschedulable"
	ReasonNodeDrainTimedOut         = "NodeDrainTimedOut"
	ReasonOutsideWindow             = "OutsideWindow"
	// RolloutHalted False while spec.rollout.soakTime runs after a node's turn ended: no new
	// node starts until status.rollout.soakingUntil.
	ReasonSoaking = "Soaking"
	// RolloutHalted by spec.rollout.haltOnAlerts: alerts it selects fire, or whether they do
	// cannot be told.
	ReasonAlertsFiring  = "AlertsFiring"
	ReasonAlertsUnknown = "AlertsUnknown"

	// Ready, besides the reasons of the conditions it follows.
	ReasonPlanned             = "Planned"
	ReasonCordoned            = "Cordoned"
	ReasonCordoning           = "Cordoning"
	ReasonMaintenanceComplete = "MaintenanceComplete"
)

// Reasons a pod is still on a node under maintenance: the reason of a BlockedPods entry.
const (
	BlockedReasonPodDisruptionBudget = "PodDisruptionBudget"
	BlockedReasonWaitingForOwner     = "WaitingForOwner"
	BlockedReasonEvacuatingByOwner   = "EvacuatingByOwner"
	BlockedReasonTerminating         = "Terminating"
	BlockedReasonWaitCompleted       = "WaitCompleted"
	BlockedReasonSkipped             = "Skipped"
	BlockedReasonWaitingForOrder     = "WaitingForLowerOrder"
	BlockedReasonEvictionFailed      = "EvictionFailed"
	BlockedReasonEvicting            = "Evicting"
	// BlockedReasonProtected: the pod is never evicted or deleted by nodemaint (its own
	// controller's pods); only its owner moves it.
	BlockedReasonProtected = "Protected"
	// BlockedReasonInvalidDrainRule: the pod is held because a DrainRule that could match it does
	// not parse.
	BlockedReasonInvalidDrainRule = "InvalidDrainRule"
	// BlockedReasonOther groups the pods of the reasons that do not fit in the status's entries.
	BlockedReasonOther = "Other"
)

// EvacuationProtocol is how nodemaint asks owners to move their pods.
// +kubebuilder:validation:Enum=PodConditions;EvictionRequest
type EvacuationProtocol string

const (
	// EvacuationProtocolPodConditions: the EvacuationRequest pod condition (KEP-4212), answered
	// with EvacuationInitiated.
	EvacuationProtocolPodConditions EvacuationProtocol = "PodConditions"
	// EvacuationProtocolEvictionRequest: an EvictionRequest per pod (KEP-4563,
	// lifecycle.k8s.io/v1alpha1), answered by the responders of the pod's Eviction.
	EvacuationProtocolEvictionRequest EvacuationProtocol = "EvictionRequest"
)

// NodeMaintenanceStatus is what the controller observed. Its size is bounded whatever the number
// of selected nodes: the totals cover every selected node, and nodes lists only a bounded number
// of them, those with something to report.
type NodeMaintenanceStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is the phase of the maintenance.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// evacuationProtocol is how the controller asks the owners of the targeted pods to move them:
	// PodConditions (the EvacuationRequest pod condition, KEP-4212) or EvictionRequest (an
	// EvictionRequest per pod, KEP-4563's lifecycle.k8s.io/v1alpha1). It is chosen when the
	// controller starts (--evacuation-protocol).
	// +optional
	EvacuationProtocol EvacuationProtocol `json:"evacuationProtocol,omitempty"`

	// selectedNodes counts the nodes the nodeSelector selects.
	// +optional
	SelectedNodes int32 `json:"selectedNodes"`

	// nodesPending counts the selected nodes with targeted pods still on them.
	// +optional
	NodesPending int32 `json:"nodesPending"`

	// nodesDrained counts the selected nodes that are drained: drain is requested, and no
	// targeted pod and no volume of a drained pod is left on them.
	// +optional
	NodesDrained int32 `json:"nodesDrained"`

	// nodesOutOfService counts the selected nodes nodemaint keeps tainted
	// node.kubernetes.io/out-of-service (see spec.shutdown).
	// +optional
	NodesOutOfService int32 `json:"nodesOutOfService,omitempty"`

	// podsPendingEvacuation counts the targeted pods still on the selected nodes.
	// +optional
	PodsPendingEvacuation int32 `json:"podsPendingEvacuation"`

	// podsEvacuating counts the targeted pods whose owners accepted the evacuation.
	// +optional
	PodsEvacuating int32 `json:"podsEvacuating"`

	// podsSkipped counts the pods on the selected nodes that the drain leaves running: skipped by
	// the pod label nodemaint.dev/drain=skip, by a DrainRule, because they tolerate the
	// unschedulable taint, or because no podSelector of the maintenances draining their node
	// selects them. They do not hold the drain up; the Drained condition names a few.
	// +optional
	PodsSkipped int32 `json:"podsSkipped"`

	// volumesAttached counts the volumes of drained pods still attached to the selected nodes.
	// +optional
	VolumesAttached int32 `json:"volumesAttached,omitempty"`

	// drainStartTime is when the controller first saw drain requested; drainTimeout counts from
	// it. It is cleared when drain is set back to false.
	// +optional
	DrainStartTime *metav1.Time `json:"drainStartTime,omitempty"`

	// nodes details the selected nodes that have something to report (targeted or skipped pods
	// left, volumes attached, out of service), by node name: at most 100 of them, and no more
	// than fit in 128 KiB, chosen by the most pods pending, then the most volumes attached, then
	// the most pods skipped, then by name. nodesNotListed counts the others; a selected node
	// neither listed nor counted there has nothing left to report.
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	Nodes map[string]NodeMaintenanceNodeStatus `json:"nodes,omitempty"`

	// nodesNotListed counts the selected nodes with something to report that nodes leaves out.
	// +optional
	NodesNotListed int32 `json:"nodesNotListed,omitempty"`

	// rollout is where the rollout stands (spec.rollout only).
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// preflight is what a drain of the selected nodes would meet, while the maintenance is
	// Planning, and while a rollout with spec.rollout.preflight Block waits for a clean
	// forecast to start (see PreflightStatus); cleared once it cordons or drains.
	// +optional
	Preflight *PreflightStatus `json:"preflight,omitempty"`

	// conditions: Drained, DrainTimedOut, NodesSelected, SpecValid, RolloutHalted,
	// NodesOverMaintenanceLimit.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Bounds of a NodeMaintenance's status, as the controller keeps them; the CRD's limits match.
const (
	// MaxStatusNodes is how many nodes status.nodes lists at most.
	MaxStatusNodes = 100
	// MaxStatusNodesBytes is how large status.nodes may grow, in bytes of JSON: three nodes
	// whose every field is at its limit, or 100 nodes with a few reasons each.
	MaxStatusNodesBytes = 128 << 10
	// MaxBlockedMessageLength is the length of a blocked entry's message; longer ones are cut.
	MaxBlockedMessageLength = 512
	// MaxConditionMessageLength is the length of a condition's message in the status; longer
	// ones are cut (the API allows 32,768, which a message naming every node would pass).
	MaxConditionMessageLength = 2048
)

// NodeMaintenanceNodeStatus is the progress of one node.
type NodeMaintenanceNodeStatus struct {
	// podsPendingEvacuation counts the targeted pods still on the node.
	PodsPendingEvacuation int32 `json:"podsPendingEvacuation"`

	// podsEvacuating counts the targeted pods whose owners accepted the evacuation
	// (EvacuationInitiated=True).
	PodsEvacuating int32 `json:"podsEvacuating"`

	// podsSkipped counts the pods the drain leaves running on the node.
	// +optional
	PodsSkipped int32 `json:"podsSkipped,omitempty"`

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

	// removedBy names the autoscaler already removing the node (Karpenter, ClusterAutoscaler),
	// as its taint on the node says: nodemaint drains it on but does not hold it.
	// +optional
	// +kubebuilder:validation:Enum=Karpenter;ClusterAutoscaler
	RemovedBy string `json:"removedBy,omitempty"`
}

// BlockedPods names pods that are held on a node for one reason.
type BlockedPods struct {
	// reason is a CamelCase word: PodDisruptionBudget, WaitingForOwner, WaitCompleted, Terminating,
	// Skipped, Evicting, EvictionFailed... and Other, which sums up the reasons past the 16th.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`

	// message explains it for a person, e.g. the PodDisruptionBudget's own message. Longer
	// messages are cut to 512 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`

	// pods are a few of the pods (namespace/name).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:MaxLength=317
	Pods []string `json:"pods,omitempty"`

	// count is how many pods are held for this reason, including those not named.
	Count int32 `json:"count"`
}

// NodeMaintenance declares maintenance of a set of nodes: cordon them, move their pods off, and
// report progress per node (KEP-4212).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nmaint,categories=nodemaint
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Cordon",type=boolean,JSONPath=`.spec.cordon`
// +kubebuilder:printcolumn:name="Drain",type=boolean,JSONPath=`.spec.drain`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.selectedNodes`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.podsPendingEvacuation`
// +kubebuilder:printcolumn:name="Evacuating",type=integer,JSONPath=`.status.podsEvacuating`,priority=1
// +kubebuilder:printcolumn:name="Skipped",type=integer,JSONPath=`.status.podsSkipped`,priority=1
// +kubebuilder:printcolumn:name="Drained",type=string,JSONPath=`.status.conditions[?(@.type=="Drained")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=1
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.status.evacuationProtocol`,priority=1
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
