package nodemaintenancedecide

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// The status of a NodeMaintenance stays far below etcd's limit on an object (1.5 MiB) whatever
// the number of nodes it selects: it counts every selected node in its totals, but details at
// most MaxStatusNodes nodes within MaxStatusNodesBytes, those with the most to report.

// nodeReport is the status of one selected node, before status.nodes is bounded.
type nodeReport struct {
	name   string
	status nodemaintv1alpha1.NodeMaintenanceNodeStatus
}

// worthListing reports whether the node has something to report: pods left (targeted or
// skipped), volumes attached, the out-of-service taint, or an autoscaler removing it.
func (r *nodeReport) worthListing() bool {
	s := &r.status
	return s.PodsPendingEvacuation > 0 || s.PodsSkipped > 0 || s.VolumesAttached > 0 || s.OutOfService || len(s.Blocked) > 0 || s.RemovedBy != ""
}

// listNodes chooses the nodes status.nodes details: of those worth listing, the ones with the most
// pods pending, then the most volumes attached, then the most pods skipped, then by name; at most
// maxNodes of them, and as many as fit in maxBytes of JSON. It returns them with the number of
// nodes worth listing that are left out.
func listNodes(reports []nodeReport, maxNodes, maxBytes int) (map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus, int32) {
	var candidates []*nodeReport
	for i := range reports {
		if reports[i].worthListing() {
			candidates = append(candidates, &reports[i])
		}
	}
	if len(candidates) == 0 {
		return nil, 0
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := &candidates[i].status, &candidates[j].status
		switch {
		case a.PodsPendingEvacuation != b.PodsPendingEvacuation:
			return a.PodsPendingEvacuation > b.PodsPendingEvacuation
		case a.VolumesAttached != b.VolumesAttached:
			return a.VolumesAttached > b.VolumesAttached
		case a.PodsSkipped != b.PodsSkipped:
			return a.PodsSkipped > b.PodsSkipped
		}
		return candidates[i].name < candidates[j].name
	})
	listed := make(map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus, min(len(candidates), maxNodes))
	size := len(`{}`)
	for _, c := range candidates {
		if len(listed) == maxNodes {
			break
		}
		entry, err := json.Marshal(map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus{c.name: c.status})
		if err != nil {
			break
		}
		// The entry without its braces, and a comma.
		if size+len(entry)-1 > maxBytes {
			break
		}
		size += len(entry) - 1
		listed[c.name] = c.status
	}
	notListed := int32(len(candidates) - len(listed))
	if len(listed) == 0 {
		return nil, notListed // as the API server returns it, so that the status compares equal
	}
	return listed, notListed
}

// boundBlocked is the blocked entries with their messages cut to the CRD's limit: an eviction's
// error or an owner's message may be of any length, and one too long would fail the whole status
// write. The entries are the node controller's report's, shared: they are copied, never changed.
func boundBlocked(blocked []nodemaintv1alpha1.BlockedPods) []nodemaintv1alpha1.BlockedPods {
	if blocked == nil {
		return nil
	}
	out := make([]nodemaintv1alpha1.BlockedPods, len(blocked))
	for i, b := range blocked {
		b.Pods = slices.Clone(b.Pods)
		b.Message = few.Cut(b.Message, nodemaintv1alpha1.MaxBlockedMessageLength)
		out[i] = b
	}
	return out
}

