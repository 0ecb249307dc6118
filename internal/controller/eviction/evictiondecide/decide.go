package evictiondecide

import (
	"regexp"
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

	"github.com/nodemaint/nodemaint/internal/recheck"
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
	// EvictAttempts counts the imperative evictor's refused evictions of the pod in a row.
	EvictAttempts int
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
	// EndedAt is when the controller first saw each target (by UID) terminal or gone: the active
	// responder has GracefulCompletionDelay from then to report its completion before it is
	// interrupted. A target missing here ended now.
	EndedAt map[types.UID]time.Time
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
	// Meta are Evictions whose ownerReferences and labels change (a request came): the object
	// as wanted.
	Meta []*lifecyclev1alpha1.Eviction
	// Delete are Evictions to delete: no EvictionRequest names their target any more, or another
	// controller's older Eviction answers for their pod.
	Delete []*lifecyclev1alpha1.Eviction
	// Evict: the imperative evictor is the active responder of Eviction (in Status, or as
	// observed) and calls the pod's eviction subresource now.
	Evict *lifecyclev1alpha1.Eviction
	// Events are what the decision changes, for Events on the Evictions.
	Events []Event
	// RecheckAfter is when the decision may change by itself (a heartbeat deadline, the grace of
	// an ended target's responder or the imperative evictor's back-off runs out); zero: only on a
	// change.
	RecheckAfter time.Duration
	// StandAside, when set, says why the controller leaves the live pod to another Eviction
	// controller (standAsideMessage): nothing of the pod is written but the collection of the
	// controller's own Evictions.
	StandAside string
}

// YieldRecheck is how often the decision about a pod left to another controller that answers in
// the cluster (Yield), without an Eviction of its own, is made again.
const YieldRecheck = time.Minute

// GracefulCompletionDelay is how long the active responder of a target that terminated or was
// deleted has to report its completion before it is interrupted (upstream's controller's).
const GracefulCompletionDelay = 5 * time.Second

// MaxNameLength bounds an Eviction's name.
const maxNameLength = 253

// Decide decides, at now, what the Eviction controller does about the observed target, as
// upstream's evictionrequest-controller does about each of its Evictions and EvictionRequests:
// per target UID, the progress of its Evictions, their metadata, the conditions of its requests,
// and a new Eviction when a request asks and none is under way. It does not change the
// observation.
func Decide(obs Observation, now time.Time) Decision {
	if d, ok := handOver(obs); ok {
		return d
	}
	var d Decision
	pod := obs.Pod
	var live types.UID
	if pod != nil {
		live = pod.UID
	}
	all, active := requestsByTarget(obs.Requests)
	own, others := splitEvictions(obs.Evictions, obs.Controller)
	byTarget := map[types.UID][]*lifecyclev1alpha1.Eviction{}
	for i := range own {
		e := &own[i]
		if e.DeletionTimestamp == nil && e.Spec.Target.Pod != nil {
			byTarget[e.Spec.Target.Pod.UID] = append(byTarget[e.Spec.Target.Pod.UID], e)
		}
	}
	if live != "" {
		current, _ := relevant(byTarget[live])
		if current != nil && completed(current) {
			current = nil
		}
		d.standAside(obs, current, others[live])
		if current == nil && d.StandAside == "" {
			d.awaitInTree(obs, now)
		}
	}
	uids := slices.Collect(func(yield func(types.UID) bool) {
		for uid := range all {
			if !yield(uid) {
				return
			}
		}
		for uid := range byTarget {
			if all[uid] == nil && !yield(uid) {
				return
			}
		}
	})
	slices.Sort(uids)
	for _, uid := range uids {
		switch {
		case uid == live && d.StandAside != "":
			// Left to the other controller: only the collection standAside decided.
			continue
		case uid != live && others[uid] != nil:
			// The requests of a gone pod learn of it from the controller whose Eviction named it.
			continue
		case obs.Yield != "" && len(byTarget[uid]) == 0:
			// Another controller answers in the cluster: this one writes only where an Eviction of
			// its own names the target.
			continue
		}
		d.target(obs, uid, all[uid], active[uid], byTarget[uid], now)
	}
	return d
}

