package nodedecide

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// What a drain waits on that an application's owner can change, said where the owner looks: the
// PodDisruptionBudget that refuses an eviction, and the workload whose pods do not leave. An app
// owner may not read NodeMaintenances or nodes, but reads the Events of their namespace; an Event
// is namespaced, so it regards the namespaced budget or workload, and is related to the
// maintenance. The decision names the holds (Decision.Holds); AppOwnerEvents words them, one
// Event per object, maintenance and reason; the reconciler records them at most once per
// refresh, so that the events recorder's series counts a long wait in one Event.

// Event reasons of the Events for application owners.
const (
	// ReasonBudgetBlocksDrain: a PodDisruptionBudget refuses the eviction of a pod the drain
	// waits for. On the budget and on the pod's workload.
	ReasonBudgetBlocksDrain = "DisruptionBudgetBlocksDrain"
	// ReasonEvacuationUnanswered: the pod's owner has not answered nodemaint's evacuation request
	// for UnansweredAfter. On the pod's workload.
	ReasonEvacuationUnanswered = "EvacuationUnanswered"
)

// UnansweredAfter is how long an owner may leave an evacuation request unanswered before its
// workload is told: an owner that moves its pods answers within seconds. A pod evicted before
// (its response timeout is shorter) is told of only if a budget then refuses its eviction.
const UnansweredAfter = time.Minute

// MaxHolds bounds the holds one decision names, and so the reads and Events of one look at a node.
const MaxHolds = 20

// Hold is a pod of the current order group that the drain waits on for a reason its application's
// owner can change: a budget refuses its eviction, or its owner has not answered the evacuation
// request for UnansweredAfter.
type Hold struct {
	Pod *corev1.Pod
	// Reason is ReasonBudgetBlocksDrain or ReasonEvacuationUnanswered.
	Reason string
	// Maintenances are the maintenances draining the node that wait for the pod: for a budget,
	// those that evict it; for an unanswered request, those whose own classification drains it.
	Maintenances []*nodemaintv1alpha1.NodeMaintenance
	// Quoted is the refusal of the pod's last eviction (ReasonBudgetBlocksDrain), as the API
	// server or the Eviction controller said it.
	Quoted string
	// Asked is when the pod was asked to move (ReasonEvacuationUnanswered).
	Asked time.Time
	// EvictIn is how long until the pod is evicted if its owner still does not answer
	// (ReasonEvacuationUnanswered); zero: nodemaint does not evict it (signal only, or no
	// evicting maintenance drains it), the drain waits for the owner or the pod's deletion.
	EvictIn time.Duration
}

// holds are the pods of the current order group the drain waits on for their application's owner
// (Hold), at most MaxHolds, and how long until the next pod's request has gone unanswered for
// UnansweredAfter (zero: none to come by itself).
func holds(obs Observation, drainers []drainer, current []drain.Verdict, now time.Time) ([]Hold, time.Duration) {
	var (
		out  []Hold
		wait time.Duration
	)
	for i, c := range obs.Plan.Current {
		if len(out) == MaxHolds {
			break
		}
		v := current[i]
		switch {
		case v.Reason == nodemaintv1alpha1.BlockedReasonPodDisruptionBudget:
			if nms := evictors(drainers, c); len(nms) > 0 {
				out = append(out, Hold{Pod: c.Pod, Reason: ReasonBudgetBlocksDrain, Maintenances: nms, Quoted: v.Quoted})
			}
		case v.Reason == nodemaintv1alpha1.BlockedReasonWaitingForOwner && !v.NotRequested && !drain.Unanswerable(c.Pod):
			req := obs.Requests[c.Pod.UID]
			if req == nil {
				continue
			}
			asked := req.LastTransitionTime.Time
			evictIn := time.Duration(0)
			if v.Policy.Evict {
				evictIn = v.RecheckAfter
			}
			// Counted as the response timeout is (drain.Judge): from the end of the second the
			// condition's time names.
			if left := asked.Truncate(time.Second).Add(time.Second + UnansweredAfter).Sub(now); left > 0 {
				// Told only if the pod is still there then: not evicted before.
				if evictIn == 0 || left < evictIn {
					wait = recheck.Soonest(wait, left)
				}
				continue
			}
			var nms []*nodemaintv1alpha1.NodeMaintenance
			for _, dr := range drainers {
				if dr.drains(c) {
					nms = append(nms, dr.nm)
				}
			}
			if len(nms) > 0 {
				out = append(out, Hold{Pod: c.Pod, Reason: ReasonEvacuationUnanswered, Maintenances: nms, Asked: asked, EvictIn: evictIn})
			}
		}
	}
	return out, wait
}

// Holders is what the reconciler read of the applications of the holds' pods, by pod UID: the
// PodDisruptionBudgets that select the pod, and the workload that owns it at the top of the
// controller owner references it can follow (a ReplicaSet's Deployment; nil: a bare pod).
type Holders struct {
	Budgets map[types.UID][]*policyv1.PodDisruptionBudget
	Owners  map[types.UID]*corev1.ObjectReference
}

// AppOwnerEvent is a Warning Event for an application's owner: on Regarding (a budget or a
// workload, namespaced), related to the maintenance.
type AppOwnerEvent struct {
	Regarding   corev1.ObjectReference
	Maintenance *nodemaintv1alpha1.NodeMaintenance
	Reason      string
	Note        string
}

// Key identifies an Event as the events recorder aggregates it into a series: its object, its
// maintenance and its reason.
func (e AppOwnerEvent) Key() string {
	r := e.Regarding
	return strings.Join([]string{r.APIVersion, r.Kind, r.Namespace, r.Name, string(r.UID), e.Maintenance.Name, string(e.Maintenance.UID), e.Reason}, "/")
}

