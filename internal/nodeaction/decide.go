package nodeaction

import (
	"fmt"
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
	plan := obs.Plan
	drained := plan.Pending() == 0 && obs.VolumesAttached == 0
	// In a rollout, a maintenance applies to the node only in its turn, and its drain times out
	// counted from the turn (rollout.OnNode).
	nms := make([]*nodemaintv1alpha1.NodeMaintenance, len(obs.Maintenances))
	for i, nm := range obs.Maintenances {
		nms[i] = rollout.OnNode(nm, obs.Node.Name)
	}
	intent := maintenance.Intent(nms, func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase {
		return rollout.Phase(nm, obs.Node, drained)
	})
	d := Decision{Intent: intent, RequestReason: intent.Reason}
	oos, wait, missing := outOfService(obs.Node, obs.Pods, intent, now)
	d.after(wait)
	d.ShutdownNotConfirmed = missing
	d.Node, d.Change, d.NodeChanged, d.ConditionChanged = wantNode(obs.Node, intent, oos, now)
	d.Withdraw, d.Request = requests(obs.Pods, plan.Current, intent)

	var current []drain.Decision
	if intent.Drain {
		// A complete cordon is a prerequisite of the drain (KEP-4212): no pod is asked to move,
		// and none is evicted or deleted, before the node is unschedulable, or a replacement could
		// land right back on it. d.Node is, since a maintenance that drains also cordons; the
		// reconciler acts on these only once it is written.
		policy := drain.Policy{Evict: intent.Evict, ResponseTimeout: intent.ResponseTimeout, CountFrom: obs.ActiveSince}
		current = drain.DecideCurrent(plan.Current, now, policy, obs.Refusals)
		deleting := map[types.UID]bool{}
		if !intent.DeleteAt.IsZero() {
			if wait := intent.DeleteAt.Sub(now); wait > 0 {
				d.after(wait)
			} else {
				d.Delete = left(plan)
				for _, c := range d.Delete {
					deleting[c.Pod.UID] = true
				}
			}
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

// after keeps the earliest time the decision must be made again.
func (d *Decision) after(wait time.Duration) {
	if wait > 0 && (d.RecheckAfter == 0 || wait < d.RecheckAfter) {
		d.RecheckAfter = wait
	}
}

// requests decides nodemaint's evacuation requests: set on the pods drained now (the current
// order group) while the node is drained, withdrawn from every other pod. Another requester's
// request is never touched.
func requests(pods []corev1.Pod, current []drain.Classified, intent maintenance.NodeIntent) (withdraw, request []*corev1.Pod) {
	drained := map[types.UID]bool{}
	if intent.Drain {
		for _, c := range current {
			drained[c.Pod.UID] = true
		}
	}
	for i := range pods {
		pod := &pods[i]
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

// left are the pods the drain still waits for and nodemaint may delete: neither terminating nor
// protected. Skipped and held pods stay.
func left(plan drain.Plan) []drain.Classified {
	var out []drain.Classified
	for _, group := range [][]drain.Classified{plan.Current, plan.Later, plan.WaitCompleted} {
		for _, c := range group {
			if c.Pod.DeletionTimestamp == nil && c.Class.Protected == "" {
				out = append(out, c)
			}
		}
	}
	return out
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
