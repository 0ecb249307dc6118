package rollout

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/recheck"
)

// Node is one selected node as the rollout sees it.
type Node struct {
	Name string
	// Unschedulable: cordoned, by nodemaint or anyone.
	Unschedulable bool
	// Ended is Released or Failed once the node's annotation records the end of its turn.
	Ended nodemaintv1alpha1.Phase
	// Drained: no targeted pod and no volume of a drained pod left on it.
	Drained bool
	// BootID is its status.nodeInfo.bootID.
	BootID string
	// ControlPlane: it carries the label node-role.kubernetes.io/control-plane. At most one
	// control-plane node is in its turn at once.
	ControlPlane bool
}

// Input is what the turns are decided from.
type Input struct {
	// Active: the maintenance cordons or drains (spec.cordon or spec.drain). An inactive
	// maintenance has no node in its turn.
	Active bool
	Spec   nodemaintv1alpha1.RolloutSpec
	// DrainTimeout is the maintenance's drainTimeout (zero: none), counted from a node's turn.
	DrainTimeout time.Duration
	// Nodes are the selected nodes.
	Nodes []Node
	// InTurn are the turns as the status has them.
	InTurn []nodemaintv1alpha1.NodeTurn
	// Unschedulable names pods created since the rollout started that the scheduler cannot place
	// (PodScheduled False, reason Unschedulable): replacements of evacuated pods among them.
	Unschedulable []string
	// Window says whether the maintenance window is open now, and when it opens or closes next
	// (see Window.At); ignored without spec.window.
	Window WindowState
	// Alerts names the firing alerts spec.haltOnAlerts selects, and AlertsUnknown why they
	// cannot be told ("": they can); AlertsFresh is until when the answer they come from counts
	// (alerts.Answer.Gate). Ignored without spec.haltOnAlerts.
	Alerts        []string
	AlertsUnknown string
	AlertsFresh   time.Time
	// SoakTime is spec.rollout.soakTime (zero: none); LastRelease is when the rollout last saw a
	// node's turn end, as the status has it (status.rollout.lastReleaseTime; zero: never).
	SoakTime    time.Duration
	LastRelease time.Time
}

// Decision is the rollout's turns now.
type Decision struct {
	// InTurn are the nodes in their turn: the input's, less those released or no longer
	// selected, plus those admitted now.
	InTurn []nodemaintv1alpha1.NodeTurn
	// Admitted names the nodes whose turn starts now.
	Admitted []string
	// Done, Failed, Waiting count the selected nodes released (Failed among them), and waiting.
	Done, Failed, Waiting int
	// Budget is maxUnavailable resolved against the selected nodes.
	Budget int
	// TimedOut names the nodes in their turn past drainTimeout and not drained (blocked ones
	// among them).
	TimedOut []string
	// Blocked names the nodes in their turn whose drain is blocked (spec.rollout.maxBlockedNodes):
	// they do not count against the budget. Holding names the nodes past drainTimeout beyond
	// maxBlockedNodes that onNodeFailure handles: Pause halts on them, Continue fails them.
	Blocked, Holding []string
	// LastRelease is when the rollout last saw a node's turn end (now if one ended now), for
	// status.rollout.lastReleaseTime; SoakingUntil, while soakTime runs from it and nodes wait,
	// is when the next may start (zero: no soak).
	LastRelease, SoakingUntil time.Time
	// HaltReason says why no new node starts ("": none); the facts it names are Unschedulable
	// (ReplacementsUnschedulable), Holding and DrainTimeout (NodeDrainTimedOut), Alerts
	// (AlertsFiring), AlertsUnknown (AlertsUnknown: why) and WindowOpens (OutsideWindow: when the
	// window opens next, zero if never). Complete: every selected node was released.
	HaltReason    string
	Unschedulable []string
	DrainTimeout  time.Duration
	Alerts        []string
	AlertsUnknown string
	WindowOpens   time.Time
	Complete      bool
	// RecheckAfter is when the decision may change by itself (a drain timeout runs out, the
	// window opens, the soak ends).
	RecheckAfter time.Duration
}

