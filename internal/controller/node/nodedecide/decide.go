package nodedecide

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Decide decides what nodemaint does to the observed node and its pods at now. It does not
// change the observation.
func Decide(obs Observation, now time.Time) Decision {
	// In a rollout, a maintenance applies to the node only in its turn (Observation.Phases).
	intent := maintenance.Intent(obs.Maintenances, func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase {
		return obs.Phases[nm.Name]
	})
	for _, nm := range obs.Beyond {
		intent.Beyond = append(intent.Beyond, nm.Name)
	}
	// Each maintenance's drain on this node starts when it first drains it (recorded in the node,
	// written with the cordon), whenever the maintenance itself started draining, and times out
	// its drainTimeout later (deadlines).
	starts := maintenance.DrainStarts(obs.DrainStarts, obs.Maintenances,
		func(nm *nodemaintv1alpha1.NodeMaintenance) bool { return maintenance.Drains(obs.Phases[nm.Name]) }, now)
	drainers := obs.drainers
	deadlines := make(map[string]time.Time, len(drainers))
	for _, dr := range drainers {
		deadlines[dr.nm.Name] = maintenance.NodeDrainDeadline(dr.nm, starts[dr.nm.Name])
	}
	d := Decision{Intent: intent, RequestReason: intent.Reason}
	// waits are when parts of the decision change by themselves: it looks again at the soonest.
	oos, wait, missing := outOfService(obs.Node, obs.Pods, intent, now)
	waits := []time.Duration{wait}
	d.ShutdownNotConfirmed = missing
	d.Node, d.Change, d.NodeChanged, d.ConditionChanged = wantNode(obs.Node, obs.Entries, intent, maintenance.FormatDrainStarts(starts), oos, now)
	d.Withdraw, d.Request, d.Asked = requests(obs, intent)

	var current []drain.Verdict
	if intent.Drain {
		// A complete cordon is a prerequisite of the drain (KEP-4212): no pod is asked to move,
		// and none is evicted or deleted, before the node is unschedulable, or a replacement could
		// land right back on it. d.Node is, since a maintenance that drains also cordons; the
		// reconciler acts on these only once it is written.
		current, waits = d.drain(obs, drainers, deadlines, now, waits)
		d.SignalOnly = signalOnly(obs, drainers, d.Asked)
		d.Holds, wait = holds(obs, drainers, current, now)
		// The report, which the statuses are made of, says how long pods have been terminating.
		waits = append(waits, wait, drain.BlockedChangesIn(current, now))
	}
	d.Report = report(obs, current, now)
	d.Report.Beyond = intent.Beyond
	d.RecheckAfter = recheck.Soonest(waits...)
	return d
}

// drain decides the evictions and deletions of the node's current order group, with their grace
// periods, and returns the decisions about its pods, and waits with when those change by
// themselves added.
func (d *Decision) drain(obs Observation, drainers []drainer, deadlines map[string]time.Time, now time.Time, waits []time.Duration) ([]drain.Verdict, []time.Duration) {
	current := drain.JudgeCurrentEach(obs.Plan.Current, now, func(c drain.Classified) drain.Policy {
		return evictPolicy(obs, drainers, c)
	}, obs.Refusals)
	deleteFor, wait := deletions(obs, drainers, deadlines, now)
	waits = append(waits, wait)
	for i, c := range obs.Plan.Current {
		switch nms := deleteFor[c.Pod.UID]; {
		case len(nms) > 0:
			d.Delete = append(d.Delete, c)
			d.grace(c.Pod, nms)
		case current[i].Evict:
			d.Evict = append(d.Evict, c)
			d.grace(c.Pod, evictors(drainers, c))
		default:
			waits = append(waits, current[i].RecheckAfter)
		}
	}
	return current, waits
}

// drainer is a maintenance that drains the node (its phase there drains it), with what the
// decision reads of it for every pod, derived once (Observation.Derive): whether it evicts
// (maintenance.Evicts) and deletes (maintenance.Deletes), its response timeout
// (maintenance.ResponseTimeout), and the pods of the current order group its spec.podSelector
// selects and its own classification drains, by UID (drains).
type drainer struct {
	nm               *nodemaintv1alpha1.NodeMaintenance
	evicts, deletes  bool
	responseTimeout  time.Duration
	selects, drained map[types.UID]bool
}

// newDrainer is the maintenance draining the node, with what it does to the plan's current pods
// (the plan classified with the label ignored or not: planIgnoredLabel).
func newDrainer(nm *nodemaintv1alpha1.NodeMaintenance, current []drain.Classified, planIgnoredLabel bool) drainer {
	dr := drainer{nm: nm, evicts: maintenance.Evicts(nm), deletes: maintenance.Deletes(nm), responseTimeout: maintenance.ResponseTimeout(nm),
		selects: make(map[types.UID]bool, len(current)), drained: make(map[types.UID]bool, len(current))}
	pods := maintenance.PodSelector(nm)
	for _, c := range current {
		dr.selects[c.Pod.UID] = pods.Matches(labels.Set(c.Pod.Labels))
		dr.drained[c.Pod.UID] = dr.selects[c.Pod.UID] && c.DrainedBy(ignoresLabel(nm), planIgnoredLabel)
	}
	return dr
}

