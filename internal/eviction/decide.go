package eviction

import (
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// Observation is everything the decision about one target pod is made from: the pod (nil when it
// is gone), the EvictionRequests and Evictions naming it (by namespace and name, any UID), and
// what the imperative evictor met so far.
type Observation struct {
	// Namespace and Name name the target pod.
	Namespace, Name string
	// Pod is the target as read; nil when no pod of that name exists.
	Pod *corev1.Pod
	// Requests are the EvictionRequests whose .spec.target.pod names the pod.
	Requests []lifecyclev1alpha1.EvictionRequest
	// Evictions are the Evictions whose .spec.target.pod names the pod.
	Evictions []lifecyclev1alpha1.Eviction
	// HeartbeatDeadline is how long an active responder may go without a heartbeat
	// (evictionrequest.HeartbeatDeadline unless configured).
	HeartbeatDeadline time.Duration
	// EvictNotBefore is when the imperative evictor may try again after a refused eviction of
	// the pod (zero: now); EvictMessage is what the API server said of the last one.
	EvictNotBefore time.Time
	EvictMessage   string
	// Budgets are the PodDisruptionBudgets that select the pod (SelectBudgets), as read;
	// EvictBudgets is their BudgetsVersion when the last eviction was refused, and
	// EvictBudgetRefused says a budget refused it (429). Once they changed and allow the eviction,
	// the imperative evictor tries again without waiting out its back-off; after a budget's
	// refusal, it does not try again while their status does not allow it, back-off over or not:
	// the API server would refuse it again.
	Budgets            []policyv1.PodDisruptionBudget
	EvictBudgets       string
	EvictBudgetRefused bool
	// Evicted: the imperative evictor's eviction of this pod went through, and the pod as read
	// does not show its deletion yet (a cache behind): it is not evicted again.
	Evicted bool
	// Protected, when set, says why the imperative evictor must not evict the pod (it is
	// nodemaint-controller's own): it completes without evicting, with this message.
	Protected string
	// Controller names this Eviction controller: the Evictions labelled with it
	// (evictionrequest.ControllerLabel) are its own; every other Eviction is another
	// controller's, which it never writes nor deletes, and which answers for the pod it names.
	Controller string
	// Yield, when set, says which other Eviction controller answers in the cluster
	// (--eviction-controller=auto): the controller creates no Eviction and writes nothing for a
	// pod it has no Eviction of; it carries its own to their end.
	Yield string
	// InTree, when set, says what shows that kube-controller-manager's Eviction controller
	// answers in the cluster (coexist.go): the controller writes nothing at all.
	InTree string
	// InTreeGrace, when set (--eviction-controller=auto), is how long a pod's first request is
	// left to an in-tree Eviction controller before the pod's Eviction is created (awaitInTree).
	InTreeGrace time.Duration
}

// Decision is what the Eviction controller does about one target pod now.
type Decision struct {
	// Create is an Eviction to create (its status is written by a later decision, since status is
	// a subresource).
	Create *lifecyclev1alpha1.Eviction
	// Status are Evictions whose status changes: the object with its status as wanted.
	Status []*lifecyclev1alpha1.Eviction
	// RequestStatus are EvictionRequests whose status changes (the conditions of their Eviction,
	// or why none is made).
	RequestStatus []*lifecyclev1alpha1.EvictionRequest
	// Meta are Evictions whose ownerReferences and labels change (a request came or went): the
	// object as wanted.
	Meta []*lifecyclev1alpha1.Eviction
	// Delete are Evictions to delete: their target is gone or evicted, or no EvictionRequest
	// names it any more.
	Delete []*lifecyclev1alpha1.Eviction
	// Evict: the imperative evictor is the active responder of Eviction (in Status, or as
	// observed) and calls the pod's eviction subresource now.
	Evict *lifecyclev1alpha1.Eviction
	// Events are what the decision changes, for Events on the Evictions.
	Events []Event
	// RecheckAfter is when the decision may change by itself (a heartbeat deadline or the
	// imperative evictor's back-off runs out); zero: only on a change.
	RecheckAfter time.Duration
	// StandAside, when set, says why the controller leaves the live pod to another Eviction
	// controller (standAsideMessage): nothing of the pod is written but the collection of the
	// controller's own Evictions.
	StandAside string
}

// YieldRecheck is how often the decision about a pod left to another controller that answers in
// the cluster (Yield), without an Eviction of its own, is made again.
const YieldRecheck = time.Minute

// MaxNameLength bounds an Eviction's name.
const maxNameLength = 253

// Decide decides, at now, what the Eviction controller does about the observed target. It does
// not change the observation.
func Decide(obs Observation, now time.Time) Decision {
	if d, ok := handOver(obs); ok {
		return d
	}
	var d Decision
	pod := obs.Pod
	gone, goneReason := targetGone(pod)
	var live types.UID
	if !gone {
		live = pod.UID
	}
	all, active := requestsByTarget(obs.Requests)
	own, others := splitEvictions(obs.Evictions, obs.Controller)
	current := d.keepOneEviction(own, live, func(uid types.UID) bool { return pod == nil || pod.UID != uid }, all)
	if live != "" {
		current = d.standAside(obs, current, others[live])
		if current == nil && d.StandAside == "" {
			d.awaitInTree(obs, now)
		}
	}
	// The requests of gone targets learn that their target is evicted, from the controller
	// whose Eviction named it: another's answers its own; while another answers in the cluster,
	// this one writes only where an Eviction of its own named the target.
	for uid, reqs := range all {
		if uid == live && live != "" || others[uid] != nil || obs.Yield != "" && !names(own, uid) {
			continue
		}
		reason := lifecyclev1alpha1.EvictionConditionReasonPodDeleted
		if pod != nil && uid == pod.UID && gone {
			reason = goneReason
		}
		for _, r := range reqs {
			if reason == lifecyclev1alpha1.EvictionConditionReasonPodDeleted && collectedWith(r, uid) {
				// The garbage collector deletes the request with its pod (its owner, deleted):
				// a status would be written for nobody.
				continue
			}
			d.requestConditions(r, now,
				condition(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionTrue, reason, ""),
				condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonSucceeded, ""))
		}
	}
	if live != "" && d.StandAside == "" {
		d.liveTarget(obs, current, all[live], active[live], now)
	}
	return d
}