// maintenanceStatus is the status of the maintenance from the decisions about its selected nodes
// at now, and about its rollout's turns (nil without spec.rollout): the totals, the nodes worth
// detailing (within bounds, see listNodes), the phase, and the Drained, DrainTimedOut,
// RolloutHalted and NodesOverMaintenanceLimit conditions. In a rollout the totals and details are
// those of the nodes in their turn, and the maintenance is drained, and complete, once every node
// was released. A node the maintenance waits for a place on (past
// maintenance.MaxMaintenancesPerNode) is never drained for it, and its pods are held by that
// (TooManyMaintenances). The NodesSelected and SpecValid conditions are the caller's.
func maintenanceStatus(nm *nodemaintv1alpha1.NodeMaintenance, nodes []NodeDecision, turns *rollout.Decision, now time.Time) nodemaintv1alpha1.NodeMaintenanceStatus {
	status := nodemaintv1alpha1.NodeMaintenanceStatus{
		ObservedGeneration: nm.Generation,
		SelectedNodes:      int32(len(nodes)),
		Conditions:         append([]metav1.Condition(nil), nm.Status.Conditions...),
		DrainStartTime:     nm.Status.DrainStartTime,
	}
	switch {
	case !nm.Spec.Drain:
		status.DrainStartTime = nil
	case status.DrainStartTime == nil:
		status.DrainStartTime = &metav1.Time{Time: now.Truncate(time.Second)}
	}
	t := tally{selected: len(nodes), waiting: waitingFor(nm, nodes)}
	if turns != nil {
		rolloutStatus(nm, turns, &status, now)
		nodes = rolledNodes(turns, nodes)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
	}
	t.detailed = len(nodes)
	reports := countNodes(nm, nodes, &t, &status)
	status.Nodes, status.NodesNotListed = listNodes(reports, nodemaintv1alpha1.MaxStatusNodes, nodemaintv1alpha1.MaxStatusNodesBytes)
	// A maintenance that selects no node has drained nothing: it is never Drained (a typo in a
	// node name must not read as done).
	t.drained = nm.Spec.Drain && len(nodes) > 0 && status.PodsPendingEvacuation == 0 && status.VolumesAttached == 0 && len(t.waiting) == 0
	if turns != nil {
		t.drained = nm.Spec.Drain && turns.Complete
	}
	status.Phase = maintenance.Phase(nm, t.drained)
	if turns != nil && turns.Complete {
		status.Phase = nodemaintv1alpha1.PhaseMaintenanceComplete
	}
	setCondition(&status.Conditions, drainedCondition(nm, &status, t, turns), now)
	setDrainTimedOut(nm, &status, t, turns, now)
	setOverMaintenanceLimit(nm, &status, t, now)
	for i := range status.Conditions {
		status.Conditions[i].Message = few.Cut(status.Conditions[i].Message, nodemaintv1alpha1.MaxConditionMessageLength)
	}
	return status
}

// tally is what the status's conditions are decided from, besides its totals.
type tally struct {
	// selected counts the selected nodes; detailed those the totals count (in a rollout, the
	// nodes in their turn).
	selected, detailed int
	// waiting names the selected nodes the maintenance waits for a place on (past
	// maintenance.MaxMaintenancesPerNode), sorted.
	waiting []string
	// left and skipped name a few of the pods left and skipped.
	left, skipped []string
	drained       bool
}

// waitingFor names the selected nodes where the maintenance does not act, past the bound, sorted.
func waitingFor(nm *nodemaintv1alpha1.NodeMaintenance, nodes []NodeDecision) []string {
	var names []string
	for _, n := range nodes {
		if slices.Contains(n.Report.Beyond, nm.Name) {
			names = append(names, n.Name)
		}
	}
	slices.Sort(names)
	return names
}