// target decides about the Evictions and requests of the target pod of that UID: reqs name it
// (active: those that ask for its eviction), evs are the controller's own Evictions of it.
func (d *Decision) target(obs Observation, uid types.UID, reqs, active []*lifecyclev1alpha1.EvictionRequest, evs []*lifecyclev1alpha1.Eviction, now time.Time) {
	pod := obs.Pod
	if pod != nil && pod.UID != uid {
		pod = nil
	}
	if len(reqs) == 0 {
		// No request names the target any more: its Evictions are collected, by the garbage
		// collector where their owners went with a deleted pod.
		for _, e := range evs {
			if pod != nil || !collectedByOwners(e, nil, uid) {
				d.Delete = append(d.Delete, e)
			}
		}
		return
	}
	if pod == nil && !slices.ContainsFunc(reqs, func(r *lifecyclev1alpha1.EvictionRequest) bool { return !collectedWith(r, uid) }) {
		// The pod is deleted and its requests go with it (they are its own, or being deleted),
		// and the garbage collector takes their Evictions with them: a status written now would
		// be written for nobody.
		return
	}
	wanted := make([]*lifecyclev1alpha1.Eviction, 0, len(evs))
	for _, e := range evs {
		want := e.DeepCopy()
		switch {
		case completed(e):
		case duplicate(e, evs):
			d.invalid(want, invalidMessage(invalidDuplicate, ""), now)
		case pod != nil && pod.Spec.SchedulingGroup != nil:
			d.invalid(want, invalidMessage(invalidSchedulingGroup, ""), now)
		default:
			d.progress(want, obs, pod, reqs, active, now)
		}
		if !equality.Semantic.DeepEqual(want.Status, e.Status) {
			d.Status = append(d.Status, want)
		}
		wanted = append(wanted, want)
		if m := withMeta(e, reqs, pod); m != nil {
			d.Meta = append(d.Meta, m)
		}
	}
	invalid := validate(obs.Pod, uid, len(evs) > 0)
	rel, create := relevant(wanted)
	// A new Eviction once the observed ones say none is under way: not in the decision that ends
	// one (its status is written first, and the decision on the created Eviction is made from the
	// observed ones).
	_, ended := relevant(evs)
	if invalid == "" && pod != nil && len(active) > 0 && create && ended && !declinedByUs(rel) && !unread(pod, reqs) {
		d.Create = newEviction(obs, pod, reqs)
		// Its requests learn its conditions once its status is written (the next decision).
		return
	}
	for _, r := range reqs {
		if pod == nil && collectedWith(r, uid) {
			continue
		}
		d.requestStatus(r, rel, invalid, now)
	}
}

// validate says why a request for the target of that UID is invalid ("": it is not): the pod is
// not found or has another UID, where no Eviction of the target exists (one that does carries on
// to its end), or it is in a scheduling group.
func validate(pod *corev1.Pod, uid types.UID, evictions bool) string {
	switch {
	case !evictions && pod == nil:
		return invalidMessage(invalidNotFound, "")
	case !evictions && pod.UID != uid:
		return invalidMessage(invalidUIDMismatch, "expected "+string(uid)+", got "+string(pod.UID))
	case pod != nil && pod.UID == uid && pod.Spec.SchedulingGroup != nil:
		return invalidMessage(invalidSchedulingGroup, "")
	}
	return ""
}

// relevant is the Eviction of a target its requests follow: the one that evicted it (the latest),
// else the oldest under way, else the latest that failed; create says no Eviction is under way or
// succeeded, so that a request asking for the eviction gets a new one.
func relevant(evs []*lifecyclev1alpha1.Eviction) (rel *lifecyclev1alpha1.Eviction, create bool) {
	var active, succeeded, failed *lifecyclev1alpha1.Eviction
	transition := func(e *lifecyclev1alpha1.Eviction, t lifecyclev1alpha1.EvictionConditionType) time.Time {
		if c := meta.FindStatusCondition(e.Status.Conditions, string(t)); c != nil {
			return c.LastTransitionTime.Time
		}
		return time.Time{}
	}
	for _, e := range evs {
		switch {
		case meta.IsStatusConditionTrue(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)):
			if succeeded == nil || transition(succeeded, lifecyclev1alpha1.EvictionConditionTargetEvicted).Before(transition(e, lifecyclev1alpha1.EvictionConditionTargetEvicted)) {
				succeeded = e
			}
		case meta.IsStatusConditionTrue(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)):
			if failed == nil || !transition(e, lifecyclev1alpha1.EvictionConditionFailed).Before(transition(failed, lifecyclev1alpha1.EvictionConditionFailed)) {
				failed = e
			}
		default:
			if active == nil || older(e, active) {
				active = e
			}
		}
	}
	switch {
	case succeeded != nil:
		return succeeded, false
	case active != nil:
		return active, false
	}
	return failed, true
}

