package requester

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// pod is a pod that names a responder of its own (Registered).
func pod(name string) *corev1.Pod {
	p := unregistered(name)
	p.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: "owner.example.com/responder", Priority: ptr.To[int32](10000)}}
	return p
}

// unregistered is a pod created before any responder was registered for it.
func unregistered(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

// TestUnregisteredPodsAskedByPodCondition: a pod with no responder of its own is the pod condition
// protocol's: WritesOf never asks it through an EvictionRequest and withdraws one left from before
// (deleted once its Eviction is over), Answer returns it as given (nodemaint's condition and the
// owner's answer on it count), and it is no pod condition left to withdraw.
func TestUnregisteredPodsAskedByPodCondition(t *testing.T) {
	a, u := pod("a"), unregistered("u")
	if !Registered(a) {
		t.Fatal("Registered: the pod with a responder is not")
	}
	if Registered(u) {
		t.Fatal("Registered: the pod without a responder is")
	}
	p := WritesOf(observedWith(), []*corev1.Pod{a, u}, []*corev1.Pod{a, u}, nil, "r", now)
	if len(p.Create) != 1 {
		t.Fatalf("want a request for the registered pod only, got %+v", p)
	}
	if got := p.Create[0].Spec.Target.Pod.UID; got != a.UID {
		t.Fatalf("request for %s; want the registered pod %s", got, a.UID)
	}

	old := *newRequest("n1", u, "r", now)
	obs := observedWith(old)
	obs.Evictions[u.UID] = &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "pod-1-u"}}
	p = WritesOf(obs, []*corev1.Pod{u}, []*corev1.Pod{u}, nil, "r", now)
	if len(p.Update) != 1 {
		t.Fatalf("a request left for an unregistered pod, its Eviction under way: want it withdrawn, got %+v", p)
	}
	if got := p.Update[0].Spec.Intent; got != lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
		t.Fatalf("a request left for an unregistered pod, its Eviction under way: intent %s; want %s", got, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
	}
	if len(p.Create)+len(p.Delete) != 0 {
		t.Fatalf("a request left for an unregistered pod, its Eviction under way: creates %+v, deletes %+v; want none", p.Create, p.Delete)
	}
	delete(obs.Evictions, u.UID)
	p = WritesOf(obs, []*corev1.Pod{u}, []*corev1.Pod{u}, nil, "r", now)
	if len(p.Delete) != 1 {
		t.Fatalf("a request left for an unregistered pod, no Eviction: want it deleted, got %+v", p)
	}
	if len(p.Create)+len(p.Update) != 0 {
		t.Fatalf("a request left for an unregistered pod, no Eviction: creates %+v, updates %+v; want none", p.Create, p.Update)
	}

	asked := u.DeepCopy()
	evacuation.SetCondition(asked, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance})
	evacuation.SetCondition(asked, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Surge"})
	if got := Answer([]*corev1.Pod{asked}, obs)[0]; got != asked {
		t.Fatalf("Answer changed an unregistered pod: %+v", got.Status.Conditions)
	}
	if left := WithPodCondition([]*corev1.Pod{asked}); len(left) != 0 {
		t.Fatalf("an unregistered pod's condition is its request, not one left: %v", left)
	}
}

func observedWith(reqs ...lifecyclev1alpha1.EvictionRequest) Observed {
	return Observed{Node: "n1", Requests: reqs, Evictions: map[types.UID]*lifecyclev1alpha1.Eviction{}}
}