// drains reports whether the maintenance's own classification drains the pod of the current
// order group: its podSelector selects the pod, and its label policy with the DrainRules drain it
// (drain.Classified.DrainedBy, given whether the plan ignored the label). No maintenance's
// eviction or deletion reaches a pod its podSelector leaves alone, whichever maintenance's
// selector brought the pod into the plan.
func (dr drainer) drains(c drain.Classified) bool {
	return dr.drained[c.Pod.UID]
}

// ignoresLabel reports whether the maintenance ignores the pod label nodemaint.dev/drain.
func ignoresLabel(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return nm.Spec.DrainLabelPolicy == nodemaintv1alpha1.DrainLabelPolicyIgnore
}

// evictors are the maintenances draining the node that evict (maintenance.Evicts) and whose own
// classification drains the pod (drainer.drains): those an eviction of the pod is for.
func evictors(drainers []drainer, c drain.Classified) []*nodemaintv1alpha1.NodeMaintenance {
	var out []*nodemaintv1alpha1.NodeMaintenance
	for _, dr := range drainers {
		if dr.evicts && dr.drains(c) {
			out = append(out, dr.nm)
		}
	}
	return out
}

// signalOnly are the pods of asked that nodemaint never evicts or deletes, by UID: no
// maintenance that drains the node evicts and drains the pod by its own classification (evictors:
// every one that drains it is SignalOnly or has a spec nodemaint cannot use, or those that evict
// leave it alone by their podSelector or label policy), or the pod is protected. A pod that an
// evicting maintenance would evict may be asked through an EvictionRequest, since that
// maintenance would evict it anyway; the others are asked through the pod condition alone (see
// Decision.SignalOnly).
func signalOnly(obs Observation, drainers []drainer, asked []*corev1.Pod) map[types.UID]bool {
	if len(asked) == 0 {
		return nil
	}
	isAsked := make(map[types.UID]bool, len(asked))
	for _, pod := range asked {
		isAsked[pod.UID] = true
	}
	var out map[types.UID]bool
	for _, c := range obs.Plan.Current {
		if !isAsked[c.Pod.UID] || c.Class.Protected == "" && len(evictors(drainers, c)) > 0 {
			continue
		}
		if out == nil {
			out = map[types.UID]bool{}
		}
		out[c.Pod.UID] = true
	}
	return out
}

// evictPolicy is how a pod of the current order group is evicted: by its evictors (the
// maintenances draining the node that evict and whose own podSelector and drainLabelPolicy drain
// the pod), after the shortest of their response timeouts. A pod drained only because another
// maintenance selects it, or ignores its label, is evicted only if such a maintenance evicts: no
// maintenance's eviction reaches a pod it leaves alone.
func evictPolicy(obs Observation, drainers []drainer, c drain.Classified) drain.Policy {
	p := drain.Policy{CountFrom: obs.ActiveSince}
	for _, dr := range drainers {
		if !dr.evicts || !dr.drains(c) {
			continue
		}
		if !p.Evict || dr.responseTimeout < p.ResponseTimeout {
			p.ResponseTimeout = dr.responseTimeout
		}
		p.Evict = true
	}
	if !p.Evict {
		notEvicting(drainers, c, &p)
	}
	return p
}

// notEvicting says in p why no maintenance evicts a pod of the current order group although one
// that drains the node evicts: none of them selects it (spec.podSelector), or they honor its
// nodemaint.dev/drain label. Nothing when none evicts (signal only).
func notEvicting(drainers []drainer, c drain.Classified, p *drain.Policy) {
	someEvicts, selected := false, false
	for _, dr := range drainers {
		if dr.evicts {
			someEvicts = true
			selected = selected || dr.selects[c.Pod.UID]
		}
	}
	switch {
	case !someEvicts:
	case !selected:
		p.NotSelected = true
	default:
		p.HonoredLabel = c.Pod.Labels[nodemaintv1alpha1.DrainLabel]
	}
}

