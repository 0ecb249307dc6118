package nodemaintenance

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nodemaint/nodemaint/internal/controller/eventsink"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/preflightworker"
)

// Every Event the NodeMaintenance controller emits is built here, from the status it wrote: the
// reasons and the words an admin reads in `kubectl events` are in one place.

// eventSink emits the controller's Events.
type eventSink struct{ eventsink.Sink }

// sinkOf is the eventSink of a recorder.
func sinkOf(r events.EventRecorder) eventSink { return eventSink{eventsink.Sink{EventRecorder: r}} }

// statusWritten emits the Events of a NodeMaintenance's status change: its phase, a selector
// that selects no node or every node, the drain timing out, the drain done, and a spec that
// became unusable or changed while it is.
func (e eventSink) statusWritten(old, cur *nodemaintv1alpha1.NodeMaintenance, now time.Time) {
	if old.Status.Phase != cur.Status.Phase {
		e.Normal(cur, nil, "Phase"+string(cur.Status.Phase), "Reconcile",
			fmt.Sprintf("phase %s on %d nodes", cur.Status.Phase, cur.Status.SelectedNodes))
	}
	wasSelected := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionNodesSelected)
	isSelected := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionNodesSelected)
	if old.Status.ObservedGeneration != cur.Status.ObservedGeneration || old.Status.SelectedNodes != cur.Status.SelectedNodes ||
		isSelected != nil && (wasSelected == nil || wasSelected.Reason != isSelected.Reason) {
		switch c := isSelected; {
		case c == nil:
		case c.Reason == nodemaintv1alpha1.ReasonInvalidNodeSelector, c.Reason == nodemaintv1alpha1.ReasonNoNodesSelected, c.Reason == nodemaintv1alpha1.ReasonAllNodesSelected,
			c.Reason == nodemaintv1alpha1.ReasonEtcdQuorumAtRisk:
			e.Warning(cur, nil, c.Reason, "Reconcile", c.Message)
		}
	}
	if !meta.IsStatusConditionTrue(old.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut) &&
		meta.IsStatusConditionTrue(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut) {
		c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut)
		e.Warning(cur, nil, nodemaintv1alpha1.ReasonDrainTimedOut, "Drain", c.Message)
	}
	was := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
	is := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
	if is != nil && is.Status == metav1.ConditionTrue && (was == nil || was.Status != metav1.ConditionTrue) {
		e.Normal(cur, nil, nodemaintv1alpha1.ReasonDrained, "Drain", is.Message)
		if start := cur.Status.DrainStartTime; start != nil {
			drainDuration.Observe(now.Sub(start.Time).Seconds())
		}
	}
	e.rolloutWritten(old, cur)
	e.removalsWritten(old, cur)
	if c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionSpecValid); c != nil {
		if was := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionSpecValid); was == nil || was.Message != c.Message {
			e.Warning(cur, nil, nodemaintv1alpha1.ReasonInvalidSpec, "Reconcile", c.Message)
		}
	}
	// The permission to delete pods, for drainTimeoutAction Delete: a Warning when it is missing
	// (from the first status on, or once revoked), a Normal Event when it is granted after.
	wasGranted := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionPodDeletionGranted)
	switch c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionPodDeletionGranted); {
	case c == nil:
	case c.Status == metav1.ConditionFalse && (wasGranted == nil || wasGranted.Status != metav1.ConditionFalse):
		e.Warning(cur, nil, c.Reason, "Reconcile", c.Message)
	case c.Status == metav1.ConditionTrue && wasGranted != nil && wasGranted.Status == metav1.ConditionFalse:
		e.Normal(cur, nil, c.Reason, "Reconcile", c.Message)
	}
	// Waiting for a place on nodes (maintenance.MaxMaintenancesPerNode): a Warning when it starts
	// or the nodes change, and a Normal Event once it acts on every selected node.
	wasWaiting := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit)
	switch c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit); {
	case c != nil && (wasWaiting == nil || wasWaiting.Message != c.Message):
		e.Warning(cur, nil, nodemaintv1alpha1.ReasonTooManyMaintenances, "Reconcile", c.Message)
	case c == nil && wasWaiting != nil:
		e.Normal(cur, nil, "WithinMaintenanceLimit", "Reconcile", "no selected node has too many NodeMaintenances acting on it any more: it acts on each")
	}
}

