package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/nodeaction"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Every Event nodemaint's reconcilers emit is built here, from what a decision or a write did:
// the reasons and the words an admin reads in `kubectl events` are in one place.

// eventSink emits Events.
type eventSink struct{ events.EventRecorder }

// maxEventNote is the longest note the API server takes in an Event (events.k8s.io/v1); an Event
// with a longer one is refused, and lost. Notes are cut to it.
const maxEventNote = 1024

func (e eventSink) normal(regarding, related runtime.Object, reason, action, note string) {
	e.Eventf(regarding, related, corev1.EventTypeNormal, reason, action, "%s", cut(note, maxEventNote))
}

func (e eventSink) warning(regarding, related runtime.Object, reason, action, note string) {
	e.Eventf(regarding, related, corev1.EventTypeWarning, reason, action, "%s", cut(note, maxEventNote))
}

// nodeWritten: the node was written as the decision wanted.
func (e eventSink) nodeWritten(node *corev1.Node, nms []*nodemaintv1alpha1.NodeMaintenance, d nodeaction.Decision) {
	names := maintenanceNames(d.Intent)
	switch c := d.Change; {
	case c.Reverted:
		e.warning(node, nil, "UncordonReverted", "Cordon",
			"node was uncordoned while NodeMaintenance "+names+" keeps it cordoned; cordoned it again")
		for _, nm := range nms {
			if maintenance.Cordons(maintenance.Phase(nm, false)) {
				e.warning(nm, node, "UncordonReverted", "Cordon", "node "+node.Name+" was uncordoned during the maintenance; cordoned it again")
			}
		}
	case c.Cordoned:
		e.normal(node, nil, "Cordoned", "Cordon", "cordoned for NodeMaintenance "+names)
	case c.Uncordoned:
		e.normal(node, nil, "Uncordoned", "Uncordon", "maintenance complete; uncordoned")
	}
	switch c := d.Change; {
	case c.OutOfService:
		e.warning(node, nil, "OutOfService", "Taint", "NotReady for over "+d.Intent.OutOfServiceGrace.String()+
			" with pods stuck terminating: tainted "+corev1.TaintNodeOutOfService+" so they fail over")
	case c.BackInService:
		e.normal(node, nil, "BackInService", "Taint", "removed the "+corev1.TaintNodeOutOfService+" taint")
	}
}

// shutdownNotConfirmed: the out-of-service taint is due but for the evidence of a shutdown.
func (e eventSink) shutdownNotConfirmed(node *corev1.Node, missing string) {
	e.warning(node, nil, "ShutdownNotConfirmed", "Taint", missing)
}

// requested: nodemaint's evacuation request was set on the pod (orig: before).
func (e eventSink) requested(orig *corev1.Pod) {
	if drain.Unanswerable(orig) && !evacuation.RequestedBy(orig, evacuation.ReasonNodeMaintenance) {
		e.warning(orig, nil, "BarePod", "RequestEvacuation",
			"evacuation requested for node maintenance; this pod has no controller: once evicted it will not be recreated")
	}
}

// evictionFailed and evictionRefused: the first time in a row a pod's eviction fails or is
// refused (first), and not again while it backs off.
func (e eventSink) evictionFailed(pod *corev1.Pod, err error, first bool) {
	if first {
		e.warning(pod, nil, nodemaintv1alpha1.BlockedReasonEvictionFailed, "Evict", "node maintenance: "+err.Error())
	}
}

func (e eventSink) evictionRefused(pod *corev1.Pod, refusal string, first bool) {
	if first {
		e.warning(pod, nil, "EvictionRefused", "Evict", "node maintenance: "+refusal)
	}
}

// deleted: the pod was deleted after the drain of its node timed out.
func (e eventSink) deleted(pod *corev1.Pod, node *corev1.Node) {
	e.warning(pod, node, "DeletedAfterDrainTimeout", "Delete",
		"deleted, bypassing PodDisruptionBudgets: the drain of node "+node.Name+" timed out and drainTimeoutAction is Delete")
}

// forbidden makes a permission error (a role narrowed below what config/rbac grants) visible
// where the admin looks, on the maintenances of the node; otherwise it would show only as a
// maintenance that makes no progress and an error in the controller's log.
func (e eventSink) forbidden(node *corev1.Node, nms []*nodemaintv1alpha1.NodeMaintenance, err error) {
	for _, nm := range nms {
		e.warning(nm, node, "Forbidden", "Reconcile", "node "+node.Name+": nodemaint is not allowed to do its work, check its RBAC: "+err.Error())
	}
}

