// Package nodemaintenancedecide is the NodeMaintenance controller's decision, pure: from what a
// reconcile of one maintenance observed (Observation), among it the node controller's report of
// each selected node (nodedecide.Report), the rollout's turns, the status that reports them
// (bounded), and when to look again (Decision).
package nodemaintenancedecide

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/preflightworker"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// Decision is what a reconcile of a NodeMaintenance writes, and when it looks again.
type Decision struct {
	// nodes are the selected nodes with the node controller's reports of them.
	Nodes []NodeDecision
	// turns is the rollout's decision; nil without spec.rollout.
	Turns  *rollout.Decision
	Status nodemaintv1alpha1.NodeMaintenanceStatus
	// recheckAfter: look again then even if nothing changes; zero: only on a change.
	RecheckAfter time.Duration
	// preflightNotComputed: the maintenance selects this many nodes, more than the controller
	// computes the preflight of, news for its spec (an Event); zero: nothing to tell.
	PreflightNotComputed int
}

// NodeDecision is one selected node and the node controller's report of it.
type NodeDecision struct {
	Name   string
	Node   *corev1.Node
	Report nodedecide.Report
}

// Decide takes the decision of a reconcile from its Observation, purely: the rollout's turns and
// the status that reports them with the node controller's report of each selected node
// (protocol: how owners are asked, which the status says).
func Decide(o Observation, protocol nodemaintv1alpha1.EvacuationProtocol, now time.Time) Decision {
	nm := o.Maintenance
	d := Decision{Nodes: make([]NodeDecision, 0, len(o.Nodes))}
	if o.PreflightTooMany {
		d.PreflightNotComputed = len(o.Nodes)
	}
	for i, node := range o.Nodes {
		d.Nodes = append(d.Nodes, NodeDecision{Name: node.Name, Node: node, Report: o.Reports[i]})
	}
	var hold string
	d.Turns, hold = decideTurns(o, d.Nodes, now)
	d.Status = maintenanceStatus(nm, d.Nodes, d.Turns, now)
	if c := meta.FindStatusCondition(d.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted); c != nil && hold != "" {
		c.Message = few.Cut(hold, nodemaintv1alpha1.MaxConditionMessageLength)
	}
	d.Status.EvacuationProtocol = cmp.Or(protocol, nodemaintv1alpha1.EvacuationProtocolPodConditions)
	d.Status.Preflight = o.Preflight
	var controlPlanes []string
	for _, node := range o.Nodes {
		if rollout.ControlPlane(node) {
			controlPlanes = append(controlPlanes, node.Name)
		}
	}
	slices.Sort(controlPlanes)
	setCondition(&d.Status.Conditions, nodesSelectedCondition(nm, o.Selector, len(o.Nodes), o.Total, controlPlanes), now)
	setSpecValid(nm, &d.Status, now)
	SetPodDeletionGranted(nm, &d.Status, o.PodDeletionDenied, now)
	cordoned := 0
	for _, n := range d.Nodes {
		if n.Node.Spec.Unschedulable {
			cordoned++
		}
	}
	setCondition(&d.Status.Conditions, readyCondition(nm, d.Status, cordoned), now)
	// While a drain is under way, what blocks it may change with no event (an eviction refused,
	// a response timeout run out): look again now and then.
	// A maintenance that waits for a place on every node it selects does nothing there: its
	// status changes only with the nodes and their pods, whose events bring a look (hundreds of
	// such maintenances looked every 5s for nothing).
	if nm.Spec.Drain && len(o.Nodes) > 0 && meta.IsStatusConditionFalse(d.Status.Conditions, nodemaintv1alpha1.ConditionDrained) && !waitsEverywhere(nm, d.Nodes) {
		d.RecheckAfter = drainStatusRefresh
	}
	if d.Turns != nil && d.Turns.RecheckAfter > 0 {
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, d.Turns.RecheckAfter)
	}
	switch {
	case o.Planning && preflightworker.Gates(nm):
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, preflightworker.GatedRefresh)
	case o.Planning:
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, preflightworker.Refresh)
	}
	return d
}

// drainStatusRefresh is how often the status of a drain under way is computed again.
const drainStatusRefresh = 5 * time.Second

// waitsEverywhere reports whether the maintenance waits for a place (past
// maintenance.MaxMaintenancesPerNode) on every node it selects.
func waitsEverywhere(nm *nodemaintv1alpha1.NodeMaintenance, nodes []NodeDecision) bool {
	for _, n := range nodes {
		if !slices.Contains(n.Report.Beyond, nm.Name) {
			return false
		}
	}
	return len(nodes) > 0
}

// Observation is everything a reconcile of a NodeMaintenance decides from, read once from the
// cache before anything is decided.
type Observation struct {
	Maintenance *nodemaintv1alpha1.NodeMaintenance
	// nodes are the selected nodes, Selector the selector and total the nodes of the cluster.
	Nodes    []*corev1.Node
	Selector maintenance.Selector
	Total    int
	// Reports are the node controller's reports of the selected nodes, in the order of Nodes:
	// the status reports the node controller's decisions, not a computation of its own.
	Reports []nodedecide.Report
	// unschedulable names the pods created since the rollout started that the scheduler cannot
	// place; only with spec.rollout.
	Unschedulable []string
	// alerts names the firing alerts spec.rollout.haltOnAlerts selects, AlertsUnknown why they
	// cannot be told, AlertsFresh until when the answer counts; only with haltOnAlerts.
	Alerts        []string
	AlertsUnknown string
	AlertsFresh   time.Time
	// preflight is the maintenance's preflight as the worker has it, Planning whether to look
	// again for it, and preflightTooMany that it selects more nodes than the worker computes
	// the preflight of, news for this spec (see preflightworker.Worker.Status).
	Preflight                  *nodemaintv1alpha1.PreflightStatus
	Planning, PreflightTooMany bool
	// podDeletionDenied: the controller may not delete pods (permissions.PodDeletion).
	PodDeletionDenied bool
}
