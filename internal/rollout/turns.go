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
	// TimedOut names the nodes in their turn past drainTimeout and not drained.
	TimedOut []string
	// HaltReason says why no new node starts ("": none); the facts it names are Unschedulable
	// (ReplacementsUnschedulable), TimedOut and DrainTimeout (NodeDrainTimedOut), Alerts
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
	// window opens).
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
// then by name, as `kubectl get nodes` lists them, so an admin can tell which come next. A node
// in its turn past drainTimeout halts the rollout (Pause) or is marked failed, to be released by
// the node reconciler (Continue). No node starts while pods cannot be scheduled, outside the
// window, or while a failed node holds the rollout; nodes in their turn finish it.
func Turns(in Input, now time.Time) Decision {
	d := Decision{Budget: Budget(in.Spec.MaxUnavailable, len(in.Nodes))}
	selected := map[string]*Node{}
	for i := range in.Nodes {
		selected[in.Nodes[i].Name] = &in.Nodes[i]
	}
	var timedOut []string
	for _, turn := range in.InTurn {
		n, ok := selected[turn.Name]
		if !ok || n.Ended != "" || !in.Active {
			continue // no longer selected, or released: its turn is over
		}
		if in.DrainTimeout > 0 && !n.Drained && !turn.Failed {
			if left := turn.Since.Add(in.DrainTimeout).Sub(now); left > 0 {
				d.RecheckAfter = recheck.Soonest(d.RecheckAfter, left)
			} else {
				timedOut = append(timedOut, turn.Name)
				if in.Spec.OnNodeFailure == nodemaintv1alpha1.NodeFailureContinue {
					turn.Failed = true
				}
			}
		}
		d.InTurn = append(d.InTurn, turn)
	}
	inTurn := map[string]bool{}
	for _, t := range d.InTurn {
		inTurn[t.Name] = true
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
	d.halt(in, timedOut, len(waiting) > 0, now)
	for _, n := range waiting {
		if d.HaltReason != "" || len(d.InTurn) >= d.Budget || len(d.InTurn) >= nodemaintv1alpha1.MaxRolloutInTurn {
			d.Waiting++
			continue
		}
		d.InTurn = append(d.InTurn, nodemaintv1alpha1.NodeTurn{Name: n.Name, Since: metav1.NewTime(now.Truncate(time.Second)), BootID: n.BootID})
		d.Admitted = append(d.Admitted, n.Name)
	}
	if in.Spec.Window != nil && in.Window.Open && d.Waiting > 0 && !in.Window.Next.IsZero() {
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, in.Window.Next.Sub(now)) // the window closes
	}
	if in.Spec.HaltOnAlerts != nil && d.Waiting > 0 && in.AlertsUnknown == "" && !in.AlertsFresh.IsZero() {
		// A new answer brings a reconcile; an answer that ages without one closes the gate then.
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, in.AlertsFresh.Sub(now))
	}
	sort.Slice(d.InTurn, func(i, j int) bool { return d.InTurn[i].Name < d.InTurn[j].Name })
	d.TimedOut = timedOut
	d.Complete = len(in.Nodes) > 0 && d.Done == len(in.Nodes)
	return d
}

// halt decides whether the rollout starts no new node, and why (HaltReason and its facts):
// timedOut names the nodes in their turn past drainTimeout, waiting says whether some wait.
func (d *Decision) halt(in Input, timedOut []string, waiting bool, now time.Time) {
	switch {
	case !in.Active:
		d.HaltReason = nodemaintv1alpha1.ReasonDrainNotRequested
	case len(in.Unschedulable) > 0:
		d.HaltReason, d.Unschedulable = nodemaintv1alpha1.ReasonReplacementsUnschedulable, in.Unschedulable
	case len(timedOut) > 0 && in.Spec.OnNodeFailure != nodemaintv1alpha1.NodeFailureContinue:
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