// duplicate: another Eviction of the target than e is the one under way (a create raced a stale
// cache): e is invalid.
func duplicate(e *lifecyclev1alpha1.Eviction, evs []*lifecyclev1alpha1.Eviction) bool {
	rel, _ := relevant(evs)
	return rel != nil && !completed(rel) && rel.UID != e.UID
}

// completed: one of the Eviction's conditions is True; it is final.
func completed(e *lifecyclev1alpha1.Eviction) bool {
	return final(&e.Status)
}

// declinedByUs: the failed Eviction ended with NoFurtherResponder after nodemaint's imperative
// evictor completed without evicting the pod (a DaemonSet or mirror pod, nodemaint's own): a new
// Eviction would end the same way at once, again and again; the request keeps the failure.
func declinedByUs(e *lifecyclev1alpha1.Eviction) bool {
	if e == nil {
		return false
	}
	c := meta.FindStatusCondition(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed))
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder) {
		return false
	}
	for _, r := range e.Status.Responders {
		if r.Name == evictionrequest.ImperativeEvictor && r.CompletionTime != nil && notEvicted(ptr.Deref(r.Message, "")) {
			return true
		}
	}
	return false
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

// standAside decides whether the controller leaves the live pod to another Eviction controller:
// while another's Eviction names it (other), the controller writes nothing for the pod; its own
// Eviction of the pod under way (current), if younger, is collected (of two nodemaint
// installations' that raced, the older stays, the same in both), and if older, waits for the
// other to collect its own. Without an Eviction of its own under way, it also stands aside while
// another controller answers in the cluster (obs.Yield).
func (d *Decision) standAside(obs Observation, current, other *lifecyclev1alpha1.Eviction) {
	switch {
	case other != nil:
		if current != nil && older(other, current) {
			d.Delete = append(d.Delete, current)
		}
		d.StandAside = standAsideMessage(other.Name, "")
	case current == nil && obs.Yield != "":
		d.StandAside = standAsideMessage("", obs.Yield)
		// Looked at again, in case the other controller went away without answering.
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, YieldRecheck)
	}
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

// invalid ends the Eviction as invalid (EvictionInvalid, with why).
func (d *Decision) invalid(e *lifecyclev1alpha1.Eviction, message string, now time.Time) {
	e.Status.ObservedGeneration = ptr.To(max(e.Generation, 1))
	setConditions(&e.Status.Conditions, now, *e.Status.ObservedGeneration,
		condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionTrue, lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid, message),
		condition(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonEvictionFailed, ""))
}

// requestStatus writes the request's status: its observed generation, and the conditions of its
// target's relevant Eviction (rel), or why it is invalid, or that it waits for an Eviction. A
// request whose conditions are final (its target evicted, or invalid) keeps them: only a new
// generation is observed.
func (d *Decision) requestStatus(r *lifecyclev1alpha1.EvictionRequest, rel *lifecyclev1alpha1.Eviction, invalid string, now time.Time) {
	gen := max(r.Generation, 1)
	if requestFinal(r) && ptr.Deref(r.Status.ObservedGeneration, 0) == gen {
		return
	}
	var conds []metav1.Condition
	switch {
	case invalid != "":
		conds = []metav1.Condition{
			condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionTrue, lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid, invalid),
			condition(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonEvictionFailed, ""),
		}
	default:
		for _, t := range []lifecyclev1alpha1.EvictionConditionType{lifecyclev1alpha1.EvictionConditionFailed, lifecyclev1alpha1.EvictionConditionTargetEvicted} {
			var c *metav1.Condition
			if rel != nil {
				c = meta.FindStatusCondition(rel.Status.Conditions, string(t))
			}
			if c == nil {
				conds = append(conds, condition(t, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction, waitingForEviction))
				continue
			}
			conds = append(conds, condition(t, c.Status, lifecyclev1alpha1.EvictionConditionReason(c.Reason), c.Message))
		}
	}
	want := r.DeepCopy()
	want.Status.ObservedGeneration = ptr.To(gen)
	setConditions(&want.Status.Conditions, now, gen, conds...)
	if !equality.Semantic.DeepEqual(want.Status, r.Status) {
		d.RequestStatus = append(d.RequestStatus, want)
	}
}