func TestDecideCreatesOncePerPodAndWithdraws(t *testing.T) {
	a, b := pod("a"), pod("b")
	pods := []*corev1.Pod{a, b}
	p := WritesOf(observedWith(), pods, []*corev1.Pod{a, b}, nil, "kernel upgrade", now)
	if len(p.Create) != 2 {
		t.Fatalf("first: creates %+v; want one per pod, 2", p.Create)
	}
	if len(p.Update)+len(p.Delete) != 0 {
		t.Fatalf("first: updates %+v, deletes %+v; want none", p.Update, p.Delete)
	}
	c := p.Create[0]
	if c.Spec.Requester != names.Requester {
		t.Errorf("request's requester %q; want %q", c.Spec.Requester, names.Requester)
	}
	if c.Spec.Target.Pod.UID != a.UID {
		t.Errorf("request's target %s; want %s", c.Spec.Target.Pod.UID, a.UID)
	}
	if got := c.Labels[NodeLabel]; got != "n1" {
		t.Errorf("request's %s label %q; want n1", NodeLabel, got)
	}
	if got := c.Annotations[ReasonAnnotation]; got != "kernel upgrade" {
		t.Errorf("request's %s annotation %q; want kernel upgrade", ReasonAnnotation, got)
	}
	obs := observedWith(*p.Create[0], *p.Create[1])
	// The drain sees its request as the pod condition protocol's, and asks nothing more.
	answered := Answer(pods, obs)
	if !evacuation.RequestedBy(answered[0], evacuation.ReasonNodeMaintenance) {
		t.Fatalf("answered %+v; want requested by %s", answered[0].Status.Conditions, evacuation.ReasonNodeMaintenance)
	}
	if m := evacuation.Condition(answered[0], evacuation.Request).Message; m != "kernel upgrade" {
		t.Errorf("the request's message %q; want kernel upgrade", m)
	}
	if evacuation.Condition(pods[0], evacuation.Request) != nil {
		t.Fatal("Answer changed its input")
	}
	if p := WritesOf(obs, pods, nil, nil, "kernel upgrade", now); len(p.Create)+len(p.Update)+len(p.Delete) != 0 {
		t.Fatalf("nothing to do, got %+v", p)
	}
	// b's Eviction is under way: still asked, nothing changes; withdrawing b sets Withdrawn; a
	// has none: its request goes.
	obs.Evictions[b.UID] = &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "pod-1-b"}}
	if p := WritesOf(obs, pods, nil, nil, "kernel upgrade", now); len(p.Create)+len(p.Update)+len(p.Delete) != 0 {
		t.Fatalf("an Eviction under way, nothing to do, got %+v", p)
	}
	p = WritesOf(obs, pods, nil, []*corev1.Pod{a, b}, "kernel upgrade", now)
	if len(p.Delete) != 1 {
		t.Fatalf("withdraw: deletes %+v; want a's request", p.Delete)
	}
	if got := p.Delete[0].Spec.Target.Pod.UID; got != a.UID {
		t.Fatalf("withdraw: deletes the request for %s; want a's (%s)", got, a.UID)
	}
	if len(p.Update) != 1 {
		t.Fatalf("withdraw: updates %+v; want b's request", p.Update)
	}
	if got := p.Update[0].Spec.Intent; got != lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
		t.Fatalf("withdraw: b's request's intent %s; want %s", got, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
	}
	// Withdrawn, b's request stays until the Eviction is canceled, then goes.
	obs.Requests = []lifecyclev1alpha1.EvictionRequest{*p.Update[0]}
	if p := WritesOf(obs, pods, nil, nil, "", now); len(p.Delete)+len(p.Update)+len(p.Create) != 0 {
		t.Fatalf("withdrawn while the Eviction is under way: %+v", p)
	}
	obs.Evictions[b.UID].Status.Conditions = []metav1.Condition{{Type: string(lifecyclev1alpha1.EvictionConditionFailed), Status: metav1.ConditionTrue, Reason: string(lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters)}}
	if p := WritesOf(obs, pods, nil, nil, "", now); len(p.Delete) != 1 {
		t.Fatalf("canceled: %+v", p)
	}
	// A request whose pod is gone goes with it: the garbage collector deletes it, its pod being
	// its owner; nodemaint sends no delete of its own. One its pod does not own is deleted.
	if p := WritesOf(obs, []*corev1.Pod{a}, nil, nil, "", now); len(p.Delete)+len(p.Update)+len(p.Create)+len(p.Adopt) != 0 {
		t.Fatalf("pod gone, its request owned by it: %+v", p)
	}
	obs.Requests[0].OwnerReferences = nil
	if p := WritesOf(obs, []*corev1.Pod{a}, nil, nil, "", now); len(p.Delete) != 1 {
		t.Fatalf("pod gone, its request not owned by it: %+v", p)
	}
}