// countNodes adds up the nodes' decisions into the status's totals and t's pods left and
// skipped, and returns each node's report, by name, so that the nodes and pods the status names
// do not change from one look to the next.
func countNodes(nm *nodemaintv1alpha1.NodeMaintenance, nodes []NodeDecision, t *tally, status *nodemaintv1alpha1.NodeMaintenanceStatus) []nodeReport {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	waiting := make(map[string]bool, len(t.waiting))
	for _, name := range t.waiting {
		waiting[name] = true
	}
	reports := make([]nodeReport, 0, len(nodes))
	for _, n := range nodes {
		rep := n.Report
		ns := nodemaintv1alpha1.NodeMaintenanceNodeStatus{
			PodsPendingEvacuation: int32(rep.Pending),
			PodsEvacuating:        int32(rep.Evacuating),
			PodsSkipped:           int32(rep.Skipped),
			OutOfService:          rep.OutOfService,
			RemovedBy:             rep.RemovedBy,
		}
		if nm.Spec.Drain {
			// What holds the pods, and the volumes left, are a drain's to report.
			ns.VolumesAttached = int32(rep.VolumesAttached)
			ns.Blocked = boundBlocked(rep.Blocked)
			if waiting[n.Name] && rep.Pending > 0 {
				// Whatever the maintenances acting on the node do, this one does nothing yet.
				ns.Blocked = []nodemaintv1alpha1.BlockedPods{{Reason: nodemaintv1alpha1.ReasonTooManyMaintenances,
					Message: waitingNote, Pods: slices.Clone(rep.Left[:min(len(rep.Left), drain.MaxBlockedNames)]), Count: int32(rep.Pending)}}
			}
		}
		t.left = append(t.left, rep.Left[:min(len(rep.Left), drain.MaxBlockedNames-len(t.left))]...)
		t.skipped = append(t.skipped, rep.SkippedNames[:min(len(rep.SkippedNames), nodedecide.MaxSkippedNames-len(t.skipped))]...)
		reports = append(reports, nodeReport{name: n.Name, status: ns})
		status.PodsPendingEvacuation += ns.PodsPendingEvacuation
		status.PodsEvacuating += ns.PodsEvacuating
		status.PodsSkipped += ns.PodsSkipped
		status.VolumesAttached += ns.VolumesAttached
		switch {
		case ns.PodsPendingEvacuation > 0:
			status.NodesPending++
		case nm.Spec.Drain && ns.VolumesAttached == 0:
			status.NodesDrained++
		}
		if ns.OutOfService {
			status.NodesOutOfService++
		}
	}
	return reports
}

// drainedCondition is the Drained condition of the status's totals.
func drainedCondition(nm *nodemaintv1alpha1.NodeMaintenance, status *nodemaintv1alpha1.NodeMaintenanceStatus, t tally, turns *rollout.Decision) metav1.Condition {
	skippedNote := skippedNote(t.skipped, status.PodsSkipped)
	volumes := status.VolumesAttached
	cond := metav1.Condition{Type: nodemaintv1alpha1.ConditionDrained, ObservedGeneration: nm.Generation}
	switch {
	case !nm.Spec.Drain:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, nodemaintv1alpha1.ReasonDrainNotRequested, "spec.drain is false"
	case t.selected == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, nodemaintv1alpha1.ReasonNoNodesSelected, "the nodeSelector selects no node: nothing is drained"
	case turns != nil && t.drained:
		cond.Status, cond.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrained
		cond.Message = fmt.Sprintf("each of the %d selected nodes was drained in its turn and released", t.selected)
	case turns != nil && status.PodsPendingEvacuation == 0 && volumes == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonRolling
		cond.Message = fmt.Sprintf("%d of %d nodes released; %d in their turn are drained; %d waiting",
			turns.Done, t.selected, len(turns.InTurn), turns.Waiting) + skippedNote
	case len(t.waiting) > 0 && status.PodsPendingEvacuation == 0 && volumes == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonTooManyMaintenances
		cond.Message = fmt.Sprintf("no targeted pod is left on the nodes it acts on; it does not act yet on %d nodes (%s): %s",
			len(t.waiting), few.Names(t.waiting, few.Most), waitingNote) + skippedNote
	case t.drained:
		cond.Status, cond.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrained
		cond.Message = fmt.Sprintf("every targeted pod is gone from the %d selected nodes", t.detailed) + skippedNote
	case status.PodsPendingEvacuation == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonVolumesAttached
		cond.Message = fmt.Sprintf("every targeted pod is gone; %d volumes of drained pods are still attached", volumes) + skippedNote
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonPodsPending
		cond.Message = fmt.Sprintf("%d pods pending evacuation (%d evacuating by their owners) on %d nodes",
			status.PodsPendingEvacuation, status.PodsEvacuating, status.NodesPending) + skippedNote
	}
	return cond
}

// DeletingNote ends the DrainTimedOut message of a maintenance with drainTimeoutAction Delete.
const DeletingNote = "; deleting them on each node once its own drain ran drainTimeout, each asked its response timeout before (drainTimeoutAction Delete)"

