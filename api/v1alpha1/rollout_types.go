package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutSpec rolls a maintenance through its selected nodes a few at a time, as a node-pool
// upgrade does: at most maxUnavailable nodes are in their turn at once (cordoned, draining, or
// drained and not yet released); the others wait in Planning, and a node whose turn ended
// (released) is restored and uncordoned before the next one starts.
type RolloutSpec struct {
	// maxUnavailable is how many selected nodes may be in their turn at once: a number, or a
	// percentage of the selected nodes ("25%"), rounded down but at least 1. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="maxUnavailable must be a number of nodes of at least 1, or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// release says when a node's turn ends, so that it is restored (uncordoned, its taints and
	// conditions removed) and the next node starts. Drained (the default): as soon as it is
	// drained. Rebooted: once drained, then rebooted (status.nodeInfo.bootID changed since its
	// turn started) and Ready again, as a reboot daemon or an OS upgrade does. Manual: when the
	// admin or their automation completes the node (`kubectl maintenance complete NODE`, or the
	// node annotation nodemaint.dev/complete naming the maintenance).
	// +optional
	// +kubebuilder:default=Drained
	Release ReleasePolicy `json:"release,omitempty"`

	// onNodeFailure is what the rollout does when a node in its turn is not drained within
	// drainTimeout (counted from the start of its turn). Pause (the default): no new node starts
	// until the node is drained or released. Continue: the node is released as failed (restored
	// and uncordoned, counted in nodesFailed) and the rollout goes on.
	// +optional
	// +kubebuilder:default=Pause
	OnNodeFailure NodeFailurePolicy `json:"onNodeFailure,omitempty"`

	// window restricts when a node may start its turn; a node already in its turn finishes it.
	// +optional
	Window *MaintenanceWindow `json:"window,omitempty"`

	// haltOnAlerts halts the rollout while Prometheus alerts it selects fire: no new node starts
	// its turn (RolloutHalted, reason AlertsFiring, naming them); nodes in their turn finish it.
	// The controller reads the alerts from its --prometheus-url; without one, or while Prometheus
	// does not answer, the rollout halts too (reason AlertsUnknown).
	// +optional
	HaltOnAlerts *AlertSelector `json:"haltOnAlerts,omitempty"`

	// soakTime is how long the rollout waits after a node's turn ends (released, or released as
	// failed) before another node starts its turn, as AKS's nodeSoakDuration: time to see the
	// released node serve again before the next is taken. Nodes already in their turn go on.
	// Between 0s (the default: no wait) and 24h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(h|m|s|ms|us|ns))+$') && duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="soakTime must be a duration between 0s and 24h, such as 30s, 10m or 1h (units h, m, s, ms, us, ns; no days or weeks)"
	SoakTime *Duration `json:"soakTime,omitempty"`

	// maxBlockedNodes is how many nodes whose drain is blocked the rollout leaves cordoned and
	// goes on without, as AKS's undrainableNodeBehavior Cordon with maxBlockedNodes. A node is
	// blocked when it is not drained within drainTimeout after its turn started (the condition
	// DrainTimedOut names it): it stays cordoned and in its turn, its drain goes on (it is released
	// when the release policy says so, once drained), it is listed as blocked
	// (status.rollout.inTurn[].blocked), and it no longer counts against maxUnavailable, so the
	// next node starts. At most maxBlockedNodes nodes are blocked at once; one more is handled by
	// onNodeFailure: Pause halts the rollout, Continue releases it as failed. 0 (the default):
	// onNodeFailure handles the first. Needs drainTimeout. Between 0 and 100.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxBlockedNodes int32 `json:"maxBlockedNodes,omitempty"`

	// preflight says what the preflight's deadlock forecast does before the rollout starts (see
	// PreflightStatus): Warn (the default) only reports it in status.preflight; Block starts no
	// node while the forecast finds a deadlock (a finding of reason BudgetBlocked,
	// BudgetExceededByTurn, CannotSurge or ControlPlaneTogether that blocks): the nodes stay in Planning,
	// uncordoned, and RolloutHalted is True, reason PreflightBlocked, naming the findings (and a
	// Warning Event). Until the forecast is computed (seconds) the reason is PreflightPending.
	// The forecast is computed again as the cluster changes; once it is clean the rollout
	// starts, and from then on the forecast no longer holds it.
	// +optional
	// +kubebuilder:default=Warn
	Preflight PreflightPolicy `json:"preflight,omitempty"`
}

// PreflightPolicy says whether a rollout waits for a clean deadlock forecast before it starts.
// +kubebuilder:validation:Enum=Warn;Block
type PreflightPolicy string

const (
	// PreflightWarn reports the forecast only.
	PreflightWarn PreflightPolicy = "Warn"
	// PreflightBlock starts the rollout only once the forecast finds no deadlock.
	PreflightBlock PreflightPolicy = "Block"
)