// TestRequestsOwnedByTheirPods: nodemaint's requests are owned by their target pods (the
// garbage collector removes a request with its pod, whatever became of the node), with no
// blockOwnerDeletion (no permission beyond creating the request); a request created without it
// (by an earlier version) that stays is adopted, whatever its intent, and one whose pod is gone
// is deleted, not adopted.
func TestRequestsOwnedByTheirPods(t *testing.T) {
	a, b, c := pod("a"), pod("b"), pod("c")
	pods := []*corev1.Pod{a, b, c}
	p := WritesOf(observedWith(), pods, []*corev1.Pod{a}, nil, "kernel upgrade", now)
	if len(p.Create) != 1 {
		t.Fatalf("create: %+v", p)
	}
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "a", UID: a.UID}}
	if got := p.Create[0].OwnerReferences; len(got) != 1 {
		t.Errorf("owner references %+v, want %+v", got, want)
	} else if got[0] != want[0] {
		t.Errorf("owner reference %+v, want %+v", got[0], want[0])
	}

	old := func(pod *corev1.Pod, intent lifecyclev1alpha1.EvictionRequestIntent) lifecyclev1alpha1.EvictionRequest {
		r := *newRequest("n1", pod, "kernel upgrade", now)
		r.OwnerReferences = nil
		r.Spec.Intent = intent
		return r
	}
	gone := pod("gone")
	obs := observedWith(old(a, lifecyclev1alpha1.EvictionRequestIntentEviction), old(b, lifecyclev1alpha1.EvictionRequestIntentWithdrawn),
		old(c, lifecyclev1alpha1.EvictionRequestIntentEviction), old(gone, lifecyclev1alpha1.EvictionRequestIntentEviction))
	obs.Evictions[b.UID] = &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "pod-1-b"}}
	// a asked again, b withdrawn with its Eviction under way, c asked before and still wanted:
	// all three adopted; gone's request deleted.
	p = WritesOf(obs, pods, []*corev1.Pod{a}, nil, "kernel upgrade", now)
	if len(p.Create)+len(p.Update) != 0 {
		t.Fatalf("plan creates %+v, updates %+v; want none", p.Create, p.Update)
	}
	if len(p.Delete) != 1 {
		t.Fatalf("plan deletes %+v; want gone's request", p.Delete)
	}
	if got := p.Delete[0].Spec.Target.Pod.UID; got != gone.UID {
		t.Fatalf("plan deletes the request for %s; want gone's (%s)", got, gone.UID)
	}
	if len(p.Adopt) != 3 {
		t.Fatalf("plan adopts %d requests; want 3 (a, b and c)", len(p.Adopt))
	}
	for _, r := range p.Adopt {
		if !ownedBy(r) {
			t.Errorf("adopted %s has owner references %+v; want its pod's", r.Name, r.OwnerReferences)
		}
		if len(r.OwnerReferences) != 1 {
			t.Errorf("adopted %s has %d owner references %+v; want 1", r.Name, len(r.OwnerReferences), r.OwnerReferences)
		}
	}
	// A request updated for another reason gets its owner in the same write.
	p = WritesOf(obs, pods, []*corev1.Pod{a}, nil, "another reason", now)
	if len(p.Update) != 1 {
		t.Fatalf("update: updates %+v; want one", p.Update)
	}
	if !ownedBy(p.Update[0]) {
		t.Fatalf("update: owner references %+v; want its pod's in the same write", p.Update[0].OwnerReferences)
	}
	if len(p.Adopt) != 2 {
		t.Fatalf("update: adopts %d requests; want the other 2", len(p.Adopt))
	}
	for i := range obs.Requests {
		owned(&obs.Requests[i])
	}
	// Adopted, nothing more to do; gone's request, now owned by its pod, goes with it (the
	// garbage collector's).
	if p := WritesOf(obs, pods, []*corev1.Pod{a}, nil, "kernel upgrade", now); len(p.Adopt)+len(p.Update)+len(p.Create)+len(p.Delete) != 0 {
		t.Fatalf("owned: %+v", p)
	}
}