// Ours reports whether the Eviction is the named controller's own (ControllerLabel).
func Ours(e *lifecyclev1alpha1.Eviction, controller string) bool {
	v, ok := e.Labels[evictionrequest.ControllerLabel]
	return ok && v == controller
}

// splitEvictions parts the Evictions into the controller's own and, by target UID, the oldest
// of another controller's (read only: they answer for the pod they name).
func splitEvictions(evictions []lifecyclev1alpha1.Eviction, controller string) (own []lifecyclev1alpha1.Eviction, others map[types.UID]*lifecyclev1alpha1.Eviction) {
	others = map[types.UID]*lifecyclev1alpha1.Eviction{}
	for i := range evictions {
		e := &evictions[i]
		switch {
		case Ours(e, controller):
			own = append(own, *e)
		case e.Spec.Target.Pod != nil:
			uid := e.Spec.Target.Pod.UID
			if o := others[uid]; o == nil || older(e, o) {
				others[uid] = e
			}
		}
	}
	return own, others
}

// older orders two Evictions of one pod by creation, then name, then UID: of two controllers'
// Evictions of a pod (both created at once, under different names), the older stays and the
// younger's controller collects its own, the same way in both controllers when both are
// nodemaint.
func older(a, b *lifecyclev1alpha1.Eviction) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.UID < b.UID
}

// names reports whether one of the Evictions names the target UID.
func names(evictions []lifecyclev1alpha1.Eviction, uid types.UID) bool {
	return slices.ContainsFunc(evictions, func(e lifecyclev1alpha1.Eviction) bool {
		return e.Spec.Target.Pod != nil && e.Spec.Target.Pod.UID == uid
	})
}

