package nodemaintenancedecide

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// decideTurns decides the turns of the maintenance's rollout (rollout.Turns) from the decisions
// about its selected nodes, the pods the scheduler cannot place, the alerts and the window.
// Nil without spec.rollout.
func decideTurns(o Observation, nodes []NodeDecision, now time.Time) *rollout.Decision {
	nm := o.Maintenance
	spec := nm.Spec.Rollout
	if spec == nil {
		return nil
	}
	in := rollout.Input{Active: nm.Spec.Cordon || nm.Spec.Drain, Spec: *spec, Unschedulable: o.Unschedulable,
		Alerts: o.Alerts, AlertsUnknown: o.AlertsUnknown, AlertsFresh: o.AlertsFresh}
	if r := nm.Status.Rollout; r != nil {
		in.InTurn = r.InTurn
		if r.LastReleaseTime != nil {
			in.LastRelease = r.LastReleaseTime.Time
		}
	}
	if spec.SoakTime != nil {
		// A soakTime that does not parse soaks the longest (SpecValid says why).
		in.SoakTime = nodemaintv1alpha1.MaxSoakTime
		if spec.SoakTime.Valid() && spec.SoakTime.Duration <= nodemaintv1alpha1.MaxSoakTime {
			in.SoakTime = max(spec.SoakTime.Duration, 0)
		}
	}
	if nm.Spec.DrainTimeout != nil && nm.Spec.Drain && maintenance.Usable(nm) {
		in.DrainTimeout = nm.Spec.DrainTimeout.Duration
	}
	for _, n := range nodes {
		in.Nodes = append(in.Nodes, rollout.Node{
			Name: n.Name, Unschedulable: n.Node.Spec.Unschedulable, Ended: rollout.Recorded(nm.Name, n.Node),
			Drained: n.Report.Pending == 0 && n.Report.VolumesAttached == 0, BootID: n.Node.Status.NodeInfo.BootID,
			ControlPlane: rollout.ControlPlane(n.Node),
		})
	}
	if spec.Window != nil {
		// A window that does not parse is never open (SpecValid says why).
		if w, err := rollout.ParseWindow(spec.Window); err == nil {
			in.Window = w.At(now)
		}
	}
	d := rollout.Turns(in, now)
	return &d
}

// rolloutStatus is the status of the rollout's decision: the counts, the turns and the
// RolloutHalted condition.
func rolloutStatus(nm *nodemaintv1alpha1.NodeMaintenance, d *rollout.Decision, status *nodemaintv1alpha1.NodeMaintenanceStatus, now time.Time) {
	status.Rollout = &nodemaintv1alpha1.RolloutStatus{
		NodesDone: int32(d.Done), NodesFailed: int32(d.Failed), NodesInTurn: int32(len(d.InTurn)), NodesWaiting: int32(d.Waiting),
		InTurn: d.InTurn, NodesBlocked: int32(len(d.Blocked)),
	}
	if !d.LastRelease.IsZero() {
		status.Rollout.LastReleaseTime = &metav1.Time{Time: d.LastRelease}
	}
	if !d.SoakingUntil.IsZero() {
		status.Rollout.SoakingUntil = &metav1.Time{Time: d.SoakingUntil}
	}
	c := metav1.Condition{Type: nodemaintv1alpha1.ConditionRolloutHalted, ObservedGeneration: nm.Generation, Status: metav1.ConditionFalse}
	switch {
	case d.Complete:
		c.Reason, c.Message = nodemaintv1alpha1.ReasonRolloutComplete, "every selected node was released"
	case d.HaltReason != "":
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, d.HaltReason, haltMessage(d)
	case !d.SoakingUntil.IsZero():
		c.Reason = nodemaintv1alpha1.ReasonSoaking
		c.Message = fmt.Sprintf("a node's turn ended at %s: no new node starts until %s (soakTime %s); %s",
			d.LastRelease.UTC().Format(time.RFC3339), d.SoakingUntil.UTC().Format(time.RFC3339), nm.Spec.Rollout.SoakTime.Raw(), progress(d))
	default:
		c.Reason = nodemaintv1alpha1.ReasonRolling
		c.Message = fmt.Sprintf("at most %d nodes in their turn at once: %s", d.Budget, progress(d))
	}
	setCondition(&status.Conditions, c, now)
}

// progress counts the nodes of the rollout: "2 done, 1 in turn, 5 waiting", and names the
// blocked nodes and the control-plane node's turn.
func progress(d *rollout.Decision) string {
	s := fmt.Sprintf("%d done, %d in turn, %d waiting", d.Done, len(d.InTurn), d.Waiting)
	if len(d.Blocked) > 0 {
		s += fmt.Sprintf("; %d blocked, left cordoned and not counted (maxBlockedNodes): %s", len(d.Blocked), few.Names(d.Blocked, few.Most))
	}
	return s
}

// haltMessage says why the rollout starts no new node, from the facts its decision names.
func haltMessage(d *rollout.Decision) string {
	switch d.HaltReason {
	case nodemaintv1alpha1.ReasonDrainNotRequested:
		return "neither cordon nor drain is requested: no node starts"
	case nodemaintv1alpha1.ReasonReplacementsUnschedulable:
		return fmt.Sprintf("%d pods cannot be scheduled (%s): no new node starts until they are", len(d.Unschedulable), few.Names(d.Unschedulable, few.Most))
	case nodemaintv1alpha1.ReasonNodeDrainTimedOut:
		msg := fmt.Sprintf("not drained within drainTimeout %s: %s; no new node starts until they are drained or released (onNodeFailure Pause)", d.DrainTimeout, few.Names(d.Holding, few.Most))
		if len(d.Blocked) > 0 {
			msg += fmt.Sprintf("; %d more are blocked already (maxBlockedNodes): %s", len(d.Blocked), few.Names(d.Blocked, few.Most))
		}
		return msg
	case nodemaintv1alpha1.ReasonAlertsFiring:
		return fmt.Sprintf("alerts firing: %s; no new node starts until they clear (spec.rollout.haltOnAlerts)", few.Names(d.Alerts, few.Most))
	case nodemaintv1alpha1.ReasonAlertsUnknown:
		return "cannot tell whether the alerts of spec.rollout.haltOnAlerts fire (" + d.AlertsUnknown + "): no new node starts until they can be read"
	case nodemaintv1alpha1.ReasonOutsideWindow:
		if d.WindowOpens.IsZero() {
			return "outside the maintenance window: no new node starts"
		}
		return "outside the maintenance window: no new node starts; it opens at " + d.WindowOpens.UTC().Format(time.RFC3339)
	}
	return d.HaltReason
}

// rolledNodes keeps, of the decisions about the selected nodes, those of the nodes in their turn:
// the status details the nodes being maintained, not those waiting or done.
func rolledNodes(d *rollout.Decision, nodes []NodeDecision) []NodeDecision {
	in := map[string]bool{}
	for _, t := range d.InTurn {
		in[t.Name] = true
	}
	var out []NodeDecision
	for _, n := range nodes {
		if in[n.Name] {
			out = append(out, n)
		}
	}
	return out
}