// requestFinal: the request's target was evicted, or the request is invalid.
func requestFinal(r *lifecyclev1alpha1.EvictionRequest) bool {
	if meta.IsStatusConditionTrue(r.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) {
		return true
	}
	c := meta.FindStatusCondition(r.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed))
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid)
}

// setConditions sets the conditions, each with the observed generation; a condition's transition
// time changes only with its status.
func setConditions(conds *[]metav1.Condition, now time.Time, gen int64, set ...metav1.Condition) {
	for _, c := range set {
		c.ObservedGeneration, c.LastTransitionTime = gen, metav1.NewTime(now)
		meta.SetStatusCondition(conds, c)
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

// terminal: the pod reached a terminal phase.
func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// wantsEviction: the request asks for the eviction. One being deleted (a blocking finalizer)
// counts as withdrawn, as the KEP says.
func wantsEviction(r *lifecyclev1alpha1.EvictionRequest) bool {
	return r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction && r.DeletionTimestamp == nil
}

// newEviction is the Eviction of the pod: named pod-<n>-<pod name>, n one more than the highest
// of the observed Evictions of that name (a failed one stays, and the next counts on from it),
// labelled with its requesters and responders, owned by its requests.
func newEviction(obs Observation, pod *corev1.Pod, reqs []*lifecyclev1alpha1.EvictionRequest) *lifecyclev1alpha1.Eviction {
	counter := regexp.MustCompile(`^pod-([0-9]+)-(.*)$`)
	n := 0
	for _, e := range obs.Evictions {
		m := counter.FindStringSubmatch(e.Name)
		if m == nil || (m[2] != pod.Name && (len(e.Name) < maxNameLength-1 || !strings.HasPrefix(pod.Name, m[2]))) {
			continue
		}
		if c, err := strconv.Atoi(m[1]); err == nil && c > n {
			n = c
		}
	}
	name := "pod-" + strconv.Itoa(n+1) + "-" + pod.Name
	if len(name) > maxNameLength {
		name = strings.TrimRight(name[:maxNameLength], "-.")
	}
	e := &lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name, Labels: labels(reqs, pod, nil)},
		Spec: lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{
			Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID},
		}},
	}
	// The creator's mark: the controller's own from now on (Ours).
	e.Labels[evictionrequest.ControllerLabel] = obs.Controller
	e.OwnerReferences = owners(nil, reqs)
	return e
}