// standAside decides whether the controller leaves the live pod to another Eviction controller:
// while another's Eviction names it (other), the controller writes nothing for the pod; its own
// Eviction of the pod (current), if younger, is collected (of two nodemaint installations' that
// raced, the older stays, the same in both), and if older, waits for the other to collect its
// own. Without an Eviction of its own, it also stands aside while another controller answers in
// the cluster (obs.Yield). It returns the controller's Eviction of the pod to carry on with (nil
// when it stands aside).
func (d *Decision) standAside(obs Observation, current, other *lifecyclev1alpha1.Eviction) *lifecyclev1alpha1.Eviction {
	switch {
	case other != nil:
		if current != nil && older(other, current) {
			d.Delete = append(d.Delete, current)
		}
		d.StandAside = standAsideMessage(other.Name, "")
		return nil
	case current == nil && obs.Yield != "":
		d.StandAside = standAsideMessage("", obs.Yield)
		// Looked at again, in case the other controller went away without answering.
		d.after(YieldRecheck)
		return nil
	}
	return current
}

// requestsByTarget groups the requests by their target pod's UID (all), and those that want it
// evicted (active). Requests of another UID than the pod's name a pod that is gone (replaced by
// one of the same name).
func requestsByTarget(requests []lifecyclev1alpha1.EvictionRequest) (all, active map[types.UID][]*lifecyclev1alpha1.EvictionRequest) {
	active = map[types.UID][]*lifecyclev1alpha1.EvictionRequest{}
	all = map[types.UID][]*lifecyclev1alpha1.EvictionRequest{}
	for i := range requests {
		r := &requests[i]
		if r.Spec.Target.Pod == nil {
			continue
		}
		uid := r.Spec.Target.Pod.UID
		all[uid] = append(all[uid], r)
		if wantsEviction(r) {
			active[uid] = append(active[uid], r)
		}
	}
	return all, active
}

// keepOneEviction returns the controller's own Eviction (evictions: its own only) of the live
// target (its UID; "": none), one at most; the others (the target gone, or never named by a
// request, or a second one of the same target) are finished and collected. The Eviction of a
// target deleted (deleted(uid): no pod of its UID, not only terminal) whose every owner is a request that goes with the target
// (collectedWith) is left to the garbage collector, which deletes it with them: a delete of its
// own would be a second one.
func (d *Decision) keepOneEviction(evictions []lifecyclev1alpha1.Eviction, live types.UID, deleted func(types.UID) bool, requests map[types.UID][]*lifecyclev1alpha1.EvictionRequest) *lifecyclev1alpha1.Eviction {
	var current *lifecyclev1alpha1.Eviction
	for i := range evictions {
		e := &evictions[i]
		uid := types.UID("")
		if e.Spec.Target.Pod != nil {
			uid = e.Spec.Target.Pod.UID
		}
		switch {
		case uid == live && live != "" && current == nil && e.DeletionTimestamp == nil:
			current = e
		case e.DeletionTimestamp != nil:
		case uid != live || live == "":
			// The target is gone: TargetEvicted is copied into its requests (Decide), then the
			// Eviction is collected, by the garbage collector where it goes with them.
			if uid == "" || !deleted(uid) || !collectedByOwners(e, requests[uid], uid) {
				d.Delete = append(d.Delete, e)
			}
		default:
			// A second Eviction of its own of the same target (a create that raced a stale
			// cache): only one is kept.
			d.Delete = append(d.Delete, e)
		}
	}
	return current
}