// Budget resolves maxUnavailable against the number of selected nodes: a number as it is, a
// percentage rounded down; at least 1.
func Budget(maxUnavailable *intstr.IntOrString, selected int) int {
	if maxUnavailable == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, selected, false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Turns decides the turns at now. The order in which nodes get their turn is deterministic:
// nodes already unschedulable first (cordoned by someone, they give no capacity away when taken),
// then by name, as `kubectl get nodes` lists them, so an admin can tell which come next; a
// control-plane node waits, without holding the others, while another control-plane node is in
// its turn. A node in its turn past drainTimeout is blocked while fewer than maxBlockedNodes are
// (it stays in its turn, no longer counted against the budget); beyond, it halts the rollout
// (Pause) or is marked failed, to be released by the node reconciler (Continue). No node starts
// while pods cannot be scheduled, outside the window, while a failed node holds the rollout, or
// for soakTime after a node's turn ended; nodes in their turn finish it.
func Turns(in Input, now time.Time) Decision {
	d := Decision{Budget: Budget(in.Spec.MaxUnavailable, len(in.Nodes)), LastRelease: in.LastRelease}
	selected := map[string]*Node{}
	for i := range in.Nodes {
		selected[in.Nodes[i].Name] = &in.Nodes[i]
	}
	d.block(in, d.continueTurns(in, selected, now))
	inTurn := map[string]bool{}
	counted, controlPlane := 0, false
	for _, t := range d.InTurn {
		inTurn[t.Name] = true
		if !t.Blocked {
			counted++
		}
		controlPlane = controlPlane || selected[t.Name].ControlPlane
	}
	var waiting []*Node
	for i := range in.Nodes {
		n := &in.Nodes[i]
		switch {
		case n.Ended != "":
			d.Done++
			if n.Ended == nodemaintv1alpha1.PhaseFailed {
				d.Failed++
			}
		case !inTurn[n.Name]:
			waiting = append(waiting, n)
		}
	}
	sort.Slice(waiting, func(i, j int) bool {
		if waiting[i].Unschedulable != waiting[j].Unschedulable {
			return waiting[i].Unschedulable
		}
		return waiting[i].Name < waiting[j].Name
	})
	d.halt(in, len(waiting) > 0, now)
	d.admit(in, waiting, counted, controlPlane, now)
	if in.Spec.Window != nil && in.Window.Open && d.Waiting > 0 && !in.Window.Next.IsZero() {
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, in.Window.Next.Sub(now)) // the window closes
	}
	if in.Spec.HaltOnAlerts != nil && d.Waiting > 0 && in.AlertsUnknown == "" && !in.AlertsFresh.IsZero() {
		// A new answer brings a reconcile; an answer that ages without one closes the gate then.
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, in.AlertsFresh.Sub(now))
	}
	sort.Slice(d.InTurn, func(i, j int) bool { return d.InTurn[i].Name < d.InTurn[j].Name })
	for _, t := range d.InTurn {
		if t.Blocked {
			d.Blocked = append(d.Blocked, t.Name)
		}
	}
	d.Complete = len(in.Nodes) > 0 && d.Done == len(in.Nodes)
	return d
}

// continueTurns keeps the turns still under way in d.InTurn, records a release (the soak's
// start) and returns the indexes in d.InTurn of the turns past drainTimeout, neither failed nor
// blocked.
func (d *Decision) continueTurns(in Input, selected map[string]*Node, now time.Time) (late []int) {
	for _, turn := range in.InTurn {
		n, ok := selected[turn.Name]
		if !ok || !in.Active {
			continue // no longer selected: its turn is over
		}
		if n.Ended != "" {
			// Released now: the soak starts, from the next whole second (the status keeps
			// seconds), so that it never runs shorter than soakTime.
			d.LastRelease = now.Truncate(time.Second)
			if d.LastRelease.Before(now) {
				d.LastRelease = d.LastRelease.Add(time.Second)
			}
			continue
		}
		if in.DrainTimeout > 0 && !n.Drained && !turn.Failed {
			if left := turn.Since.Add(in.DrainTimeout).Sub(now); left > 0 {
				d.RecheckAfter = recheck.Soonest(d.RecheckAfter, left)
			} else {
				d.TimedOut = append(d.TimedOut, turn.Name)
				if !turn.Blocked {
					late = append(late, len(d.InTurn))
				}
			}
		}
		d.InTurn = append(d.InTurn, turn)
	}
	return late
}