// Bounds of the rollout's fields; the CRD's validation rules enforce the same.
const (
	MaxSoakTime        = 24 * time.Hour
	MaxBlockedNodesMax = 100
)

// AlertSelector selects firing Prometheus alerts by name, by labels, or both (an alert then
// matches both).
// +kubebuilder:validation:XValidation:rule="has(self.alertNames) || has(self.matchLabels)",message="haltOnAlerts needs alertNames, matchLabels or both"
type AlertSelector struct {
	// alertNames are alert names (their alertname label): an alert of any of them matches.
	// Empty: an alert of any name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	AlertNames []string `json:"alertNames,omitempty"`

	// matchLabels are labels a matching alert carries, each with this value: {severity:
	// critical} halts on every critical alert.
	// +optional
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// ReleasePolicy says when a node's turn in a rollout ends.
// +kubebuilder:validation:Enum=Drained;Rebooted;Manual
type ReleasePolicy string

const (
	ReleaseDrained  ReleasePolicy = "Drained"
	ReleaseRebooted ReleasePolicy = "Rebooted"
	ReleaseManual   ReleasePolicy = "Manual"
)

// NodeFailurePolicy says what a rollout does with a node that is not drained in time.
// +kubebuilder:validation:Enum=Pause;Continue
type NodeFailurePolicy string

const (
	NodeFailurePause    NodeFailurePolicy = "Pause"
	NodeFailureContinue NodeFailurePolicy = "Continue"
)

// MaintenanceWindow is when nodes may start their turn: from each time the schedule fires, for
// duration.
type MaintenanceWindow struct {
	// schedule is a cron schedule of five fields (minute hour day-of-month month day-of-week), as
	// a CronJob's: "0 22 * * 1-5" opens the window at 22:00 on weekdays.
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.split(' ').filter(f, f != '').size() == 5",message="schedule must be a cron schedule of five fields: minute hour day-of-month month day-of-week"
	Schedule string `json:"schedule"`

	// duration is how long the window stays open each time, between 1m and 168h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]+([.][0-9]*)?|[.][0-9]+)(h|m|s|ms|us|ns))+$') && duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="duration must be a duration between 1m and 168h, such as 90m or 4h (units h, m, s, ms, us, ns; no days or weeks)"
	Duration Duration `json:"duration"`

	// timeZone is the IANA time zone the schedule is read in ("Europe/Berlin"); default UTC.
	// Daylight saving time shifts as a CronJob's does: a time skipped by the change does not
	// fire, a time repeated fires once.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// RolloutStatus is where a rollout stands.
type RolloutStatus struct {
	// nodesDone counts the selected nodes whose turn ended (released), nodesFailed those of them
	// released as failed (onNodeFailure Continue).
	// +optional
	NodesDone int32 `json:"nodesDone"`
	// +optional
	NodesFailed int32 `json:"nodesFailed,omitempty"`
	// nodesInTurn counts the selected nodes in their turn; nodesWaiting those waiting for it.
	// +optional
	NodesInTurn int32 `json:"nodesInTurn"`
	// +optional
	NodesWaiting int32 `json:"nodesWaiting"`

	// inTurn lists the nodes in their turn, with when it started: the node reconciler cordons
	// and drains only these. At most maxUnavailable (and 1000) of them.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	InTurn []NodeTurn `json:"inTurn,omitempty"`

	// nodesBlocked counts the nodes in their turn whose drain is blocked (spec.rollout.maxBlockedNodes):
	// inTurn marks them blocked.
	// +optional
	NodesBlocked int32 `json:"nodesBlocked,omitempty"`
	// lastReleaseTime is when the rollout last saw a node's turn end; spec.rollout.soakTime counts
	// from it.
	// +optional
	LastReleaseTime *metav1.Time `json:"lastReleaseTime,omitempty"`
	// soakingUntil is, while nodes wait and spec.rollout.soakTime has not run since the last
	// release, when the next node may start its turn.
	// +optional
	SoakingUntil *metav1.Time `json:"soakingUntil,omitempty"`
}

// NodeTurn is one node's turn in a rollout.
type NodeTurn struct {
	// name is the node's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// since is when its turn started; drainTimeout counts from it.
	Since metav1.Time `json:"since"`
	// bootID is the node's status.nodeInfo.bootID when its turn started: release Rebooted waits
	// for another.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	BootID string `json:"bootID,omitempty"`
	// failed says the node was not drained within drainTimeout.
	// +optional
	Failed bool `json:"failed,omitempty"`
	// blocked says the node was not drained within drainTimeout and the rollout went on without
	// it (spec.rollout.maxBlockedNodes): it stays cordoned and in its turn, its drain goes on, and
	// it does not count against maxUnavailable.
	// +optional
	Blocked bool `json:"blocked,omitempty"`
}

// MaxRolloutInTurn is how many nodes status.rollout.inTurn lists at most (the CRD's limit).
const MaxRolloutInTurn = 1000
