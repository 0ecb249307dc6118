package nodeaction

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Decide decides what nodemaint does to the observed node and its pods at now. It does not
// change the observation.
func Decide(obs Observation, now time.Time) Decision {
	// The observer admitted the maintenances (Admit); admitting them again here changes nothing
	// then, and keeps the node's annotations and conditions bounded whoever observed.
	acting, beyond := Admit(obs.Node, obs.Maintenances)
	obs.Maintenances, obs.Beyond = acting, append(slices.Clip(obs.Beyond), beyond...)
	plan := obs.Plan
	drained := plan.Pending() == 0 && obs.VolumesAttached == 0
	// In a rollout, a maintenance applies to the node only in its turn (rollout.Phase).
	phases := make(map[*nodemaintv1alpha1.NodeMaintenance]nodemaintv1alpha1.Phase, len(obs.Maintenances))
	var drainers []*nodemaintv1alpha1.NodeMaintenance
	for _, nm := range obs.Maintenances {
		phases[nm] = rollout.Phase(nm, obs.Node, drained)
		if maintenance.Drains(phases[nm]) {
			drainers = append(drainers, nm)
		}
	}
	intent := maintenance.Intent(obs.Maintenances, func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase {
		return phases[nm]
	})
	for _, nm := range obs.Beyond {
		intent.Beyond = append(intent.Beyond, nm.Name)
	}
	// Each maintenance's drain on this node starts when it first drains it (recorded in the node,
	// written with the cordon), whenever the maintenance itself started draining.
	starts := maintenance.DrainStarts(maintenance.ParseDrainStarts(obs.Node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation]),
		obs.Maintenances, func(nm *nodemaintv1alpha1.NodeMaintenance) bool { return maintenance.Drains(phases[nm]) }, now)
	d := Decision{Intent: intent, RequestReason: intent.Reason}
	oos, wait, missing := outOfService(obs.Node, obs.Pods, intent, now)
	d.after(wait)
	d.ShutdownNotConfirmed = missing
	d.Node, d.Change, d.NodeChanged, d.ConditionChanged = wantNode(obs.Node, intent, maintenance.FormatDrainStarts(starts), oos, now)
	d.Withdraw, d.Request = requests(obs.Pods, plan.Current, intent)

	var current []drain.Decision
	if intent.Drain {
		// A complete cordon is a prerequisite of the drain (KEP-4212): no pod is asked to move,
		// and none is evicted or deleted, before the node is unschedulable, or a replacement could
		// land right back on it. d.Node is, since a maintenance that drains also cordons; the
		// reconciler acts on these only once it is written.
		current = drain.DecideCurrentEach(plan.Current, now, func(c drain.Classified) drain.Policy {
			return evictPolicy(obs, drainers, c)
		}, obs.Refusals)
		var wait time.Duration
		d.Delete, wait = deletions(obs, drainers, starts, now)
		d.after(wait)
		deleting := map[types.UID]bool{}
		for _, c := range d.Delete {
			deleting[c.Pod.UID] = true
		}
		for i, c := range plan.Current {
			switch {
			case deleting[c.Pod.UID]:
			case current[i].Evict:
				d.Evict = append(d.Evict, c)
			default:
				d.after(current[i].RecheckAfter)
			}
		}
	}
	d.Report = report(obs, current, now)
	return d
}

// ignoresLabel reports whether the maintenance ignores the pod label nodemaint.dev/drain.
func ignoresLabel(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return nm.Spec.DrainLabelPolicy == nodemaintv1alpha1.DrainLabelPolicyIgnore
}

// evictPolicy is how a pod of the current order group is evicted: by the maintenances draining
// the node that evict and whose own classification drains the pod (their own drainLabelPolicy),
// after the shortest of their response timeouts. A pod drained only because another maintenance
// ignores its label is evicted only if a maintenance that ignores it evicts: no maintenance's
// eviction reaches a pod it leaves alone.
func evictPolicy(obs Observation, drainers []*nodemaintv1alpha1.NodeMaintenance, c drain.Classified) drain.Policy {
	p := drain.Policy{CountFrom: obs.ActiveSince}
	someEvicts := false
	for _, nm := range drainers {
		if !maintenance.Evicts(nm) {
			continue
		}
		someEvicts = true
		if !c.DrainedBy(ignoresLabel(nm), obs.IgnoreDrainLabel) {
			continue
		}
		if t := maintenance.ResponseTimeout(nm); !p.Evict || t < p.ResponseTimeout {
			p.ResponseTimeout = t
		}
		p.Evict = true
	}
	if !p.Evict && someEvicts {
		p.HonoredLabel = c.Pod.Labels[nodemaintv1alpha1.DrainLabel]
	}
	return p
}