// withMeta is the Eviction with the ownerReferences and labels its requests and pod want; nil
// when it has them. Labels of others are kept, and so are its owners: a request's reference is
// added, never removed (the garbage collector collects the Eviction with the last of them).
func withMeta(e *lifecyclev1alpha1.Eviction, reqs []*lifecyclev1alpha1.EvictionRequest, pod *corev1.Pod) *lifecyclev1alpha1.Eviction {
	refs := owners(e.OwnerReferences, reqs)
	lbls := labels(reqs, pod, e.Status.TargetResponders)
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

// owners are the ownerReferences had, with one to each request not being deleted added (so that
// the garbage collector collects the Eviction with the last of them), in order of name.
func owners(had []metav1.OwnerReference, reqs []*lifecyclev1alpha1.EvictionRequest) []metav1.OwnerReference {
	refs := slices.Clone(had)
	for _, r := range reqs {
		if r.DeletionTimestamp != nil || slices.ContainsFunc(refs, func(o metav1.OwnerReference) bool { return o.UID == r.UID }) {
			continue
		}
		refs = append(refs, metav1.OwnerReference{
			APIVersion: lifecyclev1alpha1.SchemeGroupVersion.String(), Kind: "EvictionRequest", Name: r.Name, UID: r.UID,
		})
	}
	slices.SortStableFunc(refs, func(a, b metav1.OwnerReference) int { return strings.Compare(a.Name, b.Name) })
	return refs
}

// labels names the requesters and responders as label keys (KEP-4563 "Label Generation"): the
// responders of the pod, or those the Eviction lists (targets) once the pod is gone.
func labels(reqs []*lifecyclev1alpha1.EvictionRequest, pod *corev1.Pod, targets []lifecyclev1alpha1.TargetResponder) map[string]string {
	out := map[string]string{}
	for _, r := range reqs {
		out[r.Spec.Requester] = string(lifecyclev1alpha1.EvictionParticipantRoleRequester)
	}
	if pod != nil {
		targets = Responders(pod)
	}
	for _, t := range targets {
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

// progress moves the Eviction's status on: requesters, responders (initialised once from the
// pod), the active responder (completed, interrupted past its heartbeat deadline or, once the
// target ended, past the grace; canceled when every requester withdrew), the next one made
// Active, and the conditions. pod is the target, nil when it is gone.
func (d *Decision) progress(e *lifecyclev1alpha1.Eviction, obs Observation, pod *corev1.Pod, reqs, active []*lifecyclev1alpha1.EvictionRequest, now time.Time) {
	st := &e.Status
	gen := max(e.Generation, 1)
	st.ObservedGeneration = ptr.To(gen)
	st.Requesters = requesters(st.Requesters, reqs)
	if len(st.TargetResponders) == 0 && pod != nil {
		st.TargetResponders = Responders(pod)
	}
	for _, t := range st.TargetResponders {
		responderStatus(st, t.Name)
	}
	gone := pod == nil
	ended := gone || terminal(pod)
	canceled := !ended && len(active) == 0
	done, waiting := false, false
	switch {
	case len(st.TargetResponders) == 0:
		done = true
	case finalState(st.TargetResponders[len(st.TargetResponders)-1].State):
		done = true
	case ended:
		waiting = d.ended(e, obs, pod, active, now)
	case canceled:
		// Every requester withdrew: the eviction is canceled; the active responder learns it.
		for i := range st.TargetResponders {
			if st.TargetResponders[i].State == lifecyclev1alpha1.ResponderStateActive {
				st.TargetResponders[i].State = lifecyclev1alpha1.ResponderStateCanceled
				d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderCanceled, Responder: st.TargetResponders[i].Name})
			}
		}
	default:
		done = d.advance(e, obs, pod, active, now)
	}
	type pair struct {
		failed, evicted metav1.Condition
	}
	var set pair
	switch {
	case gone && !waiting:
		set = pair{condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonSucceeded, ""),
			condition(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionTrue, lifecyclev1alpha1.EvictionConditionReasonPodDeleted, conditionMessage(lifecyclev1alpha1.EvictionConditionReasonPodDeleted))}
	case ended && !waiting:
		set = pair{condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonSucceeded, ""),
			condition(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionTrue, lifecyclev1alpha1.EvictionConditionReasonPodTerminal, conditionMessage(lifecyclev1alpha1.EvictionConditionReasonPodTerminal))}
	case canceled, done && !ended:
		reason := lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder
		if canceled {
			reason = lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters
		}
		set = pair{condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionTrue, reason, conditionMessage(reason)),
			condition(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonEvictionFailed, "")}
		if !meta.IsStatusConditionTrue(st.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)) {
			d.Events = append(d.Events, Event{Eviction: e.Name, Reason: EventReason(reason)})
		}
	default:
		set = pair{condition(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction, ""),
			condition(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction, "")}
	}
	setConditions(&st.Conditions, now, gen, set.failed, set.evicted)
}

// finalState: a responder in the state is done (no longer Inactive or Active).
func finalState(s lifecyclev1alpha1.ResponderStateType) bool {
	return s != lifecyclev1alpha1.ResponderStateInactive && s != lifecyclev1alpha1.ResponderStateActive
}