// liveTarget decides about the Eviction of a pod that is not gone (current: its Eviction, nil
// when none), from its requests (all) and those that want it evicted (active).
func (d *Decision) liveTarget(obs Observation, current *lifecyclev1alpha1.Eviction, all, active []*lifecyclev1alpha1.EvictionRequest, now time.Time) {
	pod := obs.Pod
	switch {
	case len(all) == 0:
		if current != nil {
			d.Delete = append(d.Delete, current)
		}
		return
	case pod.Spec.SchedulingGroup != nil:
		for _, r := range all {
			d.requestConditions(r, now, condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionTrue,
				lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid, pod.Name))
		}
		if current != nil {
			d.Delete = append(d.Delete, current)
		}
		return
	case current == nil:
		// A terminating pod is already going: an Eviction would ask its responders for nothing,
		// and where another controller's Eviction of it was just collected (its cache saw the pod
		// gone first), a second one would be made for the same pod.
		if len(active) > 0 && pod.DeletionTimestamp == nil {
			d.Create = newEviction(obs, pod, all)
		}
		return
	}
	if cond := meta.FindStatusCondition(current.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)); cond != nil && cond.Status == metav1.ConditionTrue &&
		cond.Reason == string(lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters) && len(active) > 0 {
		// Canceled, then asked again: a canceled Eviction is final, so it makes way for a new one.
		d.Delete = append(d.Delete, current)
		return
	}
	if wantMeta := withMeta(current, all, pod); wantMeta != nil {
		d.Meta = append(d.Meta, wantMeta)
	}
	want := current.DeepCopy()
	d.progress(want, obs, pod, all, active, now)
	if !equality.Semantic.DeepEqual(want.Status, current.Status) {
		d.Status = append(d.Status, want)
	}
	// Condition synchronization: every request of the target carries the Eviction's Failed and
	// TargetEvicted conditions.
	var conds []metav1.Condition
	for _, t := range []lifecyclev1alpha1.EvictionConditionType{lifecyclev1alpha1.EvictionConditionFailed, lifecyclev1alpha1.EvictionConditionTargetEvicted} {
		if c := meta.FindStatusCondition(want.Status.Conditions, string(t)); c != nil {
			conds = append(conds, *c)
		}
	}
	for _, r := range all {
		d.requestConditions(r, now, conds...)
	}
}

// collectedByOwners reports whether the garbage collector deletes the Eviction once its target
// pod of that UID is deleted: it has owners, and every one is a request of reqs (the requests of
// that target) that goes with the pod (collectedWith), or one already gone.
func collectedByOwners(e *lifecyclev1alpha1.Eviction, reqs []*lifecyclev1alpha1.EvictionRequest, uid types.UID) bool {
	if len(e.OwnerReferences) == 0 {
		return false
	}
	for _, o := range e.OwnerReferences {
		i := slices.IndexFunc(reqs, func(r *lifecyclev1alpha1.EvictionRequest) bool { return r.UID == o.UID })
		if i >= 0 && !collectedWith(reqs[i], uid) {
			return false
		}
	}
	return true
}

// targetGone reports whether the pod is gone or terminal, with the reason of TargetEvicted.
func targetGone(pod *corev1.Pod) (bool, lifecyclev1alpha1.EvictionConditionReason) {
	switch {
	case pod == nil:
		return true, lifecyclev1alpha1.EvictionConditionReasonPodDeleted
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return true, lifecyclev1alpha1.EvictionConditionReasonPodTerminal
	}
	return false, ""
}

// wantsEviction: the request asks for the eviction. One being deleted (a blocking finalizer)
// counts as withdrawn, as the KEP says.
func wantsEviction(r *lifecyclev1alpha1.EvictionRequest) bool {
	return r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction && r.DeletionTimestamp == nil
}

