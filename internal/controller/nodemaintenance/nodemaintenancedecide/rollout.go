package nodemaintenancedecide

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/preflightworker"
	"github.com/nodemaint/nodemaint/internal/drainpreflight"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// decideTurns decides the turns of the maintenance's rollout (rollout.Turns) from the decisions
// about its selected nodes, the pods the scheduler cannot place, the alerts, the window and,
// before it starts, the preflight's deadlock forecast (preflightHold). Nil without
// spec.rollout. hold is the message of a rollout the forecast holds ("": none).
func decideTurns(o Observation, nodes []NodeDecision, now time.Time) (d *rollout.Decision, hold string) {
	nm := o.Maintenance
	spec := nm.Spec.Rollout
	if spec == nil {
		return nil, ""
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
			Name: n.Name, Unschedulable: n.Node.Spec.Unschedulable, Ended: rollout.Recorded(nm.Name, maintenance.NodeEntries(n.Node)),
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
	reason := ""
	if in.Active && preflightworker.Gates(nm) {
		if reason, hold = preflightHold(o); reason != "" {
			// Not started: no node in its turn, none admitted.
			in.Active = false
		}
	}
	turns := rollout.Turns(in, now)
	if reason != "" {
		turns.HaltReason = reason
	}
	return &turns, hold
}

// preflightHold says whether a rollout that waits for a clean deadlock forecast
// (spec.rollout.preflight Block) may not start, and why: PreflightPending while the forecast is
// not computed, PreflightBlocked, naming its findings, while it finds a deadlock; "" when it is
// clean.
func preflightHold(o Observation) (reason, message string) {
	p := o.Preflight
	switch {
	case p == nil && len(o.Nodes) > preflightworker.MaxNodes:
		return nodemaintv1alpha1.ReasonPreflightBlocked, fmt.Sprintf("spec.rollout.preflight is Block, and the controller computes the forecast of at most %d nodes (this maintenance selects %d): no node starts; set it to Warn, or select fewer nodes", preflightworker.MaxNodes, len(o.Nodes))
	case p == nil:
		return nodemaintv1alpha1.ReasonPreflightPending, "spec.rollout.preflight is Block: no node starts until the preflight's deadlock forecast is computed"
	case p.Deadlocks == 0:
		return "", ""
	}
	var named []string
	for _, f := range p.Findings {
		if f.Severity != string(drainpreflight.Blocks) || !nodemaintv1alpha1.DeadlockReason(f.Reason) {
			continue
		}
		what := f.Node + ": " + f.Reason
		if f.Object != "" {
			what += " (" + f.Object + ")"
		}
		named = append(named, what)
	}
	return nodemaintv1alpha1.ReasonPreflightBlocked, fmt.Sprintf("the preflight forecasts %d %s: %s; no node starts until the forecast is clean (spec.rollout.preflight Block; status.preflight says why)",
		p.Deadlocks, plural(int(p.Deadlocks), "deadlock", "deadlocks"), few.Of(named, int(p.Deadlocks)))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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
