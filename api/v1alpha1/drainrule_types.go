package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DrainBehavior is how the drain treats the pods a DrainRule matches.
// +kubebuilder:validation:Enum=Drain;Skip;WaitCompleted
type DrainBehavior string

const (
	// DrainBehaviorDrain drains the pods, in the order of spec.drain.order (lower first).
	DrainBehaviorDrain DrainBehavior = "Drain"
	// DrainBehaviorSkip leaves the pods on the node; the drain does not wait for them.
	DrainBehaviorSkip DrainBehavior = "Skip"
	// DrainBehaviorWaitCompleted never evicts the pods; the drain waits until they complete.
	DrainBehaviorWaitCompleted DrainBehavior = "WaitCompleted"
)

// DrainRuleDrainConfig says how matching pods are drained.
//
// +kubebuilder:validation:XValidation:rule="!has(self.order) || self.behavior == 'Drain'",message="order can only be set when behavior is Drain"
type DrainRuleDrainConfig struct {
	// behavior is Drain, Skip or WaitCompleted.
	// +required
	Behavior DrainBehavior `json:"behavior"`

	// order groups the drain: the pods of a group are drained only once every pod of the lower
	// groups is gone. Pods no rule matches are in group 0. Only with behavior Drain.
	// +optional
	// +kubebuilder:validation:Minimum=-1000000
	// +kubebuilder:validation:Maximum=1000000
	Order *int32 `json:"order,omitempty"`
}

// DrainRuleNodeSelector selects nodes.
type DrainRuleNodeSelector struct {
	// selector is a label selector for nodes. An empty selector selects every node.
	// +required
	Selector metav1.LabelSelector `json:"selector"`
}

// DrainRulePodSelector selects pods by their labels and their namespace's labels. Both must match.
//
// +kubebuilder:validation:MinProperties=1
type DrainRulePodSelector struct {
	// selector is a label selector for pods. Omitted: every pod.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// namespaceSelector is a label selector for the pods' namespaces. Omitted: every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// DrainRuleSpec says which pods on which nodes a rule applies to and how they are drained.
type DrainRuleSpec struct {
	// drain is how matching pods are drained.
	// +required
	Drain DrainRuleDrainConfig `json:"drain"`

	// nodes selects the nodes the rule applies to; the entries are ORed. Omitted: every node.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Nodes []DrainRuleNodeSelector `json:"nodes,omitempty"`

	// pods selects the pods the rule applies to; the entries are ORed.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Pods []DrainRulePodSelector `json:"pods"`
}

// DrainRuleStatus is what the controller observed of a DrainRule.
type DrainRuleStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Valid.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConditionValid is the condition of a DrainRule that says whether the controller can use it:
// False with reason InvalidSelector, naming the error, when a selector does not parse (a rule
// stored before the API server refused such selectors). While it is False, the drain holds every
// pod the rule could match, on every node it could apply to.
const ConditionValid = "Valid"

// Reasons of a DrainRule's Valid condition.
const (
	ReasonValid           = "Valid"
	ReasonInvalidSelector = "InvalidSelector"
)

// DrainRule tells the drain how to treat some pods: drain them in order, skip them, or wait for them
// to complete (Cluster API's MachineDrainRule, for nodes). When several rules match a pod, the first
// in alphabetical order of name wins. A pod label nodemaint.dev/drain=skip|wait-completed overrides
// every rule.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=nodemaint
// +kubebuilder:printcolumn:name="Behavior",type=string,JSONPath=`.spec.drain.behavior`
// +kubebuilder:printcolumn:name="Order",type=integer,JSONPath=`.spec.drain.order`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DrainRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec DrainRuleSpec `json:"spec"`
	// +optional
	Status DrainRuleStatus `json:"status,omitempty"`
}

// DrainRuleList is a list of DrainRules.
//
// +kubebuilder:object:root=true
type DrainRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DrainRule `json:"items"`
}