func TestAnswerReadsTheEviction(t *testing.T) {
	a := pod("a")
	req := *newRequest("n1", a, "r", now)
	obs := observedWith(req)
	e := &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "pod-1-a"}}
	obs.Evictions[a.UID] = e
	e.Status.TargetResponders = []lifecyclev1alpha1.TargetResponder{
		{Name: "db.example.com/op", State: lifecyclev1alpha1.ResponderStateActive},
		{Name: names.ImperativeEvictor, State: lifecyclev1alpha1.ResponderStateInactive},
	}
	e.Status.Responders = []lifecyclev1alpha1.ResponderStatus{{Name: "db.example.com/op", StartTime: ptr.To(metav1.NewTime(now)),
		ExpectedCompletionTime: ptr.To(metav1.NewTime(now.Add(time.Hour))), Message: ptr.To("copying data")}}
	// The pod given has a condition of its own with room after it in its array: the answer must
	// not write into that array (the pods come from the cache, uncopied).
	a.Status.Conditions = append(make([]corev1.PodCondition, 0, 4), corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	given := a.DeepCopy()
	got := Answer([]*corev1.Pod{a}, obs)[0]
	c := evacuation.Condition(got, evacuation.Initiated)
	if !evacuation.Accepted(got) {
		t.Fatalf("accepted: %+v; want EvacuationInitiated True", c)
	}
	if want := "evacuating by db.example.com/op, expected completion 2026-01-01T13:00:00Z: copying data"; !strings.Contains(c.Message, want) {
		t.Errorf("accepted: message %q; want it to contain %q", c.Message, want)
	}
	if !equality.Semantic.DeepEqual(a, given) {
		t.Fatalf("the pod given was changed: %+v; want %+v", a.Status.Conditions, given.Status.Conditions)
	}
	if room := a.Status.Conditions[:cap(a.Status.Conditions)]; len(room[1].Type) != 0 {
		t.Fatalf("the pod given's array was written after its conditions: %+v; want nothing after them", room)
	}
	// The imperative evictor held by a budget reads as that.
	e.Status.TargetResponders[0].State = lifecyclev1alpha1.ResponderStateCompleted
	e.Status.TargetResponders[1].State = lifecyclev1alpha1.ResponderStateActive
	e.Status.Responders = append(e.Status.Responders, lifecyclev1alpha1.ResponderStatus{Name: names.ImperativeEvictor, StartTime: ptr.To(metav1.NewTime(now)),
		Message: ptr.To("Could not evict the pod, retrying with a back-off: Cannot evict pod as it would violate the pod's disruption budget.")})
	got = Answer([]*corev1.Pod{a}, obs)[0]
	c = evacuation.Condition(got, evacuation.Initiated)
	if c.Reason != nodemaintv1alpha1.BlockedReasonPodDisruptionBudget {
		t.Errorf("held by a budget: reason %q; want %s", c.Reason, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget)
	}
	if want := "evacuating by " + names.ImperativeEvictor; !strings.Contains(c.Message, want) {
		t.Errorf("held by a budget: message %q; want it to contain %q", c.Message, want)
	}
	e.Status.Conditions = []metav1.Condition{{Type: string(lifecyclev1alpha1.EvictionConditionFailed), Status: metav1.ConditionTrue, Reason: "NoFurtherResponder", Message: "none left"}}
	got = Answer([]*corev1.Pod{a}, obs)[0]
	if !evacuation.Declined(got) {
		t.Fatalf("failed Eviction must read as declined: %+v", got.Status.Conditions)
	}
	// Withdrawn: no request, no answer.
	obs.Requests[0].Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	got = Answer([]*corev1.Pod{a}, obs)[0]
	if evacuation.Requested(got) {
		t.Errorf("withdrawn: %+v; want the request gone", got.Status.Conditions)
	}
	if evacuation.Condition(got, evacuation.Initiated) != nil {
		t.Errorf("withdrawn: %+v; want the answer gone", got.Status.Conditions)
	}
}

