package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PreflightStatus is what a drain of the selected nodes would meet, as `kubectl maintenance
// preflight` reports it, while the maintenance is Planning (or its rollout waits for a clean
// deadlock forecast, spec.rollout.preflight Block): what would block and what would be lost,
// worst first, within bounds.
type PreflightStatus struct {
	// time is when it was computed. While Planning it is computed again when the spec or the
	// selected nodes change, and when the cluster changes, at most every 30s; findings that come
	// out the same keep their time.
	Time metav1.Time `json:"time"`
	// assumption says how many selected nodes are assumed out at once (a rollout's
	// maxUnavailable, or all of them).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Assumption string `json:"assumption,omitempty"`
	// nodesBlocked counts the selected nodes whose drain would be blocked; nodesLosing those
	// whose drain would lose something (and not be blocked).
	NodesBlocked int32 `json:"nodesBlocked"`
	NodesLosing  int32 `json:"nodesLosing"`
	// deadlocks counts the findings of the deadlock forecast (reasons BudgetBlocked,
	// BudgetExceededByTurn, CannotSurge, ControlPlaneTogether) of severity Blocks, listed or
	// not: a rollout with spec.rollout.preflight Block starts only when it is 0.
	// +optional
	Deadlocks int32 `json:"deadlocks,omitempty"`
	// findings are what would block or be lost, worst first (the deadlock forecast's first among
	// those that block), then by node: at most 50 of them. findingsNotListed counts the others.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Findings []PreflightFinding `json:"findings,omitempty"`
	// +optional
	FindingsNotListed int32 `json:"findingsNotListed,omitempty"`
}

// PreflightFinding is one thing a drain of one node would meet.
type PreflightFinding struct {
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// severity: Blocks (the drain would not finish by itself, or a rollout would halt) or Loses
	// (it goes through, but something is lost).
	// +kubebuilder:validation:Enum=Blocks;Loses
	Severity string `json:"severity"`
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// object names what the finding is about besides the pods ("PodDisruptionBudget shop/db").
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Object string `json:"object,omitempty"`
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message"`
	// pods names up to 5 of the pods concerned; count counts them all (0 for a finding about
	// nodes, ControlPlaneTogether).
	// +optional
	// +kubebuilder:validation:MaxItems=5
	Pods  []string `json:"pods,omitempty"`
	Count int32    `json:"count"`
}

// Reasons of the preflight's deadlock forecast: a rollout with spec.rollout.preflight Block
// does not start on a finding of one of them of severity Blocks.
const (
	// PreflightReasonBudgetBlocked: a PodDisruptionBudget allows no disruption now and covers a
	// pod the drain would evict; the message says why (pods unhealthy, or minAvailable equal to
	// its pods / maxUnavailable 0, which never allows one).
	PreflightReasonBudgetBlocked = "BudgetBlocked"
	// PreflightReasonBudgetExceededByTurn: the nodes out at once (one turn of the rollout, or
	// every selected node without one) hold more of a budget's pods that the drain would evict
	// than the budget allows at once.
	PreflightReasonBudgetExceededByTurn = "BudgetExceededByTurn"
	// PreflightReasonCannotSurge: a workload of a single live pod that the drain moves cannot
	// surge (no responder answers for it, maxSurge 0, or its required anti-affinity on the
	// hostname leaves no node free): it is down until its replacement is ready (Loses), or never
	// evicted when a budget forbids it (Blocks).
	PreflightReasonCannotSurge = "CannotSurge"
	// PreflightReasonControlPlaneTogether: several control-plane nodes
	// (node-role.kubernetes.io/control-plane) would be out at once.
	PreflightReasonControlPlaneTogether = "ControlPlaneTogether"
	// ReasonPreflightBlocked is the RolloutHalted (and Ready) reason of a rollout with
	// spec.rollout.preflight Block that does not start: its forecast finds a deadlock, or cannot
	// be computed (more than 1000 nodes).
	ReasonPreflightBlocked = "PreflightBlocked"
	// ReasonPreflightPending is the RolloutHalted reason of such a rollout while its forecast is
	// not computed yet (seconds, from the controller's cache).
	ReasonPreflightPending = "PreflightPending"
)

// DeadlockReason reports whether a preflight finding's reason is one of the deadlock forecast's.
func DeadlockReason(reason string) bool {
	switch reason {
	case PreflightReasonBudgetBlocked, PreflightReasonBudgetExceededByTurn, PreflightReasonCannotSurge, PreflightReasonControlPlaneTogether:
		return true
	}
	return false
}

// MaxPreflightFindings is how many findings status.preflight lists at most (the CRD's limit).
const MaxPreflightFindings = 50
