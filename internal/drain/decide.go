package drain

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Policy is how the maintenances draining a node want its pods treated.
type Policy struct {
	// Evict pods whose owners do not answer; false is signal-only.
	Evict bool
	// ResponseTimeout is how long owners have to accept an evacuation request.
	ResponseTimeout time.Duration
	// CountFrom, when later than a pod's evacuation request, is when its response timeout starts
	// instead: when this controller replica became the leader (see observe.ActiveSince).
	CountFrom time.Time
	// NotSelected and HonoredLabel, when Evict is false although some maintenance draining the
	// node evicts, say why none evicts this pod: no evicting maintenance's spec.podSelector
	// selects it, or they honor its nodemaint.dev/drain label (its value). Neither: signal only.
	NotSelected  bool
	HonoredLabel string
}

// Verdict is what to do with one pod of the current order group now.
type Verdict struct {
	Evict bool
	// Reason says why the pod is still there when not evicted (a BlockedReason); from
	// JudgeCurrent, also what an eviction meets (Evicting, or the refusal of the last one). The
	// other fields are the facts Message words.
	Reason string
	// Quoted is what another party said: the owner's EvacuationInitiated message
	// (EvacuatingByOwner, PodDisruptionBudget under the EvictionRequest protocol) or the API
	// server's refusal of the last eviction (PodDisruptionBudget, EvictionFailed).
	Quoted string
	// Declined is the owner's decline of the evacuation (its EvacuationInitiated=False reason
	// and message) of a pod evicted since: the status says why the owner did not move it.
	Declined string
	// Protected is what protects the pod (Protected).
	Protected string
	// NotRequested: the evacuation request is not written yet (WaitingForOwner).
	NotRequested bool
	// Policy is what the maintenances want of the pod (WaitingForOwner: whether it is evicted
	// after Policy.ResponseTimeout, or why not).
	Policy Policy
	// Bare: the pod has no controller (see Unanswerable).
	Bare bool
	// RecheckAfter is when the decision may change by itself (the response timeout runs out).
	RecheckAfter time.Duration
	// Since is when the pod entered the state Reason names, when known (Terminating: its
	// deletion).
	Since time.Time
}

// Judge decides about a pod of the current order group. Its owner has the response timeout,
// counted from the EvacuationRequest's last transition (or policy.CountFrom, if later), to accept
// (EvacuationInitiated=True); an owner that declines (EvacuationInitiated=False) has its pod
// evicted at once. A bare pod (see Unanswerable) waits the response timeout like any other, since
// an operator may answer for it, and its message says that it will not come back once evicted. An
// accepted pod is left to its owner, and a protected pod (Class.Protected) is never evicted.
func Judge(c Classified, now time.Time, policy Policy) Verdict {
	pod := c.Pod
	if pod.DeletionTimestamp != nil {
		return Verdict{Reason: nodemaintv1alpha1.BlockedReasonTerminating, Since: deletionRequested(pod)}
	}
	if cond := evacuation.Condition(pod, evacuation.Initiated); cond != nil && cond.Status == corev1.ConditionTrue {
		reason := nodemaintv1alpha1.BlockedReasonEvacuatingByOwner
		if cond.Reason == nodemaintv1alpha1.BlockedReasonPodDisruptionBudget {
			// Under the EvictionRequest protocol, the imperative evictor is evicting it and a
			// budget refuses (requester.Answer).
			reason = nodemaintv1alpha1.BlockedReasonPodDisruptionBudget
		}
		return Verdict{Reason: reason, Quoted: cond.Message}
	}
	req := evacuation.Condition(pod, evacuation.Request)
	if req == nil || req.Status != corev1.ConditionTrue {
		// The request is written by the look that decides it: its write, or the backlog it waits
		// for (evictionbacklog), brings the next look.
		return Verdict{Reason: nodemaintv1alpha1.BlockedReasonWaitingForOwner, NotRequested: true}
	}
	if c.Class.Protected != "" {
		return Verdict{Reason: nodemaintv1alpha1.BlockedReasonProtected, Protected: c.Class.Protected}
	}
	if !policy.Evict {
		return Verdict{Reason: nodemaintv1alpha1.BlockedReasonWaitingForOwner, Policy: policy}
	}
	if evacuation.Declined(pod) {
		cond := evacuation.Condition(pod, evacuation.Initiated)
		said := slices.DeleteFunc([]string{cond.Reason, cond.Message}, func(s string) bool { return s == "" })
		return Verdict{Evict: true, Declined: cmp.Or(strings.Join(said, ": "), "no reason given")}
	}
	// The API server keeps a condition's time to the second: the request was written up to a
	// second after its lastTransitionTime says, so the timeout counts from the end of that second.
	from := req.LastTransitionTime.Time.Truncate(time.Second).Add(time.Second)
	if policy.CountFrom.After(from) {
		from = policy.CountFrom
	}
	left := from.Add(policy.ResponseTimeout).Sub(now)
	if left <= 0 {
		return Verdict{Evict: true}
	}
	return Verdict{Reason: nodemaintv1alpha1.BlockedReasonWaitingForOwner, Policy: policy, Bare: Unanswerable(pod), RecheckAfter: left}
}

