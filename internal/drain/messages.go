package drain

import (
	"fmt"
	"time"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// The words of a node's blocked entries (nodemaintv1alpha1.BlockedPods.Message) are all here,
// built from the facts the decisions name: Judge and Blocked say what holds a pod, these say it.

// Message says, in words, why the pod is still there (or that it is being evicted), and then the
// owner's decline of its evacuation when there was one.
func (d Verdict) Message() string {
	msg := d.message()
	if d.Declined == "" {
		return msg
	}
	declined := "the owner declined the evacuation (" + d.Declined + ")"
	if msg == "" {
		return declined
	}
	return msg + "; " + declined
}

func (d Verdict) message() string {
	switch d.Reason {
	case nodemaintv1alpha1.BlockedReasonTerminating:
		return "terminating"
	case nodemaintv1alpha1.BlockedReasonEvicting:
		return "evicting through the Eviction API"
	case nodemaintv1alpha1.BlockedReasonEvacuatingByOwner:
		if d.Quoted == "" {
			return "the owner accepted the evacuation and is moving the pod"
		}
		return d.Quoted
	case nodemaintv1alpha1.BlockedReasonProtected:
		return d.Protected + ": never evicted or deleted by nodemaint; waiting for its owner to move it"
	case nodemaintv1alpha1.BlockedReasonWaitingForOwner:
		return waitingMessage(d)
	}
	return d.Quoted
}

// waitingMessage words a pod waiting for its owner: not asked yet, never evicted (signal only, or
// its drain label honored), or evicted once the response timeout runs out.
func waitingMessage(d Verdict) string {
	switch {
	case d.NotRequested:
		return "evacuation not requested yet"
	case !d.Policy.Evict && d.Policy.NotSelected:
		return "not selected by the spec.podSelector of the maintenances that evict: waiting for the owner, never evicting"
	case !d.Policy.Evict && d.Policy.HonoredLabel != "":
		return fmt.Sprintf("label %s=%s: the maintenances that evict honor it; waiting for the owner, never evicting",
			nodemaintv1alpha1.DrainLabel, d.Policy.HonoredLabel)
	case !d.Policy.Evict:
		return "signal only: waiting for the owner, never evicting"
	case d.Bare:
		return fmt.Sprintf("bare pod (no controller): it will not be recreated once evicted; waiting up to %s for someone to accept the evacuation request, then evicting", d.Policy.ResponseTimeout)
	}
	return fmt.Sprintf("waiting up to %s for the owner to accept the evacuation request, then evicting", d.Policy.ResponseTimeout)
}

// laterMessage words a pod of a later order group.
func laterMessage(c Classified) string {
	return fmt.Sprintf("order %d waits until the pods of lower orders are gone", c.Class.Order)
}

// waitCompletedMessage words a pod waited for to complete.
func waitCompletedMessage(c Classified) string {
	return "waiting for the pod to complete (" + c.Class.Source + ")"
}

// skippedMessage words a pod left running.
func skippedMessage(c Classified) string {
	return "skipped: " + c.Class.Source
}

// heldMessage words a pod held by an invalid DrainRule.
func heldMessage(c Classified) string {
	return "held until the DrainRule is fixed or deleted: " + c.Class.InvalidRule
}

// otherMessage words the entry that folds the smallest groups: how many pods, for how many reasons.
func otherMessage(pods int32, reasons int) string {
	return fmt.Sprintf("%d pods held for %d other reasons", pods, reasons)
}

// terminatingStep is the granularity of the time pods have been terminating in the status: a
// status that changed every second would be written every time it is refreshed.
const terminatingStep = 10 * time.Second

// terminatingMessage says how long the longest terminating pod of a group has been terminating,
// in steps of terminatingStep; pods that started terminating less than a step ago are just
// "terminating".
func terminatingMessage(count int32, longest time.Duration) string {
	if longest < terminatingStep {
		return "terminating"
	}
	if count == 1 {
		return fmt.Sprintf("terminating for %s", longest.Truncate(terminatingStep))
	}
	return fmt.Sprintf("terminating, the longest for %s", longest.Truncate(terminatingStep))
}