// ended moves the Eviction of a target that terminated or was deleted on: the active responder
// (if any) completes if it reported its completion (the imperative evictor reports it now), and is
// interrupted once the grace since the target ended ran out; no other responder is made Active.
// It reports whether the active responder's report is still awaited.
func (d *Decision) ended(e *lifecyclev1alpha1.Eviction, obs Observation, pod *corev1.Pod, active []*lifecyclev1alpha1.EvictionRequest, now time.Time) bool {
	st := &e.Status
	i := slices.IndexFunc(st.TargetResponders, func(t lifecyclev1alpha1.TargetResponder) bool {
		return t.State == lifecyclev1alpha1.ResponderStateActive
	})
	if i < 0 {
		return false
	}
	t := &st.TargetResponders[i]
	rs := responderStatus(st, t.Name)
	if t.Name == evictionrequest.ImperativeEvictor && rs.CompletionTime == nil {
		if d.imperative(e, rs, obs, pod, active, now) {
			// Its completion is written while it is Active (the API server allows a responder's
			// entry to change only then); the next decision reads it.
			return true
		}
	}
	if rs.CompletionTime != nil {
		t.State = lifecyclev1alpha1.ResponderStateCompleted
		d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderCompleted, Responder: t.Name, ResponderMessage: ptr.Deref(rs.Message, "")})
		return false
	}
	since, ok := obs.EndedAt[e.Spec.Target.Pod.UID]
	if !ok {
		since = now
	}
	if left := since.Add(GracefulCompletionDelay).Sub(now); left > 0 {
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, left)
		return true
	}
	t.State = lifecyclev1alpha1.ResponderStateInterrupted
	d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderInterrupted, Responder: t.Name, Ended: true})
	return false
}

