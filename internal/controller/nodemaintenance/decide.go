package nodemaintenance

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/preflightworker"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// decision is what a reconcile of a NodeMaintenance writes, and when it looks again.
type decision struct {
	// nodes are the decisions about the selected nodes, as the node controller takes them.
	nodes []nodeDecision
	// turns is the rollout's decision; nil without spec.rollout.
	turns  *rollout.Decision
	status nodemaintv1alpha1.NodeMaintenanceStatus
	// recheckAfter: look again then even if nothing changes; zero: only on a change.
	recheckAfter time.Duration
	// preflightNotComputed: the maintenance selects this many nodes, more than the controller
	// computes the preflight of, news for its spec (an Event); zero: nothing to tell.
	preflightNotComputed int
}

// nodeDecision is the decision about one selected node.
type nodeDecision struct {
	name string
	node *corev1.Node
	nodedecide.Decision
}

// decide takes the decision of a reconcile from its observation, purely: the node controller's
// decision about each selected node, the rollout's turns, and the status that reports them
// (protocol: how owners are asked, which the status says).
func decide(o observation, protocol nodemaintv1alpha1.EvacuationProtocol, now time.Time) decision {
	nm := o.nm
	d := decision{nodes: make([]nodeDecision, 0, len(o.nodes))}
	if o.preflightTooMany {
		d.preflightNotComputed = len(o.nodes)
	}
	for i, node := range o.nodes {
		d.nodes = append(d.nodes, nodeDecision{name: node.Name, node: node, Decision: nodedecide.Decide(o.observed[i], now)})
	}
	d.turns = decideTurns(o, d.nodes, now)
	d.status = maintenanceStatus(nm, d.nodes, d.turns, now)
	d.status.EvacuationProtocol = cmp.Or(protocol, nodemaintv1alpha1.EvacuationProtocolPodConditions)
	d.status.Preflight = o.preflight
	setCondition(&d.status.Conditions, nodesSelectedCondition(nm, o.sel, len(o.nodes), o.total), now)
	setSpecValid(nm, &d.status, now)
	setPodDeletionGranted(nm, &d.status, o.podDeletionDenied, now)
	cordoned := 0
	for _, n := range d.nodes {
		if n.node.Spec.Unschedulable {
			cordoned++
		}
	}
	setCondition(&d.status.Conditions, readyCondition(nm, d.status, cordoned), now)
	// While a drain is under way, what blocks it may change with no event (an eviction refused,
	// a response timeout run out): look again now and then.
	// A maintenance that waits for a place on every node it selects does nothing there: its
	// status changes only with the nodes and their pods, whose events bring a look (hundreds of
	// such maintenances looked every 5s for nothing).
	if nm.Spec.Drain && len(o.nodes) > 0 && meta.IsStatusConditionFalse(d.status.Conditions, nodemaintv1alpha1.ConditionDrained) && !waitsEverywhere(nm, d.nodes) {
		d.recheckAfter = drainStatusRefresh
	}
	if d.turns != nil && d.turns.RecheckAfter > 0 {
		d.recheckAfter = sooner(d.recheckAfter, d.turns.RecheckAfter)
	}
	if o.planning {
		d.recheckAfter = sooner(d.recheckAfter, preflightworker.Refresh)
	}
	return d
}

// sooner is the earlier of two waits; zero is none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// drainStatusRefresh is how often the status of a drain under way is computed again.
const drainStatusRefresh = 5 * time.Second

// waitsEverywhere reports whether the maintenance waits for a place (past
// maintenance.MaxMaintenancesPerNode) on every node it selects.
func waitsEverywhere(nm *nodemaintv1alpha1.NodeMaintenance, nodes []nodeDecision) bool {
	for _, n := range nodes {
		if !slices.Contains(n.Intent.Beyond, nm.Name) {
			return false
		}
	}
	return len(nodes) > 0
}