// TestAnswerHeldForDrain: the imperative evictor holding a pod for nodemaint's drain is nobody's
// acceptance: an Eviction with no responder before it reads as not answered (the drain's response
// timeout runs, and SignalOnly never evicts), one whose responders all ended without moving it as
// declined.
func TestAnswerHeldForDrain(t *testing.T) {
	a := pod("a")
	obs := observedWith(*newRequest("n1", a, "r", now))
	e := &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "pod-1-a"}}
	obs.Evictions[a.UID] = e
	e.Status.TargetResponders = []lifecyclev1alpha1.TargetResponder{{Name: names.ImperativeEvictor, State: lifecyclev1alpha1.ResponderStateActive}}
	e.Status.Responders = []lifecyclev1alpha1.ResponderStatus{{Name: names.ImperativeEvictor, StartTime: ptr.To(metav1.NewTime(now)), Message: ptr.To(names.HeldForDrain)}}
	got := Answer([]*corev1.Pod{a}, obs)[0]
	if !evacuation.Requested(got) {
		t.Errorf("no responder before the imperative evictor: want requested, got %+v", got.Status.Conditions)
	}
	if evacuation.Condition(got, evacuation.Initiated) != nil {
		t.Errorf("no responder before the imperative evictor: want not answered, got %+v", got.Status.Conditions)
	}
	e.Status.TargetResponders = append([]lifecyclev1alpha1.TargetResponder{{Name: "db.example.com/op", State: lifecyclev1alpha1.ResponderStateCompleted}}, e.Status.TargetResponders...)
	e.Status.Responders = append(e.Status.Responders, lifecyclev1alpha1.ResponderStatus{Name: "db.example.com/op", CompletionTime: ptr.To(metav1.NewTime(now))})
	got = Answer([]*corev1.Pod{a}, obs)[0]
	if !evacuation.Declined(got) {
		t.Fatalf("its responder ended without moving it: want declined, got %+v", got.Status.Conditions)
	}
	if c := evacuation.Condition(got, evacuation.Initiated); !strings.Contains(c.Message, "db.example.com/op completed") {
		t.Fatalf("its responder ended without moving it: message %q; want it to say db.example.com/op completed", c.Message)
	}
}

// TestPlanParts: a plan splits into what is written before the node (withdrawals, deletions,
// adoptions) and what is written once it is cordoned (creations, requests asking again), and
// every write lands in exactly one part.
func TestPlanParts(t *testing.T) {
	a, b, c := pod("a"), pod("b"), pod("c")
	pods := []*corev1.Pod{a, b, c}
	first := WritesOf(observedWith(), pods, pods, nil, "kernel upgrade", now)
	obs := observedWith(*first.Create[0], *first.Create[1])
	obs.Requests[1].Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	obs.Evictions[a.UID] = &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "pod-1-a"}}
	// a's request is withdrawn while its Eviction is under way, b's asks again, c's is created.
	p := WritesOf(obs, pods, []*corev1.Pod{b, c}, []*corev1.Pod{a}, "kernel upgrade", now)
	w, r := p.Withdrawals(), p.Requests()
	if len(w.Update) != 1 {
		t.Errorf("withdrawals update %+v; want a's request", w.Update)
	} else {
		if got := w.Update[0].Spec.Target.Pod.UID; got != a.UID {
			t.Errorf("withdrawals update the request for %s; want a's (%s)", got, a.UID)
		}
		if got := w.Update[0].Spec.Intent; got != lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
			t.Errorf("withdrawals: intent %s; want %s", got, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
		}
	}
	if len(w.Create) != 0 {
		t.Errorf("withdrawals create %+v; want none", w.Create)
	}
	if len(r.Update) != 1 {
		t.Errorf("requests update %+v; want b's request", r.Update)
	} else if got := r.Update[0].Spec.Target.Pod.UID; got != b.UID {
		t.Errorf("requests update the request for %s; want b's (%s)", got, b.UID)
	}
	if len(r.Create) != 1 {
		t.Errorf("requests create %+v; want c's request", r.Create)
	} else if got := r.Create[0].Spec.Target.Pod.UID; got != c.UID {
		t.Errorf("requests create the request for %s; want c's (%s)", got, c.UID)
	}
	if len(r.Delete)+len(r.Adopt) != 0 {
		t.Errorf("requests delete %+v, adopt %+v; want none", r.Delete, r.Adopt)
	}
	if len(w.Update)+len(r.Update) != len(p.Update) {
		t.Errorf("the parts update %d and %d requests; want the plan's %d", len(w.Update), len(r.Update), len(p.Update))
	}
	if len(w.Delete) != len(p.Delete) {
		t.Errorf("the withdrawals delete %d requests; want the plan's %d", len(w.Delete), len(p.Delete))
	}
	if len(w.Adopt) != len(p.Adopt) {
		t.Errorf("the withdrawals adopt %d requests; want the plan's %d", len(w.Adopt), len(p.Adopt))
	}
}