// admit starts the turns of the waiting nodes, in order, while nothing halts the rollout, no
// soak runs, the budget has room (counted: the turns it counts) and no other control-plane node
// is in its turn (controlPlane); the others wait.
func (d *Decision) admit(in Input, waiting []*Node, counted int, controlPlane bool, now time.Time) {
	soaking := time.Time{}
	if in.SoakTime > 0 && !d.LastRelease.IsZero() && now.Before(d.LastRelease.Add(in.SoakTime)) {
		soaking = d.LastRelease.Add(in.SoakTime)
	}
	for _, n := range waiting {
		if d.HaltReason != "" || !soaking.IsZero() || counted >= d.Budget || len(d.InTurn) >= nodemaintv1alpha1.MaxRolloutInTurn ||
			n.ControlPlane && controlPlane {
			d.Waiting++
			continue
		}
		d.InTurn = append(d.InTurn, nodemaintv1alpha1.NodeTurn{Name: n.Name, Since: metav1.NewTime(now.Truncate(time.Second)), BootID: n.BootID})
		d.Admitted = append(d.Admitted, n.Name)
		counted++
		controlPlane = controlPlane || n.ControlPlane
	}
	if !soaking.IsZero() && d.Waiting > 0 {
		d.SoakingUntil = soaking
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, soaking.Sub(now))
	}
}

// block decides what becomes of the turns past drainTimeout, neither failed nor blocked yet
// (late, indexes in d.InTurn): the earliest turns are blocked while fewer than maxBlockedNodes
// are; the others are Holding, and failed under onNodeFailure Continue. A blocked turn stays
// blocked until it ends, whatever maxBlockedNodes becomes.
func (d *Decision) block(in Input, late []int) {
	blocked := 0
	for _, t := range d.InTurn {
		if t.Blocked {
			blocked++
		}
	}
	sort.Slice(late, func(i, j int) bool {
		a, b := d.InTurn[late[i]], d.InTurn[late[j]]
		if !a.Since.Equal(&b.Since) {
			return a.Since.Before(&b.Since)
		}
		return a.Name < b.Name
	})
	for _, i := range late {
		turn := &d.InTurn[i]
		switch {
		case blocked < int(in.Spec.MaxBlockedNodes):
			turn.Blocked = true
			blocked++
		case in.Spec.OnNodeFailure == nodemaintv1alpha1.NodeFailureContinue:
			turn.Failed = true
			d.Holding = append(d.Holding, turn.Name)
		default:
			d.Holding = append(d.Holding, turn.Name)
		}
	}
	sort.Strings(d.Holding)
}

// halt decides whether the rollout starts no new node, and why (HaltReason and its facts):
// d.Holding names the nodes in their turn past drainTimeout that onNodeFailure handles, waiting
// says whether some wait.
func (d *Decision) halt(in Input, waiting bool, now time.Time) {
	switch {
	case !in.Active:
		d.HaltReason = nodemaintv1alpha1.ReasonDrainNotRequested
	case len(in.Unschedulable) > 0:
		d.HaltReason, d.Unschedulable = nodemaintv1alpha1.ReasonReplacementsUnschedulable, in.Unschedulable
	case len(d.Holding) > 0 && in.Spec.OnNodeFailure != nodemaintv1alpha1.NodeFailureContinue:
		d.HaltReason, d.DrainTimeout = nodemaintv1alpha1.ReasonNodeDrainTimedOut, in.DrainTimeout
	case in.Spec.HaltOnAlerts != nil && in.AlertsUnknown != "" && waiting:
		d.HaltReason, d.AlertsUnknown = nodemaintv1alpha1.ReasonAlertsUnknown, in.AlertsUnknown
	case in.Spec.HaltOnAlerts != nil && len(in.Alerts) > 0 && waiting:
		d.HaltReason, d.Alerts = nodemaintv1alpha1.ReasonAlertsFiring, in.Alerts
	case in.Spec.Window != nil && !in.Window.Open && waiting:
		d.HaltReason, d.WindowOpens = nodemaintv1alpha1.ReasonOutsideWindow, in.Window.Next
		if !in.Window.Next.IsZero() {
			d.RecheckAfter = recheck.Soonest(d.RecheckAfter, in.Window.Next.Sub(now))
		}
	}
}
