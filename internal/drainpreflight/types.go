package drainpreflight

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Input is the cluster as the caller listed it, and the nodes to check: Run(in) is
// NewSnapshot(in.Cluster()).Run(in.Spec()).
type Input struct {
	// Targets name the nodes to maintain. Names of no node in Nodes are reported as missing.
	Targets []string
	// MaxUnavailable is how many of the targets are out (cordoned, draining) at once, as a
	// rollout's resolved spec.rollout.maxUnavailable; 0, or at least len(Targets), is all of them
	// at once, as a NodeMaintenance without a rollout drains them.
	MaxUnavailable int
	// IgnoreDrainLabel: the maintenance ignores the pod label nodemaint.dev/drain
	// (drainLabelPolicy Ignore).
	IgnoreDrainLabel bool
	// PodSelector is the maintenance's spec.podSelector: the drain leaves the pods it does not
	// select (Skipped). Nil: every pod.
	PodSelector labels.Selector

	// Nodes are every node of the cluster: the targets, and those their pods may move to.
	Nodes []corev1.Node
	// Pods are every pod of the cluster; those bound to a node count against its allocatable.
	Pods                     []corev1.Pod
	PodDisruptionBudgets     []policyv1.PodDisruptionBudget
	Deployments              []appsv1.Deployment
	ReplicaSets              []appsv1.ReplicaSet
	HorizontalPodAutoscalers []autoscalingv2.HorizontalPodAutoscaler
	PersistentVolumeClaims   []corev1.PersistentVolumeClaim
	PersistentVolumes        []corev1.PersistentVolume
	DrainRules               []nodemaintv1alpha1.DrainRule
	// NamespaceLabels are the labels of the namespaces, by name, for the DrainRules'
	// namespaceSelectors.
	NamespaceLabels map[string]map[string]string
}

// Spec is what one preflight checks of a snapshot: the nodes to maintain, and how.
type Spec struct {
	// Targets name the nodes to maintain. Names of no node of the snapshot are reported as
	// missing.
	Targets []string
	// MaxUnavailable: see Input.MaxUnavailable.
	MaxUnavailable int
	// IgnoreDrainLabel: see Input.IgnoreDrainLabel.
	IgnoreDrainLabel bool
	// PodSelector: see Input.PodSelector.
	PodSelector labels.Selector
	// MaxChecks bounds the work of placing the displaced pods' replacements: each set of
	// nodes out at once costs its displaced pods times the cluster's nodes. Beyond it, nothing
	// is placed (Report.NotPlaced says so). 0: no bound.
	MaxChecks int
}

// Cluster is the cluster a snapshot is made of: the objects of an Input, by pointer, so that a
// caller that holds them already (an informer's cache) need not copy them. They are read, never
// changed, and the snapshot keeps pointers to them.
type Cluster struct {
	Nodes                    []*corev1.Node
	Pods                     []*corev1.Pod
	PodDisruptionBudgets     []*policyv1.PodDisruptionBudget
	Deployments              []*appsv1.Deployment
	ReplicaSets              []*appsv1.ReplicaSet
	HorizontalPodAutoscalers []*autoscalingv2.HorizontalPodAutoscaler
	PersistentVolumeClaims   []*corev1.PersistentVolumeClaim
	PersistentVolumes        []*corev1.PersistentVolume
	DrainRules               []*nodemaintv1alpha1.DrainRule
	NamespaceLabels          map[string]map[string]string
}

// Spec is what the input asks to check.
func (in *Input) Spec() Spec {
	return Spec{Targets: in.Targets, MaxUnavailable: in.MaxUnavailable, IgnoreDrainLabel: in.IgnoreDrainLabel, PodSelector: in.PodSelector}
}

// Cluster is the input's objects, by pointer into its slices.
func (in *Input) Cluster() Cluster {
	return Cluster{
		Nodes: pointers(in.Nodes), Pods: pointers(in.Pods), PodDisruptionBudgets: pointers(in.PodDisruptionBudgets),
		Deployments: pointers(in.Deployments), ReplicaSets: pointers(in.ReplicaSets),
		HorizontalPodAutoscalers: pointers(in.HorizontalPodAutoscalers),
		PersistentVolumeClaims:   pointers(in.PersistentVolumeClaims), PersistentVolumes: pointers(in.PersistentVolumes),
		DrainRules: pointers(in.DrainRules), NamespaceLabels: in.NamespaceLabels,
	}
}