// AppOwnerEvents are the Events the holds on the node make, worded: for each budget that refuses
// an eviction and for each pod's workload, one Event per maintenance and reason, naming the node,
// the maintenance, a few of the pods and what would unblock them. A pod selected by no budget
// the reconciler found has its refusal quoted on its workload; a bare pod has no workload to tell
// (its own Events say it).
func AppOwnerEvents(node string, hs []Hold, holders Holders, now time.Time) []AppOwnerEvent {
	type group struct {
		ev   AppOwnerEvent
		pods []string
		hold Hold
		pdb  *policyv1.PodDisruptionBudget
	}
	var (
		order  []string
		groups = map[string]*group{}
	)
	add := func(regarding corev1.ObjectReference, nm *nodemaintv1alpha1.NodeMaintenance, h Hold, pdb *policyv1.PodDisruptionBudget) {
		ev := AppOwnerEvent{Regarding: regarding, Maintenance: nm, Reason: h.Reason}
		k := ev.Key()
		g := groups[k]
		if g == nil {
			g = &group{ev: ev, hold: h, pdb: pdb}
			groups[k] = g
			order = append(order, k)
		}
		g.pods = append(g.pods, h.Pod.Name)
	}
	for _, h := range hs {
		budgets := blocking(holders.Budgets[h.Pod.UID])
		for _, nm := range h.Maintenances {
			if h.Reason == ReasonBudgetBlocksDrain {
				for _, pdb := range budgets {
					add(budgetRef(pdb), nm, h, pdb)
				}
			}
			if owner := holders.Owners[h.Pod.UID]; owner != nil {
				var pdb *policyv1.PodDisruptionBudget
				if len(budgets) > 0 {
					pdb = budgets[0]
				}
				add(*owner, nm, h, pdb)
			}
		}
	}
	out := make([]AppOwnerEvent, 0, len(order))
	for _, k := range order {
		g := groups[k]
		g.ev.Note = few.Cut(appOwnerNote(node, g.ev, g.hold, g.pdb, g.pods, now), few.MaxEventNote)
		out = append(out, g.ev)
	}
	return out
}

// blocking are the budgets that allow no disruption now, those that refuse; all of them when the
// cache shows none that does (it lags the refusal).
func blocking(budgets []*policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range budgets {
		if pdb.Status.DisruptionsAllowed <= 0 {
			out = append(out, pdb)
		}
	}
	if len(out) == 0 {
		return budgets
	}
	return out
}

func budgetRef(pdb *policyv1.PodDisruptionBudget) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "PodDisruptionBudget",
		Namespace: pdb.Namespace, Name: pdb.Name, UID: pdb.UID}
}

// appOwnerNote words the Event: what waits (the maintenance's drain of the node), on what (the
// pods, the budget or the owner's silence), and what would unblock it.
func appOwnerNote(node string, ev AppOwnerEvent, h Hold, pdb *policyv1.PodDisruptionBudget, pods []string, now time.Time) string {
	slices.Sort(pods)
	pods = slices.Compact(pods)
	which := "pod " + pods[0]
	if len(pods) > 1 {
		which = "pods " + few.Names(pods, few.Most)
	}
	waits := fmt.Sprintf("NodeMaintenance %s waits to drain node %s: ", ev.Maintenance.Name, node)
	switch {
	case h.Reason == ReasonEvacuationUnanswered:
		waited := now.Sub(h.Asked).Round(time.Second)
		then := "nodemaint does not evict it: the drain waits until its owner moves it or it is deleted"
		if h.EvictIn > 0 {
			then = fmt.Sprintf("it is evicted in %s (the maintenance's evacuationResponseTimeout), within its PodDisruptionBudget", h.EvictIn.Round(time.Second))
		}
		return waits + fmt.Sprintf("the owner of %s has not answered nodemaint's evacuation request for %s; %s. "+
			"An owner answers with %s=True and moves the pod", which, waited, then, evacuation.Initiated)
	case pdb == nil:
		return waits + fmt.Sprintf("the eviction of %s is refused: %s; scale up or relax the PodDisruptionBudget that selects it",
			which, cmp.Or(h.Quoted, "by a PodDisruptionBudget"))
	case ev.Regarding.Kind == "PodDisruptionBudget":
		return waits + fmt.Sprintf("this budget refuses the eviction of %s: %s", which, budgetState(pdb))
	default:
		return waits + fmt.Sprintf("budget %s refuses the eviction of %s: %s", pdb.Name, which, budgetState(pdb))
	}
}

// budgetState says why the budget allows no disruption and what would change it: "it allows 0
// disruptions: 2 of 3 pods healthy, minAvailable 3; fix the unhealthy pods, scale up or relax the
// budget".
func budgetState(pdb *policyv1.PodDisruptionBudget) string {
	s := pdb.Status
	var rule string
	switch {
	case pdb.Spec.MinAvailable != nil:
		rule = "minAvailable " + pdb.Spec.MinAvailable.String()
	case pdb.Spec.MaxUnavailable != nil:
		rule = "maxUnavailable " + pdb.Spec.MaxUnavailable.String()
	}
	state := fmt.Sprintf("it allows %d disruptions: %d of %d pods healthy", s.DisruptionsAllowed, s.CurrentHealthy, s.ExpectedPods)
	if rule != "" {
		state += ", " + rule
	}
	if s.CurrentHealthy < s.ExpectedPods {
		return state + "; make the unhealthy pods healthy, scale up or relax the budget"
	}
	return state + "; scale up or relax the budget"
}