// newEviction is the Eviction of the pod: named pod-<n>-<pod name> with the first n not taken by
// an observed Eviction, labelled with its requesters and responders, owned by its requests.
func newEviction(obs Observation, pod *corev1.Pod, reqs []*lifecyclev1alpha1.EvictionRequest) *lifecyclev1alpha1.Eviction {
	taken := map[string]bool{}
	for _, e := range obs.Evictions {
		taken[e.Name] = true
	}
	var name string
	for n := 1; ; n++ {
		name = "pod-" + strconv.Itoa(n) + "-" + pod.Name
		if len(name) > maxNameLength {
			name = strings.TrimRight(name[:maxNameLength], "-.")
		}
		if !taken[name] {
			break
		}
	}
	e := &lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name, Labels: labels(reqs, pod)},
		Spec: lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{
			Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID},
		}},
	}
	// The creator's mark: the controller's own from now on (Ours).
	e.Labels[evictionrequest.ControllerLabel] = obs.Controller
	e.OwnerReferences = owners(reqs)
	return e
}

// withMeta is the Eviction with the ownerReferences and labels its requests and pod want; nil
// when it has them. Labels of others are kept.
func withMeta(e *lifecyclev1alpha1.Eviction, reqs []*lifecyclev1alpha1.EvictionRequest, pod *corev1.Pod) *lifecyclev1alpha1.Eviction {
	refs := owners(reqs)
	lbls := labels(reqs, pod)
	changed := !equality.Semantic.DeepEqual(refs, e.OwnerReferences)
	for k, v := range lbls {
		changed = changed || e.Labels[k] != v
	}
	if !changed {
		return nil
	}
	out := e.DeepCopy()
	out.OwnerReferences = refs
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range lbls {
		out.Labels[k] = v
	}
	return out
}

// owners are the ownerReferences to the requests (so that the garbage collector collects the
// Eviction with the last of them).
func owners(reqs []*lifecyclev1alpha1.EvictionRequest) []metav1.OwnerReference {
	var refs []metav1.OwnerReference
	for _, r := range reqs {
		refs = append(refs, metav1.OwnerReference{
			APIVersion: lifecyclev1alpha1.SchemeGroupVersion.String(), Kind: "EvictionRequest", Name: r.Name, UID: r.UID,
		})
	}
	slices.SortFunc(refs, func(a, b metav1.OwnerReference) int { return strings.Compare(a.Name, b.Name) })
	return refs
}

// labels names the requesters and responders as label keys (KEP-4563 "Label Generation").
func labels(reqs []*lifecyclev1alpha1.EvictionRequest, pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, r := range reqs {
		out[r.Spec.Requester] = string(lifecyclev1alpha1.EvictionParticipantRoleRequester)
	}
	for _, t := range Responders(pod) {
		if out[t.Name] == string(lifecyclev1alpha1.EvictionParticipantRoleRequester) {
			out[t.Name] = string(lifecyclev1alpha1.EvictionParticipantRoleRequesterResponder)
		} else {
			out[t.Name] = string(lifecyclev1alpha1.EvictionParticipantRoleResponder)
		}
	}
	return out
}

// Responders are the pod's target responders in the order they are asked: by priority, highest
// first, ties broken by the responder's domain compared from its top label down, then the key;
// the imperative evictor last unless the pod names it.
func Responders(pod *corev1.Pod) []lifecyclev1alpha1.TargetResponder {
	var out []lifecyclev1alpha1.TargetResponder
	imperative := false
	for _, r := range pod.Spec.EvictionResponders {
		out = append(out, lifecyclev1alpha1.TargetResponder{Name: r.Name, Priority: ptr.To(ptr.Deref(r.Priority, 0)), State: lifecyclev1alpha1.ResponderStateInactive})
		imperative = imperative || r.Name == evictionrequest.ImperativeEvictor
	}
	if !imperative {
		out = append(out, lifecyclev1alpha1.TargetResponder{Name: evictionrequest.ImperativeEvictor, Priority: ptr.To(evictionrequest.ImperativeEvictorPriority), State: lifecyclev1alpha1.ResponderStateInactive})
	}
	slices.SortStableFunc(out, func(a, b lifecyclev1alpha1.TargetResponder) int {
		if pa, pb := *a.Priority, *b.Priority; pa != pb {
			return int(pb) - int(pa)
		}
		return compareDomains(a.Name, b.Name)
	})
	return out
}