// deletions are the pods deleted now, past their budgets, each with the maintenances it is for,
// and how long until the next one may be (zero: none to come by itself). A pod is deleted for a
// maintenance M only when M asked for it (maintenance.Deletes), M drains the node and M's
// drainTimeout ran out counted from M's own drain start on this node (deadlines), M's own
// classification drains the pod (its podSelector, its label policy and the DrainRules,
// drainer.drains), and the pod carries nodemaint's evacuation request since at least M's response
// timeout (counted, like evictions, from this replica's leadership at the earliest), and only
// when the controller may delete pods at all (Observation.PodDeletionDenied). So only pods
// of the current order group are ever deleted (no other is asked), pods waited for to complete
// and skipped, protected, held or terminating pods never are.
func deletions(obs Observation, drainers []drainer, deadlines map[string]time.Time, now time.Time) (map[types.UID][]*nodemaintv1alpha1.NodeMaintenance, time.Duration) {
	var (
		out  = map[types.UID][]*nodemaintv1alpha1.NodeMaintenance{}
		wait time.Duration
	)
	if obs.PodDeletionDenied {
		return out, 0
	}
	for _, dr := range drainers {
		if !dr.deletes {
			continue
		}
		deadline := deadlines[dr.nm.Name]
		if deadline.IsZero() {
			continue
		}
		if left := deadline.Sub(now); left > 0 {
			wait = recheck.Soonest(wait, left)
			continue
		}
		for _, c := range obs.Plan.Current {
			due, left := deletionDue(obs, dr, c, now)
			switch {
			case due:
				out[c.Pod.UID] = append(out[c.Pod.UID], dr.nm)
			case len(out[c.Pod.UID]) == 0:
				wait = recheck.Soonest(wait, left) // a pod deleted for another maintenance needs no look for this one
			}
		}
	}
	return out, wait
}

// deletionDue reports whether the pod is deleted now for the maintenance, whose drainTimeout ran
// out on the node (see deletions), or else how long until its response timeout does (zero: not
// by itself).
func deletionDue(obs Observation, dr drainer, c drain.Classified, now time.Time) (bool, time.Duration) {
	if c.Pod.DeletionTimestamp != nil || c.Class.Protected != "" || !dr.drains(c) {
		return false, 0
	}
	req := obs.Requests[c.Pod.UID]
	if req == nil || req.Status != corev1.ConditionTrue || req.Reason != evacuation.ReasonNodeMaintenance {
		return false, 0 // asked first: the request comes with this decision
	}
	from := req.LastTransitionTime.Time
	if obs.ActiveSince.After(from) {
		from = obs.ActiveSince
	}
	if left := from.Add(dr.responseTimeout).Sub(now); left > 0 {
		return false, left
	}
	return true, 0
}

// grace records the grace period of the pod's eviction or deletion for the maintenances nms
// (gracePeriod), unless it is the pod's own.
func (d *Decision) grace(pod *corev1.Pod, nms []*nodemaintv1alpha1.NodeMaintenance) {
	if g, ok := gracePeriod(pod, nms); ok {
		if d.GracePeriods == nil {
			d.GracePeriods = map[types.UID]int64{}
		}
		d.GracePeriods[pod.UID] = g
	}
}

// gracePeriod is the grace period, in seconds, of an eviction or deletion of the pod for the
// maintenances nms: the shortest of their spec.evictionGracePeriodSeconds, one that sets none
// counting as the pod's own terminationGracePeriodSeconds (the API server's default, 30s, where
// the pod does not say), as kubectl drain without --grace-period leaves it. The shortest, like
// the response timeout: an eviction is one act for every maintenance it is for, and the one that
// wants it soonest has its way. false: the pod's own (or no maintenance).
func gracePeriod(pod *corev1.Pod, nms []*nodemaintv1alpha1.NodeMaintenance) (int64, bool) {
	own := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		own = *g
	}
	shortest := own
	for i, nm := range nms {
		g := own
		if s := nm.Spec.EvictionGracePeriodSeconds; s != nil {
			g = *s
		}
		if i == 0 || g < shortest {
			shortest = g
		}
	}
	return shortest, shortest != own
}

// requests decides nodemaint's evacuation requests: set on the pods drained now (the current
// order group) while the node is drained, withdrawn from every other pod. Another requester's
// request is never touched. asked are the pods that carry nodemaint's request once request is
// written: request, and those asked before and still asked.
func requests(obs Observation, intent maintenance.NodeIntent) (withdraw, request, asked []*corev1.Pod) {
	drained := map[types.UID]bool{}
	if intent.Drain {
		for _, c := range obs.Plan.Current {
			drained[c.Pod.UID] = true
		}
	}
	for _, pod := range obs.Pods {
		cur := obs.Requests[pod.UID]
		ours := cur != nil && cur.Reason == evacuation.ReasonNodeMaintenance
		switch {
		case drained[pod.UID] && (cur == nil || cur.Status != corev1.ConditionTrue || ours):
			asked = append(asked, pod)
			if !ours || cur.Status != corev1.ConditionTrue || cur.Message != intent.Reason {
				request = append(request, pod)
			}
		case !drained[pod.UID] && ours:
			withdraw = append(withdraw, pod)
		}
	}
	return withdraw, request, asked
}

// report says what the node's status entry says: current are the decisions about the current
// order group while the node is drained, nil otherwise.
func report(obs Observation, current []drain.Verdict, now time.Time) Report {
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