// TestCurrentEviction: of several Evictions of one pod, the one in progress answers, whatever the
// order they are listed in; among those alike, the youngest.
func TestCurrentEviction(t *testing.T) {
	at := func(name string, age time.Duration) *lifecyclev1alpha1.Eviction {
		return &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	}
	ended := at("ended", time.Second)
	ended.Status.Conditions = []metav1.Condition{{Type: string(lifecyclev1alpha1.EvictionConditionTargetEvicted), Status: metav1.ConditionTrue}}
	deleting := at("deleting", 0)
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	live, older := at("live", time.Minute), at("older", time.Hour)
	for _, evs := range [][]*lifecyclev1alpha1.Eviction{{ended, live, deleting, older}, {older, deleting, live, ended}, {live, older}} {
		if got := Current(evs); got == nil || got.Name != "live" {
			t.Errorf("Current(%d Evictions) = %v; want live", len(evs), got)
		}
	}
	if got := Current([]*lifecyclev1alpha1.Eviction{deleting, ended}); got == nil || got.Name != "deleting" {
		t.Errorf("none in progress: got %v, want the youngest", got)
	}
	if Current(nil) != nil {
		t.Error("no Eviction: want nil")
	}
}

// TestAnswerCountsFromTheRequestsArrival: the response timeout counts from when the request
// reached the API server: its creation when that came after nodemaint decided to ask (a large
// drain's requests wait for its client's token bucket), the annotation when nodemaint asked again
// later with the same request.
func TestAnswerCountsFromTheRequestsArrival(t *testing.T) {
	a := pod("a")
	req := *newRequest("n1", a, "r", now)
	req.CreationTimestamp = metav1.NewTime(now.Add(7 * time.Second))
	got := evacuation.Condition(Answer([]*corev1.Pod{a}, observedWith(req))[0], evacuation.Request)
	if got == nil || !got.LastTransitionTime.Equal(&req.CreationTimestamp) {
		t.Fatalf("created 7s after the decision: want the request's time to be its creation, got %+v", got)
	}
	req.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	got = evacuation.Condition(Answer([]*corev1.Pod{a}, observedWith(req))[0], evacuation.Request)
	if want := metav1.NewTime(now); got == nil || !got.LastTransitionTime.Equal(&want) {
		t.Fatalf("asked again a minute after its creation: want the annotation's time, got %+v", got)
	}
}