// compareDomains orders "sub.example.com/key" names by their domain from the top label down
// (com, example, sub), then by key.
func compareDomains(a, b string) int {
	split := func(s string) ([]string, string) {
		domain, key, _ := strings.Cut(s, "/")
		labels := strings.Split(domain, ".")
		slices.Reverse(labels)
		return labels, key
	}
	da, ka := split(a)
	db, kb := split(b)
	if c := slices.Compare(da, db); c != 0 {
		return c
	}
	return strings.Compare(ka, kb)
}

// progress moves the Eviction's status on: requesters, responders (initialised once), the active
// responder (completed, interrupted past its heartbeat deadline, canceled) and the conditions.
func (d *Decision) progress(e *lifecyclev1alpha1.Eviction, obs Observation, pod *corev1.Pod, reqs, active []*lifecyclev1alpha1.EvictionRequest, now time.Time) {
	st := &e.Status
	st.ObservedGeneration = ptr.To(max(e.Generation, 1))
	st.Requesters = requesters(st.Requesters, reqs)
	if len(st.TargetResponders) == 0 {
		st.TargetResponders = Responders(pod)
	}
	if len(st.Responders) == 0 {
		for _, t := range st.TargetResponders {
			st.Responders = append(st.Responders, lifecyclev1alpha1.ResponderStatus{Name: t.Name})
		}
	}
	if final(st) {
		return
	}
	if meta.FindStatusCondition(st.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)) == nil {
		for _, t := range []lifecyclev1alpha1.EvictionConditionType{lifecyclev1alpha1.EvictionConditionFailed, lifecyclev1alpha1.EvictionConditionTargetEvicted} {
			c := condition(t, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction, "")
			c.LastTransitionTime, c.ObservedGeneration = metav1.NewTime(now), *st.ObservedGeneration
			meta.SetStatusCondition(&st.Conditions, c)
		}
	}

	if len(active) == 0 {
		// Every requester withdrew: the eviction is canceled; the active responder learns it.
		for i := range st.TargetResponders {
			if st.TargetResponders[i].State == lifecyclev1alpha1.ResponderStateActive {
				st.TargetResponders[i].State = lifecyclev1alpha1.ResponderStateCanceled
				d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderCanceled, Responder: st.TargetResponders[i].Name})
			}
		}
		d.fail(e, lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters, now)
		return
	}

	for {
		i := slices.IndexFunc(st.TargetResponders, func(t lifecyclev1alpha1.TargetResponder) bool {
			return t.State == lifecyclev1alpha1.ResponderStateActive
		})
		if i >= 0 {
			t := &st.TargetResponders[i]
			rs := responderStatus(st, t.Name)
			if rs.CompletionTime != nil {
				t.State = lifecyclev1alpha1.ResponderStateCompleted
				d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderCompleted, Responder: t.Name, ResponderMessage: ptr.Deref(rs.Message, "")})
				continue
			}
			last := latest(rs.StartTime, rs.HeartbeatTime)
			if left := last.Add(obs.HeartbeatDeadline).Sub(now); left <= 0 {
				t.State = lifecyclev1alpha1.ResponderStateInterrupted
				d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderInterrupted, Responder: t.Name, HeartbeatDeadline: obs.HeartbeatDeadline})
				continue
			} else {
				d.after(left)
			}
			if t.Name == evictionrequest.ImperativeEvictor {
				d.imperative(e, rs, obs, pod, active, now)
			}
			return
		}
		next := slices.IndexFunc(st.TargetResponders, func(t lifecyclev1alpha1.TargetResponder) bool {
			return t.State == lifecyclev1alpha1.ResponderStateInactive
		})
		if next < 0 {
			d.fail(e, lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder, now)
			return
		}
		t := &st.TargetResponders[next]
		t.State = lifecyclev1alpha1.ResponderStateActive
		rs := responderStatus(st, t.Name)
		if rs.StartTime == nil {
			rs.StartTime = ptr.To(metav1.NewTime(now))
		}
		d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderActive, Responder: t.Name})
	}
}

