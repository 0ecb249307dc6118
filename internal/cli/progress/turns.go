package progress

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// The views of a rollout (spec.rollout): how it rolls, where it stands, and what each node in
// its turn waits for. The status details only the nodes in their turn; the others are counted.

// Release is the rollout's release policy, with the CRD's default.
func Release(spec *nodemaintv1alpha1.RolloutSpec) nodemaintv1alpha1.ReleasePolicy {
	if spec.Release == "" {
		return nodemaintv1alpha1.ReleaseDrained
	}
	return spec.Release
}

// RolloutPlan says how the maintenance rolls: "2 nodes at a time, release Rebooted, window ...".
func RolloutPlan(nm *nodemaintv1alpha1.NodeMaintenance) string {
	spec := nm.Spec.Rollout
	var b strings.Builder
	mu := spec.MaxUnavailable
	switch {
	case mu != nil && mu.Type == intstr.String && nm.Status.SelectedNodes > 0:
		fmt.Fprintf(&b, "%s (%s)", plural(rollout.Budget(mu, int(nm.Status.SelectedNodes)), "node"), mu.StrVal)
	case mu != nil && mu.Type == intstr.String:
		fmt.Fprintf(&b, "%s of the nodes", mu.StrVal)
	default:
		fmt.Fprint(&b, plural(rollout.Budget(mu, 0), "node"))
	}
	fmt.Fprintf(&b, " at a time, release %s", Release(spec))
	if w := spec.Window; w != nil {
		tz := w.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		fmt.Fprintf(&b, ", starting turns in the window %q for %s (%s)", w.Schedule, w.Duration.Raw(), tz)
	}
	if spec.SoakTime != nil && (!spec.SoakTime.Valid() || spec.SoakTime.Duration > 0) {
		fmt.Fprintf(&b, ", soaking %s after each node", spec.SoakTime.Raw())
	}
	if spec.MaxBlockedNodes > 0 {
		fmt.Fprintf(&b, ", going on past %s whose drain is blocked", plural(int(spec.MaxBlockedNodes), "node"))
	}
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// rolloutSummary is the summary line of a maintenance that rolls.
func rolloutSummary(nm *nodemaintv1alpha1.NodeMaintenance) string {
	s := nm.Status
	line := fmt.Sprintf("%s: phase %s, %d nodes, %s", nm.Name, s.Phase, s.SelectedNodes, RolloutPlan(nm))
	if r := s.Rollout; r != nil {
		done := fmt.Sprintf("%d done", r.NodesDone)
		if r.NodesFailed > 0 {
			done += fmt.Sprintf(" (%d failed)", r.NodesFailed)
		}
		turns := fmt.Sprintf("%d in turn", r.NodesInTurn)
		if r.NodesBlocked > 0 {
			turns += fmt.Sprintf(" (%d blocked)", r.NodesBlocked)
		}
		line += fmt.Sprintf(": %s, %s, %d waiting", done, turns, r.NodesWaiting)
	} else {
		line += ": no rollout status yet (is nodemaint-controller up to date?)"
	}
	line += fmt.Sprintf("; %d pods pending, %d evacuating by their owners", s.PodsPendingEvacuation, s.PodsEvacuating)
	if s.PodsSkipped > 0 {
		line += fmt.Sprintf(", %d skipped and left running", s.PodsSkipped)
	}
	return line
}

// haltLine says why the rollout starts no new node, "" when it does not halt: halted, or soaking
// (spec.rollout.soakTime).
func haltLine(nm *nodemaintv1alpha1.NodeMaintenance) string {
	c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
	switch {
	case c == nil:
		return ""
	case c.Status == metav1.ConditionTrue:
		return fmt.Sprintf("halted (%s): %s", c.Reason, c.Message)
	case c.Reason == nodemaintv1alpha1.ReasonSoaking:
		return "soaking: " + c.Message
	}
	return ""
}

// turnCell says what holds a node in its turn: the first reason that keeps pods on it, the
// volumes left, or, once it is drained, what its release waits for. held is false once the node
// is drained (or failed): then only its release is left.
func turnCell(nm *nodemaintv1alpha1.NodeMaintenance, turn nodemaintv1alpha1.NodeTurn) (cell string, held bool) {
	if turn.Failed {
		return "failed: not drained within drainTimeout, released as failed (onNodeFailure Continue)", false
	}
	cell, held = heldCell(nm, turn)
	if turn.Blocked {
		cell = "blocked, left cordoned (maxBlockedNodes): " + cell
	}
	return cell, held
}

// heldCell is turnCell of a node in its turn that did not fail.
func heldCell(nm *nodemaintv1alpha1.NodeMaintenance, turn nodemaintv1alpha1.NodeTurn) (cell string, held bool) {
	ns, listed := nm.Status.Nodes[turn.Name]
	switch {
	case listed && ns.PodsPendingEvacuation > 0:
		for _, b := range ns.Blocked {
			if b.Reason != nodemaintv1alpha1.BlockedReasonSkipped {
				return blockedCell(b, len(ns.Blocked)-1), true
			}
		}
		return "-", true
	case listed && ns.VolumesAttached > 0:
		return plural(int(ns.VolumesAttached), "volume") + " of drained pods still attached", true
	case !listed && nm.Status.NodesNotListed > 0:
		return "not listed", true // perhaps drained, perhaps among the nodes the status leaves out
	}
	switch Release(nm.Spec.Rollout) {
	case nodemaintv1alpha1.ReleaseRebooted:
		return "drained; waiting for its reboot (a new boot ID, then Ready)", false
	case nodemaintv1alpha1.ReleaseManual:
		return "drained; waiting for `kubectl maintenance complete " + turn.Name + "`", false
	}
	return "drained; being released", false
}

// blockedCell is one blocking reason, shortened for a table cell.
func blockedCell(b nodemaintv1alpha1.BlockedPods, more int) string {
	cell := fmt.Sprintf("%s %s", b.Reason, strings.Join(b.Pods, ","))
	if b.Count > int32(len(b.Pods)) {
		cell += fmt.Sprintf(" (+%d)", b.Count-int32(len(b.Pods)))
	}
	if more > 0 {
		cell += fmt.Sprintf("; %d more reasons", more)
	}
	return cell
}

// writeTurnTable writes the halt, if any, and one row per node in its turn: how long it has
// been in its turn, its pods, and what holds it (see turnCell).
func writeTurnTable(out io.Writer, nm *nodemaintv1alpha1.NodeMaintenance, now time.Time) {
	if l := haltLine(nm); l != "" {
		fmt.Fprintln(out, l)
	}
	if nm.Status.Rollout == nil || len(nm.Status.Rollout.InTurn) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tIN TURN\tPENDING\tEVACUATING\tSKIPPED\tBLOCKED BY")
	for _, turn := range nm.Status.Rollout.InTurn {
		ns := nm.Status.Nodes[turn.Name]
		cell, _ := turnCell(nm, turn)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", turn.Name, duration.HumanDuration(now.Sub(turn.Since.Time)),
			ns.PodsPendingEvacuation, ns.PodsEvacuating, ns.PodsSkipped, cell)
	}
	tw.Flush()
	if l := notListedLine(nm); l != "" {
		fmt.Fprintln(out, l)
	}
}