// statusWritten emits the Events of a NodeMaintenance's status change: its phase, a selector
// that selects no node or every node, the drain timing out, the drain done, and a spec that
// became unusable or changed while it is.
func (e eventSink) statusWritten(old, cur *nodemaintv1alpha1.NodeMaintenance, now time.Time) {
	if old.Status.Phase != cur.Status.Phase {
		e.normal(cur, nil, "Phase"+string(cur.Status.Phase), "Reconcile",
			fmt.Sprintf("phase %s on %d nodes", cur.Status.Phase, cur.Status.SelectedNodes))
	}
	if old.Status.ObservedGeneration != cur.Status.ObservedGeneration || old.Status.SelectedNodes != cur.Status.SelectedNodes {
		switch c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionNodesSelected); {
		case c == nil:
		case c.Reason == nodemaintv1alpha1.ReasonInvalidNodeSelector, c.Reason == nodemaintv1alpha1.ReasonNoNodesSelected, c.Reason == nodemaintv1alpha1.ReasonAllNodesSelected:
			e.warning(cur, nil, c.Reason, "Reconcile", c.Message)
		}
	}
	if !meta.IsStatusConditionTrue(old.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut) &&
		meta.IsStatusConditionTrue(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut) {
		c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut)
		e.warning(cur, nil, nodemaintv1alpha1.ReasonDrainTimedOut, "Drain", c.Message)
	}
	was := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
	is := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
	if is != nil && is.Status == metav1.ConditionTrue && (was == nil || was.Status != metav1.ConditionTrue) {
		e.normal(cur, nil, nodemaintv1alpha1.ReasonDrained, "Drain", is.Message)
		if start := cur.Status.DrainStartTime; start != nil {
			drainDuration.Observe(now.Sub(start.Time).Seconds())
		}
	}
	e.rolloutWritten(old, cur)
	if c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionSpecValid); c != nil {
		if was := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionSpecValid); was == nil || was.Message != c.Message {
			e.warning(cur, nil, nodemaintv1alpha1.ReasonInvalidSpec, "Reconcile", c.Message)
		}
	}
	// Waiting for a place on nodes (maintenance.MaxMaintenancesPerNode): a Warning when it starts
	// or the nodes change, and a Normal Event once it acts on every selected node.
	wasWaiting := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit)
	switch c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit); {
	case c != nil && (wasWaiting == nil || wasWaiting.Message != c.Message):
		e.warning(cur, nil, nodemaintv1alpha1.ReasonTooManyMaintenances, "Reconcile", c.Message)
	case c == nil && wasWaiting != nil:
		e.normal(cur, nil, "WithinMaintenanceLimit", "Reconcile", "no selected node has too many NodeMaintenances acting on it any more: it acts on each")
	}
}

// rolloutWritten emits the Events of a rollout's progress: a node's turn starting, a node
// released, the rollout halting (a Warning, but for the window, which is planned) or complete.
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
	is := map[string]bool{}
	r := cur.Status.Rollout
	for _, t := range r.InTurn {
		is[t.Name] = true
		if !was[t.Name] {
			e.normal(cur, nil, "TurnStarted", "Rollout", fmt.Sprintf("node %s starts its turn (%d in turn, %d done, %d waiting)", t.Name, r.NodesInTurn, r.NodesDone, r.NodesWaiting))
		}
	}
	if old.Status.Rollout != nil {
		for _, t := range old.Status.Rollout.InTurn {
			if !is[t.Name] {
				e.normal(cur, nil, "TurnEnded", "Rollout", fmt.Sprintf("node %s's turn ended (%d done of %d)", t.Name, r.NodesDone, cur.Status.SelectedNodes))
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
		e.normal(cur, nil, nodemaintv1alpha1.ReasonRolloutComplete, "Rollout", c.Message)
	case c.Status == metav1.ConditionTrue && c.Reason == nodemaintv1alpha1.ReasonOutsideWindow:
		e.normal(cur, nil, "RolloutHalted", "Rollout", c.Message)
	case c.Status == metav1.ConditionTrue:
		e.warning(cur, nil, "RolloutHalted", "Rollout", c.Message)
	case prev != nil && prev.Status == metav1.ConditionTrue:
		e.normal(cur, nil, "RolloutResumed", "Rollout", c.Message)
	}
}

// ruleValidated: a DrainRule's Valid condition was written; a Warning when it became (or stays,
// with another message) invalid.
func (e eventSink) ruleValidated(old, cur *nodemaintv1alpha1.DrainRule) {
	was := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionValid)
	if c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionValid); c != nil && c.Status == metav1.ConditionFalse &&
		(was == nil || was.Status != c.Status || was.Message != c.Message) {
		e.warning(cur, nil, nodemaintv1alpha1.ReasonInvalidSelector, "Validate", c.Message)
	}
}

// maintenanceNames names a few of the maintenances acting on the node (few.Names).
func maintenanceNames(intent maintenance.NodeIntent) string {
	names := make([]string, 0, len(intent.Entries))
	for _, e := range intent.Entries {
		names = append(names, e.Name)
	}
	return few.Names(names, few.Most)
}