// TestFirstAnswer: the first answer an Eviction brings to nodemaint's request, timed from the
// request's arrival; none for a change after it, none for an Eviction without an active responder.
func TestFirstAnswer(t *testing.T) {
	a := pod("a")
	req := newRequest("n1", a, "r", now)
	req.CreationTimestamp = metav1.NewTime(now.Add(2 * time.Second))
	created := &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "pod-1-a", CreationTimestamp: metav1.NewTime(now.Add(5 * time.Second))}}
	created.Status.TargetResponders = []lifecyclev1alpha1.TargetResponder{{Name: "db.example.com/op", State: lifecyclev1alpha1.ResponderStateInactive}}
	active := created.DeepCopy()
	active.Status.TargetResponders[0].State = lifecyclev1alpha1.ResponderStateActive
	active.Status.Responders = []lifecyclev1alpha1.ResponderStatus{{Name: "db.example.com/op", StartTime: ptr.To(metav1.NewTime(now.Add(6 * time.Second)))}}
	if _, _, ok := FirstAnswer(&lifecyclev1alpha1.Eviction{}, created, req); ok {
		t.Fatal("no responder active yet: no answer")
	}
	accepted, latency, ok := FirstAnswer(created, active, req)
	if !ok {
		t.Fatal("made active 4s after the request's creation: no answer")
	}
	if !accepted {
		t.Error("made active 4s after the request's creation: not accepted")
	}
	if latency != 4*time.Second {
		t.Errorf("made active 4s after the request's creation: latency %v", latency)
	}
	heartbeat := active.DeepCopy()
	heartbeat.Status.Responders[0].HeartbeatTime = ptr.To(metav1.NewTime(now.Add(time.Minute)))
	if _, _, ok := FirstAnswer(active, heartbeat, req); ok {
		t.Fatal("a heartbeat after the answer is no first answer")
	}
	if _, _, ok := FirstAnswer(created, active, nil); ok {
		t.Fatal("an Eviction nodemaint did not ask for: no answer of nodemaint's")
	}
	failed := created.DeepCopy()
	failed.Status.Conditions = []metav1.Condition{{Type: string(lifecyclev1alpha1.EvictionConditionFailed), Status: metav1.ConditionTrue,
		Reason: "NoFurtherResponder", LastTransitionTime: metav1.NewTime(now.Add(9 * time.Second))}}
	accepted, latency, ok = FirstAnswer(created, failed, req)
	if !ok {
		t.Fatal("failed 7s after the request: no first answer; want one")
	}
	if accepted {
		t.Error("failed 7s after the request: accepted; want declined")
	}
	if latency != 7*time.Second {
		t.Errorf("failed 7s after the request: latency %v; want 7s", latency)
	}
}

func TestAnswerChanged(t *testing.T) {
	active := &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "pod-1-a"}}
	active.Status.TargetResponders = []lifecyclev1alpha1.TargetResponder{{Name: "db.example.com/op", State: lifecyclev1alpha1.ResponderStateActive}}
	active.Status.Responders = []lifecyclev1alpha1.ResponderStatus{{Name: "db.example.com/op", StartTime: ptr.To(metav1.NewTime(now)),
		HeartbeatTime: ptr.To(metav1.NewTime(now)), ExpectedCompletionTime: ptr.To(metav1.NewTime(now.Add(time.Hour))), Message: ptr.To("waiting")}}
	change := func(f func(e *lifecyclev1alpha1.Eviction)) *lifecyclev1alpha1.Eviction {
		e := active.DeepCopy()
		f(e)
		return e
	}
	for _, tc := range []struct {
		name     string
		old, cur *lifecyclev1alpha1.Eviction
		want     bool
	}{
		{"a heartbeat that says nothing new", active, change(func(e *lifecyclev1alpha1.Eviction) {
			e.Status.Responders[0].HeartbeatTime = ptr.To(metav1.NewTime(now.Add(3 * time.Minute)))
		}), false},
		{"the responder's message", active, change(func(e *lifecyclev1alpha1.Eviction) { e.Status.Responders[0].Message = ptr.To("surging") }), true},
		{"its expected completion", active, change(func(e *lifecyclev1alpha1.Eviction) { e.Status.Responders[0].ExpectedCompletionTime = nil }), true},
		{"the first responder made active", change(func(e *lifecyclev1alpha1.Eviction) {
			e.Status.TargetResponders[0].State = lifecyclev1alpha1.ResponderStateInactive
		}), active, true},
		{"failed", active, change(func(e *lifecyclev1alpha1.Eviction) {
			e.Status.Conditions = []metav1.Condition{{Type: string(lifecyclev1alpha1.EvictionConditionFailed), Status: metav1.ConditionTrue, Reason: "NoFurtherResponder"}}
		}), true},
		{"the pod evicted", active, change(func(e *lifecyclev1alpha1.Eviction) {
			e.Status.Conditions = []metav1.Condition{{Type: string(lifecyclev1alpha1.EvictionConditionTargetEvicted), Status: metav1.ConditionTrue, Reason: "Evicted"}}
		}), true},
		{"being deleted", active, change(func(e *lifecyclev1alpha1.Eviction) { e.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }), true},
	} {
		if got := AnswerChanged(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: AnswerChanged %t, want %t", tc.name, got, tc.want)
		}
	}
}