// setDrainTimedOut sets the DrainTimedOut condition: only with a drainTimeout the controller can
// use; in a rollout, for the nodes whose turn ran past it.
func setDrainTimedOut(nm *nodemaintv1alpha1.NodeMaintenance, status *nodemaintv1alpha1.NodeMaintenanceStatus, t tally, turns *rollout.Decision, now time.Time) {
	timedOut := metav1.Condition{Type: nodemaintv1alpha1.ConditionDrainTimedOut, ObservedGeneration: nm.Generation,
		Status: metav1.ConditionFalse, Reason: nodemaintv1alpha1.ReasonWithinDrainTimeout}
	among := ""
	if len(t.left) > 0 {
		among = ", among them " + strings.Join(t.left, ", ")
	}
	nmAt := nm.DeepCopy()
	nmAt.Status.DrainStartTime = status.DrainStartTime
	switch {
	case nm.Spec.DrainTimeout == nil || !nm.Spec.Drain || !maintenance.Usable(nm):
		meta.RemoveStatusCondition(&status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut)
		return
	case turns != nil && len(turns.TimedOut) == 0:
	case turns != nil:
		timedOut.Status, timedOut.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrainTimedOut
		timedOut.Message = fmt.Sprintf("not drained %s after their turn started: %s; %d pods left on the nodes in their turn",
			nm.Spec.DrainTimeout.Duration, few.Names(turns.TimedOut, few.Most), status.PodsPendingEvacuation) + among
	case t.drained || now.Before(maintenance.DrainDeadline(nmAt)):
	default:
		timedOut.Status, timedOut.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrainTimedOut
		timedOut.Message = fmt.Sprintf("not drained %s after drain started: %d pods and %d volumes left on %d nodes",
			nm.Spec.DrainTimeout.Duration, status.PodsPendingEvacuation, status.VolumesAttached, status.NodesPending) + among
		if nm.Spec.DrainTimeoutAction == nodemaintv1alpha1.DrainTimeoutActionDelete {
			timedOut.Message += DeletingNote
		}
	}
	setCondition(&status.Conditions, timedOut, now)
}

// podDeletionNotGranted says what a maintenance with drainTimeoutAction Delete does when the
// controller may not delete pods.
const podDeletionNotGranted = "drainTimeoutAction Delete needs the controller's permission to delete pods, which this install " +
	"does not grant (Helm value podDeletion.enabled, kustomize component config/pod-deletion): nothing is deleted; " +
	"the pods left after drainTimeout are evicted through their PodDisruptionBudgets, as with drainTimeoutAction Report"

// SetPodDeletionGranted sets the PodDeletionGranted condition of a maintenance with
// drainTimeoutAction Delete (denied: the controller may not delete pods), and removes it from
// any other. A DrainTimedOut condition that says the pods are being deleted says they are not.
func SetPodDeletionGranted(nm *nodemaintv1alpha1.NodeMaintenance, status *nodemaintv1alpha1.NodeMaintenanceStatus, denied bool, now time.Time) {
	if nm.Spec.DrainTimeoutAction != nodemaintv1alpha1.DrainTimeoutActionDelete {
		meta.RemoveStatusCondition(&status.Conditions, nodemaintv1alpha1.ConditionPodDeletionGranted)
		return
	}
	c := metav1.Condition{Type: nodemaintv1alpha1.ConditionPodDeletionGranted, ObservedGeneration: nm.Generation,
		Status: metav1.ConditionTrue, Reason: nodemaintv1alpha1.ReasonPodDeletionGranted,
		Message: "the controller may delete pods: drainTimeoutAction Delete deletes the pods left after drainTimeout"}
	if denied {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, nodemaintv1alpha1.ReasonPodDeletionNotGranted, podDeletionNotGranted
		if t := meta.FindStatusCondition(status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut); t != nil && t.Status == metav1.ConditionTrue {
			if i := strings.Index(t.Message, DeletingNote); i >= 0 {
				t.Message = t.Message[:i] + "; not deleting them: the controller may not delete pods (condition PodDeletionGranted)"
			}
		}
	}
	setCondition(&status.Conditions, c, now)
}