// Refusal is an eviction the API server refused: the pod backs off until NotBefore. Reason is
// nodemaintv1alpha1.BlockedReasonPodDisruptionBudget for a 429, BlockedReasonEvictionFailed
// otherwise; Message is the API server's. Budgets identifies the state of the
// PodDisruptionBudgets the eviction was refused under, where the evictor records it, so that it
// can try again as soon as they change. The evictor's memory (evictor.Refusals) holds them.
type Refusal struct {
	NotBefore       time.Time
	Reason, Message string
	Budgets         string
	// Attempts counts the pod's refused evictions in a row, this one included.
	Attempts int
}

// JudgeCurrent decides about every pod of the current order group, in order, with what the API
// server said of their earlier evictions (refusals, by pod UID): a pod whose eviction was refused
// backs off until the refusal's NotBefore, held by the refusal; one past it is evicted again,
// still reported with the refusal until an eviction succeeds. Every decision names a reason.
func JudgeCurrent(current []Classified, now time.Time, policy Policy, refusals map[types.UID]Refusal) []Verdict {
	return JudgeCurrentEach(current, now, func(Classified) Policy { return policy }, refusals)
}

// JudgeCurrentEach is JudgeCurrent with a policy of its own for each pod (policyOf): several
// maintenances may drain a node, each evicting only the pods its own classification drains.
func JudgeCurrentEach(current []Classified, now time.Time, policyOf func(Classified) Policy, refusals map[types.UID]Refusal) []Verdict {
	out := make([]Verdict, len(current))
	for i, c := range current {
		d := Judge(c, now, policyOf(c))
		if d.Evict {
			switch r, refused := refusals[c.Pod.UID]; {
			case refused && r.NotBefore.After(now):
				d = Verdict{Reason: r.Reason, Quoted: r.Message, RecheckAfter: r.NotBefore.Sub(now), Declined: d.Declined}
			case refused:
				d.Reason, d.Quoted = r.Reason, r.Message
			default:
				d.Reason = nodemaintv1alpha1.BlockedReasonEvicting
			}
		}
		out[i] = d
	}
	return out
}

// Unanswerable reports whether the pod has no controller (a bare pod): no workload controller
// recreates it once it is evicted, as kubectl drain warns before it refuses such pods without
// --force. It still waits the response timeout, since an operator may answer for it.
func Unanswerable(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return false
		}
	}
	return true
}

// deletionRequested is when a terminating pod's deletion was asked for: its deletionTimestamp is
// when its grace period runs out, deletionGracePeriodSeconds after the request.
func deletionRequested(pod *corev1.Pod) time.Time {
	t := pod.DeletionTimestamp.Time
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		t = t.Add(-time.Duration(*g) * time.Second)
	}
	return t
}

// Overtaken says why a pod decided for eviction from the cache must not be evicted after all,
// given the pod as the API server has it now ("" when it still must): its owner accepted the
// evacuation, the request was withdrawn, or the pod is terminating or gone (nil) since. At
// scale the cache lags the API server by seconds, and an owner's answer that comes just before
// the response timeout runs out would otherwise be overtaken by the eviction it answers.
func Overtaken(live *corev1.Pod) string {
	switch {
	case live == nil:
		return "gone"
	case live.DeletionTimestamp != nil:
		return "terminating"
	case evacuation.Accepted(live):
		return "the owner accepted the evacuation"
	case !evacuation.Requested(live):
		return "the evacuation request was withdrawn"
	}
	return ""
}