// imperative is the imperative evictor's part while it is active: evict the pod (unless it is
// terminating, or backing off after a refusal and its budgets have not changed to allow it), and
// heartbeat with what it met. Mirror and DaemonSet pods are not evicted through the API: the
// responder completes without evicting. A pod only nodemaint's drain asks for is held (see
// evictionrequest.HeldForDrain): the drain evicts it itself, when and if its maintenances allow.
func (d *Decision) imperative(e *lifecyclev1alpha1.Eviction, rs *lifecyclev1alpha1.ResponderStatus, obs Observation, pod *corev1.Pod, active []*lifecyclev1alpha1.EvictionRequest, now time.Time) {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror || ownedByDaemonSet(pod) || obs.Protected != "" {
		rs.CompletionTime = ptr.To(metav1.NewTime(now))
		rs.Message = ptr.To(imperativeMessage(unsupported, ""))
		if obs.Protected != "" {
			rs.Message = ptr.To(imperativeMessage(protected, obs.Protected))
		}
		return
	}
	step, detail := evicting, ""
	if obs.EvictMessage != "" {
		step, detail = backingOff, obs.EvictMessage
	}
	switch {
	case pod.DeletionTimestamp != nil || obs.Evicted:
		step = terminating
	case onlyDrain(active):
		step = heldForDrain
	case obs.EvictNotBefore.After(now) && !retryNow(obs, pod):
		d.after(obs.EvictNotBefore.Sub(now))
	case heldByBudgets(obs, pod):
		// A change of the budgets brings the next decision.
	default:
		d.Evict = e
	}
	msg := imperativeMessage(step, detail)
	if rs.Message == nil || *rs.Message != msg {
		rs.Message = ptr.To(msg)
		rs.HeartbeatTime = ptr.To(metav1.NewTime(now))
	} else if rs.HeartbeatTime == nil || now.Sub(rs.HeartbeatTime.Time) >= obs.HeartbeatDeadline/4 {
		// Heartbeat well inside the deadline, but not more often than needed.
		rs.HeartbeatTime = ptr.To(metav1.NewTime(now))
	}
	if rs.HeartbeatTime != nil {
		d.after(rs.HeartbeatTime.Add(obs.HeartbeatDeadline / 4).Sub(now))
	}
}

// onlyDrain reports whether every request that asks for the pod's eviction is nodemaint's drain's.
func onlyDrain(active []*lifecyclev1alpha1.EvictionRequest) bool {
	for _, r := range active {
		if r.Spec.Requester != evictionrequest.Requester {
			return false
		}
	}
	return len(active) > 0
}

func ownedByDaemonSet(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// fail ends the eviction: Failed=True with reason, TargetEvicted stays False; an Event of the
// same reason reports it.
func (d *Decision) fail(e *lifecyclev1alpha1.Eviction, reason lifecyclev1alpha1.EvictionConditionReason, now time.Time) {
	c := condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionTrue, reason, "")
	c.LastTransitionTime, c.ObservedGeneration = metav1.NewTime(now), *e.Status.ObservedGeneration
	meta.SetStatusCondition(&e.Status.Conditions, c)
	d.Events = append(d.Events, Event{Eviction: e.Name, Reason: EventReason(reason)})
}

// final: the Eviction's conditions are final once one is True.
func final(st *lifecyclev1alpha1.EvictionStatus) bool {
	return meta.IsStatusConditionTrue(st.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)) ||
		meta.IsStatusConditionTrue(st.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted))
}