// deletions are the pods deleted now, past their budgets, and how long until the next one may be
// (zero: none to come by itself). A pod is deleted for a maintenance M only when M asked for it
// (maintenance.Deletes), M drains the node and M's drainTimeout ran out counted from M's own
// drain start on this node (starts), M's own classification drains the pod (its label policy and
// the DrainRules, drain.Classified.DrainedBy), and the pod carries nodemaint's evacuation request
// since at least M's response timeout (counted, like evictions, from this replica's leadership at
// the earliest). So only pods of the current order group are ever deleted (no other is asked),
// pods waited for to complete and skipped, protected, held or terminating pods never are.
func deletions(obs Observation, drainers []*nodemaintv1alpha1.NodeMaintenance, starts map[string]maintenance.DrainStart, now time.Time) ([]drain.Classified, time.Duration) {
	var (
		out    []drain.Classified
		wait   time.Duration
		chosen = map[types.UID]bool{}
	)
	later := func(left time.Duration) {
		if left > 0 && (wait == 0 || left < wait) {
			wait = left
		}
	}
	for _, nm := range drainers {
		if !maintenance.Deletes(nm) {
			continue
		}
		deadline := maintenance.NodeDrainDeadline(nm, starts[nm.Name])
		if deadline.IsZero() {
			continue
		}
		if left := deadline.Sub(now); left > 0 {
			later(left)
			continue
		}
		timeout := maintenance.ResponseTimeout(nm)
		for _, c := range obs.Plan.Current {
			if chosen[c.Pod.UID] || c.Pod.DeletionTimestamp != nil || c.Class.Protected != "" || !c.DrainedBy(ignoresLabel(nm), obs.IgnoreDrainLabel) {
				continue
			}
			req := evacuation.Condition(c.Pod, evacuation.Request)
			if req == nil || req.Status != corev1.ConditionTrue || req.Reason != evacuation.ReasonNodeMaintenance {
				continue // asked first: the request comes with this decision
			}
			from := req.LastTransitionTime.Time
			if obs.ActiveSince.After(from) {
				from = obs.ActiveSince
			}
			if left := from.Add(timeout).Sub(now); left > 0 {
				later(left)
				continue
			}
			chosen[c.Pod.UID] = true
			out = append(out, c)
		}
	}
	return out, wait
}

// after keeps the earliest time the decision must be made again.
func (d *Decision) after(wait time.Duration) {
	if wait > 0 && (d.RecheckAfter == 0 || wait < d.RecheckAfter) {
		d.RecheckAfter = wait
	}
}

// requests decides nodemaint's evacuation requests: set on the pods drained now (the current
// order group) while the node is drained, withdrawn from every other pod. Another requester's
// request is never touched.
func requests(pods []*corev1.Pod, current []drain.Classified, intent maintenance.NodeIntent) (withdraw, request []*corev1.Pod) {
	drained := map[types.UID]bool{}
	if intent.Drain {
		for _, c := range current {
			drained[c.Pod.UID] = true
		}
	}
	for _, pod := range pods {
		cur := evacuation.Condition(pod, evacuation.Request)
		ours := cur != nil && cur.Reason == evacuation.ReasonNodeMaintenance
		switch {
		case drained[pod.UID] && (cur == nil || cur.Status != corev1.ConditionTrue || ours):
			if !ours || cur.Status != corev1.ConditionTrue || cur.Message != intent.Reason {
				request = append(request, pod)
			}
		case !drained[pod.UID] && ours:
			withdraw = append(withdraw, pod)
		}
	}
	return withdraw, request
}

// report says what the node's status entry says: current are the decisions about the current
// order group while the node is drained, nil otherwise.
func report(obs Observation, current []drain.Decision, now time.Time) Report {
	plan := obs.Plan
	r := Report{
		Pending:         plan.Pending(),
		Skipped:         len(plan.Skipped),
		VolumesAttached: obs.VolumesAttached,
		OutOfService:    obs.Node.Annotations[nodemaintv1alpha1.OutOfServiceAnnotation] != "",
		RemovedBy:       RemovedBy(obs.Node),
		Blocked:         drain.Blocked(plan, current, now),
	}
	for _, group := range [][]drain.Classified{plan.Current, plan.Later, plan.WaitCompleted} {
		for _, c := range group {
			if len(r.Left) < drain.MaxBlockedNames {
				r.Left = append(r.Left, c.Pod.Namespace+"/"+c.Pod.Name)
			}
			if evacuation.Accepted(c.Pod) {
				r.Evacuating++
			}
		}
	}
	for _, c := range plan.Skipped {
		if len(r.SkippedNames) == MaxSkippedNames {
			break
		}
		r.SkippedNames = append(r.SkippedNames, fmt.Sprintf("%s/%s (%s)", c.Pod.Namespace, c.Pod.Name, c.Class.Source))
	}
	return r
}
