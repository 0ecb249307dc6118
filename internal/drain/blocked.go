package drain

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

const (
	// MaxBlockedNames is how many pods a blocked entry names (the CRD's limit).
	MaxBlockedNames = 5
	// MaxBlockedEntries is how many blocked entries a node's status holds (the CRD's limit).
	MaxBlockedEntries = 16
)

// earliestTerminating is when the first of the terminating pods of current was deleted; zero when
// none is terminating.
func earliestTerminating(current []Verdict) time.Time {
	var since time.Time
	for _, d := range current {
		if d.Reason == nodemaintv1alpha1.BlockedReasonTerminating && !d.Since.IsZero() && (since.IsZero() || d.Since.Before(since)) {
			since = d.Since
		}
	}
	return since
}

// BlockedChangesIn is how long until what Blocked says of the decisions current changes by itself
// (how long the longest terminating pod has been terminating, in steps of terminatingStep); zero:
// only with them.
func BlockedChangesIn(current []Verdict, now time.Time) time.Duration {
	since := earliestTerminating(current)
	if since.IsZero() {
		return 0
	}
	elapsed := max(0, now.Sub(since))
	return terminatingStep - elapsed%terminatingStep
}

// Blocked says what keeps the pods of a plan on their node, grouped by reason and message, with a
// few pod names each, most pods first. Every pod the plan holds counts in exactly one entry: when
// there are more reasons than MaxBlockedEntries, the smallest groups are folded into a last entry
// of reason Other. current are the decisions about plan.Current (JudgeCurrent), in its order,
// when the node is drained now, and nil when it is not: only then are the pods of the current
// order group held by their owners or by evictions.
func Blocked(plan Plan, current []Verdict, now time.Time) []nodemaintv1alpha1.BlockedPods {
	type key struct{ reason, message string }
	groups := map[key]*nodemaintv1alpha1.BlockedPods{}
	var order []key
	add := func(reason, message string, pod *corev1.Pod) {
		k := key{reason, message}
		g, ok := groups[k]
		if !ok {
			g = &nodemaintv1alpha1.BlockedPods{Reason: reason, Message: message}
			groups[k] = g
			order = append(order, k)
		}
		g.Count++
		if len(g.Pods) < MaxBlockedNames {
			g.Pods = append(g.Pods, pod.Namespace+"/"+pod.Name)
		}
	}
	for i, d := range current {
		add(d.Reason, d.Message(), plan.Current[i].Pod)
	}
	terminatingSince := earliestTerminating(current)
	for _, c := range plan.Later {
		add(nodemaintv1alpha1.BlockedReasonWaitingForOrder, laterMessage(c), c.Pod)
	}
	for _, c := range plan.WaitCompleted {
		add(nodemaintv1alpha1.BlockedReasonWaitCompleted, waitCompletedMessage(c), c.Pod)
	}
	for _, c := range plan.Skipped {
		add(nodemaintv1alpha1.BlockedReasonSkipped, skippedMessage(c), c.Pod)
	}
	for _, c := range plan.Held {
		add(nodemaintv1alpha1.BlockedReasonInvalidDrainRule, heldMessage(c), c.Pod)
	}
	if len(order) == 0 {
		return nil
	}
	out := make([]nodemaintv1alpha1.BlockedPods, 0, len(order))
	for _, k := range order {
		g := *groups[k]
		if g.Reason == nodemaintv1alpha1.BlockedReasonTerminating && !terminatingSince.IsZero() {
			g.Message = terminatingMessage(g.Count, now.Sub(terminatingSince))
		}
		out = append(out, g)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	if len(out) > MaxBlockedEntries {
		rest := out[MaxBlockedEntries-1:]
		other := nodemaintv1alpha1.BlockedPods{Reason: nodemaintv1alpha1.BlockedReasonOther}
		for _, g := range rest {
			other.Count += g.Count
			for _, p := range g.Pods {
				if len(other.Pods) < MaxBlockedNames {
					other.Pods = append(other.Pods, p)
				}
			}
		}
		other.Message = otherMessage(other.Count, len(rest))
		out = append(out[:MaxBlockedEntries-1], other)
	}
	return out
}