// requesters lists every request's requester and intent; requesters no longer present stay
// listed as withdrawn.
func requesters(had []lifecyclev1alpha1.Requester, reqs []*lifecyclev1alpha1.EvictionRequest) []lifecyclev1alpha1.Requester {
	byName := map[string]lifecyclev1alpha1.RequesterIntent{}
	for _, r := range had {
		byName[r.Name] = lifecyclev1alpha1.RequesterIntentWithdrawn
	}
	for _, r := range reqs {
		intent := lifecyclev1alpha1.RequesterIntentWithdrawn
		if wantsEviction(r) {
			intent = lifecyclev1alpha1.RequesterIntentEviction
		}
		if byName[r.Spec.Requester] != lifecyclev1alpha1.RequesterIntentEviction {
			byName[r.Spec.Requester] = intent
		}
	}
	out := make([]lifecyclev1alpha1.Requester, 0, len(byName))
	for name, intent := range byName {
		out = append(out, lifecyclev1alpha1.Requester{Name: name, Intent: intent})
	}
	slices.SortFunc(out, func(a, b lifecyclev1alpha1.Requester) int { return strings.Compare(a.Name, b.Name) })
	// The API holds 100: withdrawn requesters are dropped first.
	if len(out) > 100 {
		out = slices.DeleteFunc(out, func(r lifecyclev1alpha1.Requester) bool {
			return r.Intent == lifecyclev1alpha1.RequesterIntentWithdrawn
		})
		out = out[:min(len(out), 100)]
	}
	return out
}

// responderStatus is the named responder's status, added when missing.
func responderStatus(st *lifecyclev1alpha1.EvictionStatus, name string) *lifecyclev1alpha1.ResponderStatus {
	for i := range st.Responders {
		if st.Responders[i].Name == name {
			return &st.Responders[i]
		}
	}
	st.Responders = append(st.Responders, lifecyclev1alpha1.ResponderStatus{Name: name})
	return &st.Responders[len(st.Responders)-1]
}

func latest(ts ...*metav1.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t != nil && t.After(out) {
			out = t.Time
		}
	}
	return out
}

// condition is a condition of the type, status and reason, with its message (conditionMessage);
// pod names the target.
func condition(t lifecyclev1alpha1.EvictionConditionType, status metav1.ConditionStatus, reason lifecyclev1alpha1.EvictionConditionReason, pod string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: status, Reason: string(reason), Message: conditionMessage(reason, pod)}
}

// collectedWith reports whether the request goes with the target pod of that UID: it is owned by
// it (nodemaint's requests are, evictionrequest.PodOwner), or already being deleted.
func collectedWith(r *lifecyclev1alpha1.EvictionRequest, uid types.UID) bool {
	if r.DeletionTimestamp != nil {
		return true
	}
	return slices.ContainsFunc(r.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.UID == uid && o.Kind == "Pod" && o.APIVersion == "v1"
	})
}

// requestConditions sets the conditions on the request's status, recording it in
// RequestStatus when that changes it. Only a meaningful change is written: a condition that
// becomes True, or one the request carries that changes. The Eviction's first conditions
// (Failed and TargetEvicted False, AwaitingEviction) say nothing a request without conditions
// does not: written to every request as its Eviction starts, they were a write a pod on the way
// to its responder's turn.
func (d *Decision) requestConditions(r *lifecyclev1alpha1.EvictionRequest, now time.Time, conds ...metav1.Condition) {
	want := r.DeepCopy()
	want.Status.ObservedGeneration = ptr.To(max(r.Generation, 1))
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue && meta.FindStatusCondition(r.Status.Conditions, c.Type) == nil {
			continue
		}
		c.ObservedGeneration = *want.Status.ObservedGeneration
		c.LastTransitionTime = metav1.NewTime(now)
		meta.SetStatusCondition(&want.Status.Conditions, c)
	}
	if !equality.Semantic.DeepEqual(want.Status.Conditions, r.Status.Conditions) {
		d.RequestStatus = append(d.RequestStatus, want)
	}
}

// after keeps the earliest time the decision must be made again.
func (d *Decision) after(wait time.Duration) {
	if wait > 0 && (d.RecheckAfter == 0 || wait < d.RecheckAfter) {
		d.RecheckAfter = wait
	}
}