// rolloutWritten emits the Events of a rollout's progress: a node's turn starting, a node
// released, the rollout halting (a Warning, but for the window, which is planned, and a
// forecast being computed; PreflightBlocked names the forecast's findings) or complete.
func (e eventSink) rolloutWritten(old, cur *nodemaintv1alpha1.NodeMaintenance) {
	if cur.Status.Rollout == nil {
		return
	}
	was := map[string]bool{}
	if old.Status.Rollout != nil {
		for _, t := range old.Status.Rollout.InTurn {
			was[t.Name] = true
		}
	}
	wasBlocked := map[string]bool{}
	if old.Status.Rollout != nil {
		for _, t := range old.Status.Rollout.InTurn {
			wasBlocked[t.Name] = t.Blocked
		}
	}
	is := map[string]bool{}
	r := cur.Status.Rollout
	for _, t := range r.InTurn {
		is[t.Name] = true
		if !was[t.Name] {
			e.Normal(cur, nil, "TurnStarted", "Rollout", fmt.Sprintf("node %s starts its turn (%d in turn, %d done, %d waiting)", t.Name, r.NodesInTurn, r.NodesDone, r.NodesWaiting))
		}
		if t.Blocked && !wasBlocked[t.Name] {
			e.Warning(cur, nil, "NodeBlocked", "Rollout", fmt.Sprintf("node %s was not drained within drainTimeout %s after its turn started: it stays cordoned "+
				"and its drain goes on, and the rollout goes on without it (%d of maxBlockedNodes %d blocked)",
				t.Name, rawDuration(cur.Spec.DrainTimeout), r.NodesBlocked, maxBlocked(cur)))
		}
	}
	if old.Status.Rollout != nil {
		soak := ""
		if r.SoakingUntil != nil {
			soak = "; no new node starts until " + r.SoakingUntil.UTC().Format(time.RFC3339) + " (soakTime " + rawDuration(soakTime(cur)) + ")"
		}
		for _, t := range old.Status.Rollout.InTurn {
			if !is[t.Name] {
				e.Normal(cur, nil, "TurnEnded", "Rollout", fmt.Sprintf("node %s's turn ended (%d done of %d)%s", t.Name, r.NodesDone, cur.Status.SelectedNodes, soak))
			}
		}
	}
	c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
	prev := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
	if c == nil || prev != nil && prev.Reason == c.Reason {
		return
	}
	switch {
	case c.Reason == nodemaintv1alpha1.ReasonRolloutComplete:
		e.Normal(cur, nil, nodemaintv1alpha1.ReasonRolloutComplete, "Rollout", c.Message)
	case c.Status == metav1.ConditionTrue && (c.Reason == nodemaintv1alpha1.ReasonOutsideWindow || c.Reason == nodemaintv1alpha1.ReasonPreflightPending):
		e.Normal(cur, nil, "RolloutHalted", "Rollout", c.Message)
	case c.Status == metav1.ConditionTrue && c.Reason == nodemaintv1alpha1.ReasonPreflightBlocked:
		// The forecast's findings, where `kubectl describe` shows them.
		e.Warning(cur, nil, nodemaintv1alpha1.ReasonPreflightBlocked, "Rollout", c.Message)
	case c.Status == metav1.ConditionTrue:
		e.Warning(cur, nil, "RolloutHalted", "Rollout", c.Message)
	case prev != nil && prev.Status == metav1.ConditionTrue:
		e.Normal(cur, nil, "RolloutResumed", "Rollout", c.Message)
	}
}

// rawDuration is the duration as written, "none" when absent.
func rawDuration(d *nodemaintv1alpha1.Duration) string {
	if d == nil {
		return "none"
	}
	return d.Raw()
}

func soakTime(nm *nodemaintv1alpha1.NodeMaintenance) *nodemaintv1alpha1.Duration {
	if nm.Spec.Rollout == nil {
		return nil
	}
	return nm.Spec.Rollout.SoakTime
}

func maxBlocked(nm *nodemaintv1alpha1.NodeMaintenance) int32 {
	if nm.Spec.Rollout == nil {
		return 0
	}
	return nm.Spec.Rollout.MaxBlockedNodes
}

// removalsWritten emits a Warning for each listed node an autoscaler started removing: nodemaint
// drains it on but does not hold it (spec.autoscalers).
func (e eventSink) removalsWritten(old, cur *nodemaintv1alpha1.NodeMaintenance) {
	for _, name := range slices.Sorted(maps.Keys(cur.Status.Nodes)) {
		by := cur.Status.Nodes[name].RemovedBy
		if by == "" || old.Status.Nodes[name].RemovedBy == by {
			continue
		}
		taint := nodemaintv1alpha1.KarpenterDisruptedTaint
		if by == nodemaintv1alpha1.RemovedByClusterAutoscaler {
			taint = nodemaintv1alpha1.ClusterAutoscalerToBeDeletedTaint
		}
		e.Warning(cur, nil, "NodeRemovedByAutoscaler", "Drain", fmt.Sprintf(
			"%s is removing node %s (taint %s): the maintenance drains it on and does not hold it", by, name, taint))
	}
}

// preflightNotComputed: the maintenance selects more nodes than the controller computes the
// preflight of (preflightworker.MaxNodes); once per spec.
func (e eventSink) preflightNotComputed(nm *nodemaintv1alpha1.NodeMaintenance, nodes int) {
	e.Warning(nm, nil, "PreflightNotComputed", "Preflight", fmt.Sprintf(
		"the maintenance selects %d nodes: the controller computes the preflight of at most %d; `kubectl maintenance preflight` computes it for any number", nodes, preflightworker.MaxNodes))
}
