package responder

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

const me = "nodemaint.dev/deployment-responder"

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

func eviction(p *corev1.Pod, heartbeatAgo time.Duration) *lifecyclev1alpha1.Eviction {
	start := metav1.NewTime(time.Now().Add(-evacuation.HeartbeatInterval - 5*time.Minute).Truncate(time.Second))
	s := lifecyclev1alpha1.ResponderStatus{Name: me, StartTime: &start}
	if heartbeatAgo > 0 {
		s.HeartbeatTime = ptr.To(metav1.NewTime(time.Now().Add(-heartbeatAgo)))
	}
	return &lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "pod-1-" + p.Name, UID: types.UID("ev-" + p.UID)},
		Spec:       lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: p.Name, UID: p.UID}}},
		Status: lifecyclev1alpha1.EvictionStatus{
			Requesters:       []lifecyclev1alpha1.Requester{{Name: "example.com/descheduler", Intent: lifecyclev1alpha1.RequesterIntentEviction}},
			TargetResponders: []lifecyclev1alpha1.TargetResponder{{Name: me, Priority: ptr.To[int32](10000), State: lifecyclev1alpha1.ResponderStateActive}},
			Responders:       []lifecyclev1alpha1.ResponderStatus{s},
		},
	}
}

// acceptedOn is the pod with the annotation that says its responder accepted the Eviction of
// that UID on it.
func acceptedOn(p *corev1.Pod, eviction types.UID) *corev1.Pod {
	p.Annotations = map[string]string{evacuation.AcceptedEvictionAnnotation: string(eviction)}
	return p
}

// TestObserve: the decision sees a pod asked through an Eviction as a pod with
// EvacuationRequest=True since the responder became Active (and EvacuationInitiated=True once it
// accepted: a heartbeat since, or the pod naming that Eviction as accepted on it), without the
// pod in the cache being changed; pods asked through their conditions, and pods not asked, are
// the pods themselves; each request answers through its own protocol, an Eviction's through the
// view's copy of the pod.
func TestObserve(t *testing.T) {
	byCondition, byEviction, acceptedEviction, none := pod("by-condition"), pod("by-eviction"), pod("accepted"), pod("none")
	onPod := acceptedOn(pod("on-pod"), "ev-uid-on-pod")
	otherEviction := acceptedOn(pod("other-eviction"), "ev-an-earlier-one")
	evacuation.SetCondition(byCondition, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance})
	evictions := map[types.UID][]*lifecyclev1alpha1.Eviction{
		byEviction.UID:       {eviction(byEviction, 0)},
		acceptedEviction.UID: {eviction(acceptedEviction, time.Minute)},
		otherEviction.UID:    {eviction(otherEviction, 0)},
		onPod.UID:            {eviction(onPod, 0)},
	}
	v := Observe([]*corev1.Pod{byCondition, byEviction, acceptedEviction, none, otherEviction, onPod}, evictions, me)
	if len(v.Pods) != 6 {
		t.Fatalf("view has %d pods; want 6", len(v.Pods))
	}
	if v.Pods[0] != byCondition {
		t.Errorf("the pod asked by condition is copied; want it as given")
	}
	if v.Pods[3] != none {
		t.Errorf("the pod not asked is copied; want it as given")
	}
	if r := v.Request(none); r != nil {
		t.Errorf("request of the pod not asked %v; want none", r)
	}
	if r := v.Request(byCondition); r.Protocol() != evacuation.PodConditions {
		t.Errorf("request of the pod asked by condition by %s; want %s", r.Protocol(), evacuation.PodConditions)
	}
	for i, want := range map[int]bool{1: false, 2: true, 4: false, 5: true} {
		p := v.Pods[i]
		if r := v.Request(p); r != nil && r.Pod() != p {
			t.Errorf("%s: the request answers through another pod than the view's", p.Name)
		}
		c := evacuation.Condition(p, evacuation.Request)
		if !evacuation.Requested(p) {
			t.Errorf("%s: request %+v; want True", p.Name, c)
		} else if start := evictions[p.UID][0].Status.Responders[0].StartTime; !c.LastTransitionTime.Equal(start) {
			t.Errorf("%s: requested since %v; want since the responder's startTime %v", p.Name, c.LastTransitionTime, start)
		}
		if evacuation.Accepted(p) != want {
			t.Errorf("%s: accepted %t; want %t", p.Name, evacuation.Accepted(p), want)
		}
		if r := v.Request(p); r == nil || r.Protocol() != evacuation.EvictionRequests {
			t.Errorf("%s: request %v; want the Eviction", p.Name, r)
		}
	}
	for _, p := range []*corev1.Pod{byEviction, acceptedEviction} {
		if len(p.Status.Conditions) != 0 {
			t.Errorf("Observe changed the pod %s it was given: conditions %+v; want none", p.Name, p.Status.Conditions)
		}
	}
	if v := Observe([]*corev1.Pod{byEviction}, evictions, ""); evacuation.Requested(v.Pods[0]) {
		t.Errorf("without a responder name, an Eviction asks nothing")
	}
}

// TestHeartbeats: only Evictions the responder accepted are owed a heartbeat, and only once it
// is due (KEP-4563's cadence), a terminating pod's too (it keeps its turn until the pod is gone);
// next is the earliest heartbeat due after now.
func TestHeartbeats(t *testing.T) {
	notAccepted, soon, later, gone, due := pod("not-accepted"), pod("soon"), pod("later"), pod("gone"), pod("due")
	onPod, onPodSoon := acceptedOn(pod("on-pod"), "ev-uid-on-pod"), acceptedOn(pod("on-pod-soon"), "ev-uid-on-pod-soon")
	gone.DeletionTimestamp = ptr.To(metav1.Now())
	startedSoon := eviction(onPodSoon, 0)
	startedSoon.Status.Responders[0].StartTime = ptr.To(metav1.NewTime(time.Now().Add(-30 * time.Second).Truncate(time.Second)))
	evictions := map[types.UID][]*lifecyclev1alpha1.Eviction{
		notAccepted.UID: {eviction(notAccepted, 0)},
		soon.UID:        {eviction(soon, 50*time.Second)},
		later.UID:       {eviction(later, 10*time.Second)},
		gone.UID:        {eviction(gone, evacuation.HeartbeatInterval+2*time.Minute)},
		due.UID:         {eviction(due, evacuation.HeartbeatInterval+time.Minute)},
		onPod.UID:       {eviction(onPod, 0)}, // Active for longer than the interval: its first heartbeat is due
		onPodSoon.UID:   {startedSoon},        // Active for 30s: due after "soon"
	}
	v := Observe([]*corev1.Pod{notAccepted, soon, later, gone, due, onPod, onPodSoon}, evictions, me)
	now := time.Now()
	beats, next := v.Heartbeats(v.Pods, now)
	got := map[string]bool{}
	for _, b := range beats {
		got[b.Request.Pod().Name] = b.Terminating
	}
	want := map[string]bool{"gone": true, "due": false, "on-pod": false}
	if len(got) != len(want) {
		t.Fatalf("beats for %v; want %v", got, want)
	}
	for name, terminating := range want {
		if c, ok := got[name]; !ok || c != terminating {
			t.Errorf("%s: beat %t (terminating %t); want terminating %t", name, ok, c, terminating)
		}
	}
	wantNext := evictions[soon.UID][0].Status.Responders[0].HeartbeatTime.Add(evacuation.HeartbeatInterval)
	if !next.Equal(wantNext) {
		t.Errorf("next heartbeat %v; want %v (the earliest due after now)", next, wantNext)
	}
}