// setOverMaintenanceLimit sets the NodesOverMaintenanceLimit condition while the maintenance
// waits for a place on some of its nodes, and removes it once it acts on all.
func setOverMaintenanceLimit(nm *nodemaintv1alpha1.NodeMaintenance, status *nodemaintv1alpha1.NodeMaintenanceStatus, t tally, now time.Time) {
	if len(t.waiting) == 0 {
		meta.RemoveStatusCondition(&status.Conditions, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit)
		return
	}
	setCondition(&status.Conditions, metav1.Condition{Type: nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit,
		Status: metav1.ConditionTrue, Reason: nodemaintv1alpha1.ReasonTooManyMaintenances, ObservedGeneration: nm.Generation,
		Message: fmt.Sprintf("waiting for a place on %d of the %d selected nodes (%s): %s",
			len(t.waiting), t.selected, few.Names(t.waiting, few.Most), waitingNote)}, now)
}

// waitingNote says why a maintenance does not act on a node it selects, and when it will.
var waitingNote = fmt.Sprintf("at most %d NodeMaintenances act on a node at once, and %[1]d others act on it; "+
	"nothing is done to the node for this one (no cordon, taint, evacuation request, eviction or deletion) until one of them ends",
	maintenance.MaxMaintenancesPerNode)

// skippedNote says how many pods are skipped and names a few: "; 2 pods skipped and left
// running: ns/a (label nodemaint.dev/drain=skip), ns/b (DrainRule keep-logs)". It is empty when
// none is.
func skippedNote(names []string, total int32) string {
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("; %d pods skipped and left running: %s", total, few.Of(names, int(total)))
}

// setCondition sets c among the conditions (meta.SetStatusCondition), its lastTransitionTime the
// decision's now when it changes status: the decision reads no clock of its own.
func setCondition(conditions *[]metav1.Condition, c metav1.Condition, now time.Time) {
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	meta.SetStatusCondition(conditions, c)
}