// advance moves the responders of a live target's Eviction on: the active one completed, or
// interrupted past its heartbeat deadline, makes way for the next; the imperative evictor acts
// while it is active. It reports whether every responder is done.
func (d *Decision) advance(e *lifecyclev1alpha1.Eviction, obs Observation, pod *corev1.Pod, active []*lifecyclev1alpha1.EvictionRequest, now time.Time) bool {
	st := &e.Status
	for {
		i := slices.IndexFunc(st.TargetResponders, func(t lifecyclev1alpha1.TargetResponder) bool {
			return t.State == lifecyclev1alpha1.ResponderStateActive
		})
		if i >= 0 {
			t := &st.TargetResponders[i]
			rs := responderStatus(st, t.Name)
			if t.Name == evictionrequest.ImperativeEvictor && rs.CompletionTime == nil && d.imperative(e, rs, obs, pod, active, now) {
				// Its completion is written while it is Active; the next decision reads it.
				return false
			}
			if rs.CompletionTime != nil {
				t.State = lifecyclev1alpha1.ResponderStateCompleted
				d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderCompleted, Responder: t.Name, ResponderMessage: ptr.Deref(rs.Message, "")})
				continue
			}
			last := latest(rs.StartTime, rs.HeartbeatTime)
			if left := last.Add(obs.HeartbeatDeadline).Sub(now); left <= 0 {
				t.State = lifecyclev1alpha1.ResponderStateInterrupted
				d.Events = append(d.Events, Event{Eviction: e.Name, Reason: ResponderInterrupted, Responder: t.Name, HeartbeatDeadline: obs.HeartbeatDeadline})
				if d.Evict == e {
					d.Evict = nil
				}
				continue
			} else {
				d.RecheckAfter = recheck.Soonest(d.RecheckAfter, left)
			}
			return false
		}
		next := slices.IndexFunc(st.TargetResponders, func(t lifecyclev1alpha1.TargetResponder) bool {
			return t.State == lifecyclev1alpha1.ResponderStateInactive
		})
		if next < 0 {
			return true
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

// imperative is the imperative evictor's part while it is active, as upstream's
// imperative-eviction responder does: it completes once the pod is gone or terminal; it says the
// pod is terminating, with its deletion as the expected completion; else it evicts the pod
// (unless it backs off after a refusal and the pod's budgets have not changed to allow it), and
// says how the last eviction went (the refusals counted). It heartbeats with what it met. Mirror
// and DaemonSet pods are not evicted through the API: it completes without evicting them. A pod
// only nodemaint's drain asks for is held (see evictionrequest.HeldForDrain): the drain evicts it
// itself, when and if its maintenances allow. It reports whether it completed now.
func (d *Decision) imperative(e *lifecyclev1alpha1.Eviction, rs *lifecyclev1alpha1.ResponderStatus, obs Observation, pod *corev1.Pod, active []*lifecyclev1alpha1.EvictionRequest, now time.Time) bool {
	name := e.Spec.Target.Pod.Name
	complete := func(msg string) bool {
		rs.CompletionTime, rs.ExpectedCompletionTime = ptr.To(metav1.NewTime(now)), ptr.To(metav1.NewTime(now))
		rs.Message, rs.HeartbeatTime = ptr.To(msg), ptr.To(metav1.NewTime(now))
		return true
	}
	switch {
	case pod == nil:
		return complete(imperativeMessage(podGone, name, "", 0))
	case terminal(pod) && pod.DeletionTimestamp != nil:
		return complete(imperativeMessage(podDeletedTerminal, name, string(pod.Status.Phase), 0))
	case terminal(pod):
		return complete(imperativeMessage(podTerminal, name, string(pod.Status.Phase), 0))
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror || ownedByDaemonSet(pod) || obs.Protected != "" {
		msg := imperativeMessage(unsupported, name, "", 0)
		if obs.Protected != "" {
			msg = imperativeMessage(protected, name, obs.Protected, 0)
		}
		return complete(msg)
	}
	prev := ptr.Deref(rs.Message, "")
	var msg string
	switch {
	case pod.DeletionTimestamp != nil:
		step := terminating
		if obs.Evicted || evictedByUs(prev) {
			step = terminatingEvicted
		}
		msg = imperativeMessage(step, name, "", 0)
		expected := pod.DeletionTimestamp.Time
		if expected.Before(now) {
			expected = now
		}
		if rs.ExpectedCompletionTime == nil || !rs.ExpectedCompletionTime.Time.Equal(expected) {
			rs.ExpectedCompletionTime = ptr.To(metav1.NewTime(expected))
			rs.HeartbeatTime = ptr.To(metav1.NewTime(now))
		}
	case obs.Evicted:
		msg = imperativeMessage(evicted, name, "", 0)
	case onlyDrain(active):
		msg = imperativeMessage(heldForDrain, name, "", 0)
	default:
		msg = imperativeMessage(evicting, name, "", 0)
		if obs.EvictMessage != "" {
			msg = imperativeMessage(refused, name, obs.EvictMessage, max(obs.EvictAttempts, 1))
		}
		switch {
		case obs.EvictNotBefore.After(now) && !retryNow(obs, pod):
			d.RecheckAfter = recheck.Soonest(d.RecheckAfter, obs.EvictNotBefore.Sub(now))
		case heldByBudgets(obs, pod):
			// A change of the budgets brings the next decision.
		default:
			d.Evict = e
		}
	}
	if rs.Message == nil || *rs.Message != msg {
		rs.Message = ptr.To(msg)
		rs.HeartbeatTime = ptr.To(metav1.NewTime(now))
	} else if rs.HeartbeatTime == nil || now.Sub(rs.HeartbeatTime.Time) >= obs.HeartbeatDeadline/4 {
		// Heartbeat well inside the deadline, but not more often than needed.
		rs.HeartbeatTime = ptr.To(metav1.NewTime(now))
	}
	if rs.HeartbeatTime != nil {
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, rs.HeartbeatTime.Add(obs.HeartbeatDeadline/4).Sub(now))
	}
	return false
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

// condition is a condition of the type, status and reason, with its message.
func condition(t lifecyclev1alpha1.EvictionConditionType, status metav1.ConditionStatus, reason lifecyclev1alpha1.EvictionConditionReason, message string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: status, Reason: string(reason), Message: message}
}

// unread reports whether a new Eviction of the pod would be read by nobody: the pod is
// terminating and every request of it goes with it. Its own Eviction, collected with its
// requests once the pod was deleted, may be seen gone before the pod is (their watches are
// apart): without this, a second Eviction would be made for a pod already gone.
func unread(pod *corev1.Pod, reqs []*lifecyclev1alpha1.EvictionRequest) bool {
	return pod.DeletionTimestamp != nil && !slices.ContainsFunc(reqs, func(r *lifecyclev1alpha1.EvictionRequest) bool {
		return !collectedWith(r, pod.UID)
	})
}

// collectedWith reports whether the request goes with the target pod of that UID: it is owned by
// it (nodemaint's requests are, requester.PodOwner), or already being deleted.
func collectedWith(r *lifecyclev1alpha1.EvictionRequest, uid types.UID) bool {
	if r.DeletionTimestamp != nil {
		return true
	}
	return slices.ContainsFunc(r.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.UID == uid && o.Kind == "Pod" && o.APIVersion == "v1"
	})
}