func pointers[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// Severity is how much a finding matters to whoever drains the node.
type Severity string

const (
	// Blocks: the drain would not finish by itself as things are now (a PodDisruptionBudget that
	// allows no disruption, a DrainRule that does not parse) or, in a rollout, would halt it.
	Blocks Severity = "Blocks"
	// Loses: the drain goes through, but something is lost: a pod that is not recreated, a
	// replacement that stays Pending, emptyDir data, a workload down until its replacements are
	// ready.
	Loses Severity = "Loses"
	// Info: what the drain does, for the record: pods skipped and why, workloads that surge or
	// are evicted within their budgets.
	Info Severity = "Info"
)

// rank orders severities, the worst highest.
func (s Severity) rank() int {
	switch s {
	case Blocks:
		return 3
	case Loses:
		return 2
	case Info:
		return 1
	}
	return 0
}

// Reasons of findings.
const (
	// ReasonBudgetBlocked: a budget that allows no disruption now covers a pod that would be
	// evicted; the message says why (pods unhealthy, or a budget that never allows one).
	ReasonBudgetBlocked = nodemaintv1alpha1.PreflightReasonBudgetBlocked
	// ReasonBudgetExceededByTurn: the nodes out at once hold more of a budget's pods that would
	// be evicted than it allows now.
	ReasonBudgetExceededByTurn = nodemaintv1alpha1.PreflightReasonBudgetExceededByTurn
	// ReasonCannotSurge: the only live pod of a workload moves, and nothing surges it (no
	// responder, maxSurge 0, or its required anti-affinity on the hostname leaves no node).
	ReasonCannotSurge = nodemaintv1alpha1.PreflightReasonCannotSurge
	// ReasonControlPlaneTogether: several control-plane nodes would be out at once. The finding
	// names the nodes (Object), and no pod.
	ReasonControlPlaneTogether = nodemaintv1alpha1.PreflightReasonControlPlaneTogether
	// ReasonMultipleBudgets: more than one budget covers a pod that would be evicted; the
	// Eviction API refuses to evict it.
	ReasonMultipleBudgets = "MultiplePodDisruptionBudgets"
	// ReasonInvalidDrainRule: a DrainRule that does not parse could match the pod, which is held.
	ReasonInvalidDrainRule = nodemaintv1alpha1.BlockedReasonInvalidDrainRule
	// ReasonNoRoom: the pod's replacement fits on no node that stays schedulable.
	ReasonNoRoom = "NoRoom"
	// ReasonBarePod: the pod has no controller; once evicted it is gone for good.
	ReasonBarePod = "BarePod"
	// ReasonEmptyDir: the pod's emptyDir volumes are deleted with it.
	ReasonEmptyDir = "EmptyDir"
	// ReasonNoSurge: the pod's workload cannot surge; its pods are evicted, within its budget.
	ReasonNoSurge = "NoSurge"
	// ReasonSurge: the pod's Deployment surges a replacement before the pod goes.
	ReasonSurge = "Surge"
	// ReasonSkipped: the pod stays on the node (a DrainRule, the pod label, a toleration, or the
	// maintenance's podSelector does not select it).
	ReasonSkipped = nodemaintv1alpha1.BlockedReasonSkipped
	// ReasonWaitCompleted: the drain waits for the pod to complete and never evicts it.
	ReasonWaitCompleted = nodemaintv1alpha1.BlockedReasonWaitCompleted
	// ReasonTerminating: the pod is already terminating; the drain waits for it.
	ReasonTerminating = nodemaintv1alpha1.BlockedReasonTerminating
)

// Report is the preflight of the targets.
type Report struct {
	// OutAtOnce is how many targets are assumed out at once, and Assumption says so in words.
	OutAtOnce  int    `json:"outAtOnce"`
	Assumption string `json:"assumption"`
	// Missing names targets that are no node.
	Missing []string `json:"missing,omitempty"`
	// NotPlaced, when set, says why where the displaced pods' replacements would go was not
	// checked (Spec.MaxChecks): no finding is NoRoom then.
	NotPlaced string `json:"notPlaced,omitempty"`
	// Nodes are the targets, by name.
	Nodes []NodeReport `json:"nodes"`
	// Deadlocks counts the findings of the deadlock forecast (reasons BudgetBlocked,
	// BudgetExceededByTurn, CannotSurge, ControlPlaneTogether) that block: what a rollout with
	// spec.rollout.preflight Block does not start on. A workload that cannot surge but may be
	// evicted (CannotSurge, Loses) goes down for a while; it does not deadlock.
	Deadlocks int `json:"deadlocks"`
}

// NodeReport is what the drain of one node would meet.
type NodeReport struct {
	Name string `json:"name"`
	// Verdict is the worst severity of the findings; "" when there is none.
	Verdict Severity `json:"verdict,omitempty"`
	// OutWith names the other targets assumed out at the same time when they are out in turns
	// (see Report.Assumption); empty when every target is out at once.
	OutWith []string `json:"outWith,omitempty"`
	// Targeted counts the pods the drain concerns (all but DaemonSet, mirror and finished pods);
	// Moved those it moves off the node, Skipped those it leaves running.
	Targeted int `json:"targeted"`
	Moved    int `json:"moved"`
	Skipped  int `json:"skipped"`
	// Findings, the worst first.
	Findings []Finding `json:"findings,omitempty"`
}

// Finding is one thing the drain would meet, and the pods of the node it concerns.
type Finding struct {
	Severity Severity `json:"severity"`
	Reason   string   `json:"reason"`
	// Object names what the finding is about besides the pods: "PodDisruptionBudget shop/db",
	// "StatefulSet shop/db", "DrainRule keep-cache"; empty when it is only the pods.
	Object  string `json:"object,omitempty"`
	Message string `json:"message"`
	// Pods are the pods of the node it concerns; none for a finding about nodes
	// (ControlPlaneTogether).
	Pods []string `json:"pods"`
}

// deadlocks counts the findings of the deadlock forecast (nodemaintv1alpha1.DeadlockReason)
// that block (Report.Deadlocks).
func deadlocks(nodes []NodeReport) int {
	n := 0
	for _, nr := range nodes {
		for _, f := range nr.Findings {
			if f.Severity == Blocks && nodemaintv1alpha1.DeadlockReason(f.Reason) {
				n++
			}
		}
	}
	return n
}

// Blocks reports whether some node's drain would be blocked.
func (r *Report) Blocks() bool {
	for _, n := range r.Nodes {
		if n.Verdict == Blocks {
			return true
		}
	}
	return false
}