// readyCondition is the Ready condition of the status (see ConditionReady): whether the
// maintenance reached what its spec asks, from the status's other conditions and phase.
func readyCondition(nm *nodemaintv1alpha1.NodeMaintenance, status nodemaintv1alpha1.NodeMaintenanceStatus, cordoned int) metav1.Condition {
	conds := status.Conditions
	ready := metav1.Condition{Type: nodemaintv1alpha1.ConditionReady, ObservedGeneration: nm.Generation, Status: metav1.ConditionUnknown,
		Reason: nodemaintv1alpha1.ReasonRolling, Message: "the rollout has not decided yet"}
	follow := func(c *metav1.Condition, status metav1.ConditionStatus) metav1.Condition {
		if c != nil {
			ready.Status, ready.Reason, ready.Message = status, c.Reason, c.Message
		}
		return ready
	}
	halted := meta.FindStatusCondition(conds, nodemaintv1alpha1.ConditionRolloutHalted)
	if halted != nil && halted.Status != metav1.ConditionTrue {
		halted = nil
	}
	switch {
	case meta.IsStatusConditionFalse(conds, nodemaintv1alpha1.ConditionSpecValid):
		return follow(meta.FindStatusCondition(conds, nodemaintv1alpha1.ConditionSpecValid), metav1.ConditionFalse)
	case (nm.Spec.Cordon || nm.Spec.Drain) && meta.IsStatusConditionFalse(conds, nodemaintv1alpha1.ConditionNodesSelected):
		return follow(meta.FindStatusCondition(conds, nodemaintv1alpha1.ConditionNodesSelected), metav1.ConditionFalse)
	case status.Phase == nodemaintv1alpha1.PhaseMaintenanceComplete:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, nodemaintv1alpha1.ReasonMaintenanceComplete, "the maintenance is complete: its nodes are restored"
	case nm.Spec.Rollout == nil && (nm.Spec.Cordon || nm.Spec.Drain) && cordoned < int(status.SelectedNodes) &&
		!meta.IsStatusConditionTrue(conds, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit):
		ready.Status, ready.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonCordoning
		ready.Message = fmt.Sprintf("%d of the %d selected nodes are cordoned", cordoned, status.SelectedNodes)
	case nm.Spec.Drain && meta.IsStatusConditionTrue(conds, nodemaintv1alpha1.ConditionDrained):
		return follow(meta.FindStatusCondition(conds, nodemaintv1alpha1.ConditionDrained), metav1.ConditionTrue)
	case nm.Spec.Drain && meta.IsStatusConditionTrue(conds, nodemaintv1alpha1.ConditionDrainTimedOut):
		return follow(meta.FindStatusCondition(conds, nodemaintv1alpha1.ConditionDrainTimedOut), metav1.ConditionFalse)
	case nm.Spec.Drain && halted != nil:
		return follow(halted, metav1.ConditionFalse)
	case nm.Spec.Drain:
		return follow(meta.FindStatusCondition(conds, nodemaintv1alpha1.ConditionDrained), metav1.ConditionFalse)
	case nm.Spec.Cordon && nm.Spec.Rollout != nil:
		c := meta.FindStatusCondition(conds, nodemaintv1alpha1.ConditionRolloutHalted)
		if c != nil && c.Reason == nodemaintv1alpha1.ReasonRolloutComplete {
			return follow(c, metav1.ConditionTrue)
		}
		return follow(c, metav1.ConditionFalse)
	case nm.Spec.Cordon && meta.IsStatusConditionTrue(conds, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit):
		return follow(meta.FindStatusCondition(conds, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit), metav1.ConditionFalse)
	case nm.Spec.Cordon:
		ready.Status, ready.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonCordoned
		ready.Message = fmt.Sprintf("every selected node is cordoned (%d nodes)", status.SelectedNodes)
	default:
		ready.Status, ready.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonPlanned
		ready.Message = fmt.Sprintf("planned on %d nodes: they carry the planned-maintenance taint", status.SelectedNodes)
	}
	return ready
}

// nodesSelectedCondition says whether the selector selects no node, which is likely a mistake
// (the maintenance then does nothing), or every node of a cluster of several, which is likely a
// mistake too (the whole cluster is cordoned and drained); and whether a maintenance without a
// rollout selects more than one control-plane node (controlPlanes, sorted), which it would take
// at once, members of a stacked etcd together: refused (rollout.Refused), it does not start.
func nodesSelectedCondition(nm *nodemaintv1alpha1.NodeMaintenance, sel maintenance.Selector, selected, total int, controlPlanes []string) metav1.Condition {
	c := metav1.Condition{Type: nodemaintv1alpha1.ConditionNodesSelected, ObservedGeneration: nm.Generation}
	switch {
	case sel.Err() == nil && nm.Spec.Rollout == nil && len(controlPlanes) > 1:
		c.Status, c.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonEtcdQuorumAtRisk
		c.Message = fmt.Sprintf("the nodeSelector selects %d control-plane nodes (%s) and there is no spec.rollout: they would be cordoned, "+
			"drained and maintained at once, etcd members together, which may lose etcd's quorum; the maintenance does not start "+
			"(every selected node stays in Planning) until it selects at most one control-plane node, or rolls (spec.rollout takes "+
			"control-plane nodes one at a time)", len(controlPlanes), few.Names(controlPlanes, few.Most))
	case sel.Err() != nil:
		c.Status, c.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonInvalidNodeSelector
		c.Message = fmt.Sprintf("the nodeSelector selects no node: %v", sel.Err())
	case selected == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, nodemaintv1alpha1.ReasonNoNodesSelected, "the nodeSelector selects no node"
	case selected == total && total > 1:
		c.Status, c.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonAllNodesSelected
		c.Message = fmt.Sprintf("the nodeSelector selects every node of the cluster (%d nodes)", selected)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonNodesSelected
		c.Message = fmt.Sprintf("the nodeSelector selects %d nodes", selected)
	}
	return c
}