// RolloutLines are the lines a pipe gets about a rollout besides the summary and what blocks
// (BlockingLines): the halt, and each node in its turn that is drained, with what its release
// waits for. No ages, so that they change only when the rollout does.
func RolloutLines(nm *nodemaintv1alpha1.NodeMaintenance) []string {
	var lines []string
	if l := haltLine(nm); l != "" {
		lines = append(lines, l)
	}
	if nm.Status.Rollout == nil {
		return lines
	}
	for _, turn := range nm.Status.Rollout.InTurn {
		if cell, held := turnCell(nm, turn); !held {
			lines = append(lines, turn.Name+": "+cell)
		}
	}
	return lines
}

// rolloutProgress is what a time-out names about a rollout: where it stands and why it halts.
func rolloutProgress(nm *nodemaintv1alpha1.NodeMaintenance) string {
	r := nm.Status.Rollout
	if r == nil {
		return "no rollout status yet"
	}
	var in []string
	for _, t := range r.InTurn {
		in = append(in, t.Name)
	}
	s := fmt.Sprintf("%d of %d nodes done, %d in turn", r.NodesDone, nm.Status.SelectedNodes, r.NodesInTurn)
	if len(in) > 0 {
		s += " (" + few.Names(in, few.Most) + ")"
	}
	s += fmt.Sprintf(", %d waiting", r.NodesWaiting)
	if l := haltLine(nm); l != "" {
		s += "; " + l
	}
	return s
}

// RolloutCell is a rollout in a list: "3/8 done, 2 in turn", "halted" when it halts; "-" for a
// maintenance that does not roll.
func RolloutCell(nm *nodemaintv1alpha1.NodeMaintenance) string {
	r := nm.Status.Rollout
	switch {
	case nm.Spec.Rollout == nil:
		return "-"
	case r == nil:
		return "pending"
	}
	cell := fmt.Sprintf("%d/%d done, %d in turn", r.NodesDone, nm.Status.SelectedNodes, r.NodesInTurn)
	if c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted); c != nil && c.Status == metav1.ConditionTrue {
		cell += ", halted (" + c.Reason + ")"
	}
	return cell
}
