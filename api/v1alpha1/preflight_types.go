package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PreflightStatus is what a drain of the selected nodes would meet, as `kubectl maintenance
// preflight` reports it, while the maintenance is Planning: what would block and what would be
// lost, worst first, within bounds.
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
	// findings are what would block or be lost, worst first, then by node: at most 50 of them.
	// findingsNotListed counts the others.
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
	// pods names up to 5 of the pods concerned; count counts them all.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	Pods  []string `json:"pods,omitempty"`
	Count int32    `json:"count"`
}

// MaxPreflightFindings is how many findings status.preflight lists at most (the CRD's limit).
const MaxPreflightFindings = 50
