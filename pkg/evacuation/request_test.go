package evacuation

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const (
	me    = "example.com/me"
	other = "example.com/other"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "11111111-1111-1111-1111-111111111111"}}
}

// testEviction is an Eviction of pod with me and other (in this order) and the imperative
// evictor, me in the given state.
func testEviction(pod *corev1.Pod, state lifecyclev1alpha1.ResponderStateType, status *lifecyclev1alpha1.ResponderStatus) *lifecyclev1alpha1.Eviction {
	ev := &lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "pod-1-" + pod.Name, UID: "eviction-1-" + pod.UID, CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec:       lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID}}},
		Status: lifecyclev1alpha1.EvictionStatus{
			Requesters: []lifecyclev1alpha1.Requester{
				{Name: "nodemaint.dev/node-maintenance", Intent: lifecyclev1alpha1.RequesterIntentEviction},
				{Name: "example.com/descheduler", Intent: lifecyclev1alpha1.RequesterIntentWithdrawn},
			},
			TargetResponders: []lifecyclev1alpha1.TargetResponder{
				{Name: me, Priority: ptr.To[int32](10000), State: state},
				{Name: other, Priority: ptr.To[int32](5000), State: lifecyclev1alpha1.ResponderStateInactive},
				{Name: lifecyclev1alpha1.EvictionResponderImperativeEviction, Priority: ptr.To[int32](100), State: lifecyclev1alpha1.ResponderStateInactive},
			},
		},
	}
	if status != nil {
		ev.Status.Responders = append(ev.Status.Responders, *status)
	}
	return ev
}

func mtime(ago time.Duration) *metav1.Time {
	t := metav1.NewTime(time.Now().Add(-ago).Truncate(time.Second))
	return &t
}

func TestForEviction(t *testing.T) {
	active := lifecyclev1alpha1.ResponderStateActive
	started := &lifecyclev1alpha1.ResponderStatus{Name: me, StartTime: mtime(time.Minute)}
	for name, tc := range map[string]struct {
		mutate       func(*corev1.Pod, *lifecyclev1alpha1.Eviction)
		want         bool
		wantAccepted bool
	}{
		"active":   {want: true},
		"inactive": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) { ev.Status.TargetResponders[0].State = "Inactive" }},
		"interrupted": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.TargetResponders[0].State = "Interrupted"
		}},
		"not listed": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.TargetResponders[0].Name = "example.com/x"
		}},
		"another pod, same name": {mutate: func(pod *corev1.Pod, _ *lifecyclev1alpha1.Eviction) { pod.UID = "22222222-2222-2222-2222-222222222222" }},
		"another namespace":      {mutate: func(pod *corev1.Pod, _ *lifecyclev1alpha1.Eviction) { pod.Namespace = "other" }},
		"canceled": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "CanceledDueToNoRequesters"}}
		}},
		"target evicted": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.Conditions = []metav1.Condition{{Type: "TargetEvicted", Status: metav1.ConditionTrue, Reason: "PodDeleted"}}
		}},
		"not failed yet": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionFalse, Reason: "AwaitingEviction"}}
		}, want: true},
		"heartbeat: accepted": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.Responders[0].HeartbeatTime = mtime(30 * time.Second)
		}, want: true, wantAccepted: true},
		"heartbeat of an earlier turn: not accepted": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.Responders[0].HeartbeatTime = mtime(2 * time.Minute)
		}, want: true},
		"completed": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.Responders[0].HeartbeatTime = mtime(30 * time.Second)
			ev.Status.Responders[0].CompletionTime = mtime(30 * time.Second)
		}},
		"completed in an earlier turn": {mutate: func(_ *corev1.Pod, ev *lifecyclev1alpha1.Eviction) {
			ev.Status.Responders[0].CompletionTime = mtime(2 * time.Minute)
		}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := testPod()
			ev := testEviction(testPod(), active, started.DeepCopy())
			if tc.mutate != nil {
				tc.mutate(pod, ev)
			}
			r := ForEviction(ev, pod, me)
			if (r != nil) != tc.want {
				t.Fatalf("ForEviction = %v; want a request: %t", r, tc.want)
			}
			if r == nil {
				return
			}
			if r.Protocol() != EvictionRequests {
				t.Errorf("request: protocol %s; want %s", r.Protocol(), EvictionRequests)
			}
			if r.Pod() != pod {
				t.Errorf("request: pod %v; want the pod given", r.Pod())
			}
			if r.Accepted() != tc.wantAccepted {
				t.Errorf("request: accepted %t; want %t", r.Accepted(), tc.wantAccepted)
			}
			if got := r.Requesters(); len(got) != 1 || got[0] != "nodemaint.dev/node-maintenance" {
				t.Errorf("Requesters = %v; want only the one whose intent is Eviction", got)
			}
			if !r.Since().Equal(started.StartTime.Time) {
				t.Errorf("Since = %v; want the responder's startTime %v", r.Since(), started.StartTime)
			}
		})
	}
}

func TestForChoosesTheProtocol(t *testing.T) {
	pod := testPod()
	if r := For(pod, nil, me); r != nil {
		t.Errorf("For(unrequested pod) = %v; want nil", r)
	}
	SetCondition(pod, corev1.PodCondition{Type: Request, Status: corev1.ConditionTrue, Reason: ReasonNodeMaintenance})
	if r := For(pod, nil, me); r == nil || r.Protocol() != PodConditions {
		t.Errorf("For(pod with EvacuationRequest) = %v; want the pod-condition request", r)
	} else if got := r.Requesters(); got[0] != ReasonNodeMaintenance {
		t.Errorf("For(pod with EvacuationRequest): requesters %v; want %s first", got, ReasonNodeMaintenance)
	}
	ev := testEviction(pod, lifecyclev1alpha1.ResponderStateActive, nil)
	if r := For(pod, []*lifecyclev1alpha1.Eviction{ev}, me); r == nil || r.Protocol() != EvictionRequests {
		t.Errorf("For(pod with both) = %v; want the Eviction", r)
	}
	if r := For(pod, []*lifecyclev1alpha1.Eviction{ev}, ""); r == nil || r.Protocol() != PodConditions {
		t.Errorf("For(pod with both, no responder name) = %v; want the pod-condition request", r)
	}
	if r := For(pod, []*lifecyclev1alpha1.Eviction{ev}, other); r == nil || r.Protocol() != PodConditions {
		t.Errorf("For(pod, Eviction where the responder is Inactive) = %v; want the pod-condition request", r)
	}
}

func newClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&corev1.Pod{}, &lifecyclev1alpha1.Eviction{}).Build()
}

func getEviction(t *testing.T, c client.Client, ev *lifecyclev1alpha1.Eviction) *lifecyclev1alpha1.Eviction {
	t.Helper()
	got := &lifecyclev1alpha1.Eviction{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ev), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestEvictionAnswers(t *testing.T) {
	ctx := context.Background()
	start := &lifecyclev1alpha1.ResponderStatus{Name: me, StartTime: mtime(time.Minute)}
	// Another responder's entry, which no answer may touch.
	otherStatus := lifecyclev1alpha1.ResponderStatus{Name: other, Message: ptr.To("not my turn")}
	setup := func(t *testing.T) (client.Client, *corev1.Pod, *lifecyclev1alpha1.Eviction) {
		pod := testPod()
		ev := testEviction(pod, lifecyclev1alpha1.ResponderStateActive, start.DeepCopy())
		ev.Status.Responders = append(ev.Status.Responders, otherStatus)
		return newClient(t, pod, ev), pod, ev
	}
	keepsOthers := func(t *testing.T, ev *lifecyclev1alpha1.Eviction) {
		t.Helper()
		if s := ResponderStatusOf(ev, other); s.Message == nil || *s.Message != "not my turn" {
			t.Errorf("the other responder's entry changed: %+v", s)
		}
		if s := ResponderStatusOf(ev, me); s.StartTime == nil || !s.StartTime.Equal(start.StartTime) {
			t.Errorf("startTime changed: %+v; want %v", s, start.StartTime)
		}
	}

	t.Run("accept, then progress", func(t *testing.T) {
		c, pod, ev := setup(t)
		expected := time.Now().Add(5 * time.Minute)
		if err := ForEviction(ev, pod, me).Accept(ctx, c, Progress{Reason: "Surge", Message: "0 of 1 Ready", ExpectedCompletion: expected}); err != nil {
			t.Fatal(err)
		}
		got := getEviction(t, c, ev)
		keepsOthers(t, got)
		s := ResponderStatusOf(got, me)
		if s.HeartbeatTime == nil || time.Since(s.HeartbeatTime.Time) > 5*time.Second {
			t.Fatalf("after Accept: heartbeat %v; want one now", s.HeartbeatTime)
		}
		if s.CompletionTime != nil {
			t.Errorf("after Accept: completion %v; want none", s.CompletionTime)
		}
		if want := (&metav1.Time{Time: expected.Truncate(time.Second)}); s.ExpectedCompletionTime == nil || !s.ExpectedCompletionTime.Equal(want) {
			t.Errorf("after Accept: expected completion %v; want %v", s.ExpectedCompletionTime, want)
		}
		if got := ptr.Deref(s.Message, "<nil>"); got != "Surge: 0 of 1 Ready" {
			t.Errorf("after Accept: message %q; want %q", got, "Surge: 0 of 1 Ready")
		}
		r := ForEviction(got, pod, me)
		if !r.Accepted() {
			t.Errorf("after Accept, the request reads not accepted")
		}
		if !r.HeartbeatDue().Equal(s.HeartbeatTime.Add(HeartbeatInterval)) {
			t.Errorf("heartbeat due %v; want a HeartbeatInterval after %v", r.HeartbeatDue(), s.HeartbeatTime)
		}
		// The same progress before the heartbeat is due writes nothing.
		rv := got.ResourceVersion
		if err := r.Progress(ctx, c, Progress{Reason: "Surge", Message: "0 of 1 Ready", ExpectedCompletion: expected}); err != nil {
			t.Fatal(err)
		}
		if got = getEviction(t, c, ev); got.ResourceVersion != rv {
			t.Errorf("an unchanged progress wrote the Eviction (resourceVersion %s -> %s)", rv, got.ResourceVersion)
		}
		// An expected completion pushed later while the reported one is still ahead waits; one
		// brought earlier is written at once.
		if err := r.Progress(ctx, c, Progress{Reason: "Surge", Message: "0 of 1 Ready", ExpectedCompletion: expected.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if got = getEviction(t, c, ev); got.ResourceVersion != rv {
			t.Errorf("an expected completion pushed later wrote the Eviction (resourceVersion %s -> %s)", rv, got.ResourceVersion)
		}
		earlier := time.Now().Add(2 * time.Minute)
		if err := r.Progress(ctx, c, Progress{Reason: "Surge", Message: "0 of 1 Ready", ExpectedCompletion: earlier}); err != nil {
			t.Fatal(err)
		}
		got = getEviction(t, c, ev)
		if s := ResponderStatusOf(got, me); s.ExpectedCompletionTime == nil || !s.ExpectedCompletionTime.Equal(&metav1.Time{Time: earlier.Truncate(time.Second)}) {
			t.Errorf("an earlier expected completion was not written: %+v", s)
		}
		r = ForEviction(got, pod, me)
		// New progress is written at once.
		if err := r.Progress(ctx, c, Progress{Reason: "Surge", Message: "1 of 1 Ready"}); err != nil {
			t.Fatal(err)
		}
		got = getEviction(t, c, ev)
		s = ResponderStatusOf(got, me)
		if got := ptr.Deref(s.Message, "<nil>"); got != "Surge: 1 of 1 Ready" {
			t.Errorf("after Progress: message %q; want the new one", got)
		}
		if s.ExpectedCompletionTime != nil {
			t.Errorf("after Progress: expected completion %v; want none", s.ExpectedCompletionTime)
		}
		keepsOthers(t, got)
	})

	t.Run("an expected completion passed is not reported", func(t *testing.T) {
		// A pod still terminating after its grace period: the Eviction API refuses an expected
		// completion in the past, and a report refused would be sent again at every look.
		c, pod, ev := setup(t)
		removing := Progress{Reason: "Surge", Message: "replaced", ExpectedCompletion: time.Now().Add(-time.Minute)}
		if err := ForEviction(ev, pod, me).Accept(ctx, c, removing); err != nil {
			t.Fatal(err)
		}
		got := getEviction(t, c, ev)
		s := ResponderStatusOf(got, me)
		if s.HeartbeatTime == nil {
			t.Errorf("after Accept with an expected completion passed: no heartbeat")
		}
		if s.ExpectedCompletionTime != nil {
			t.Errorf("after Accept with an expected completion passed: expected completion %v; want none", s.ExpectedCompletionTime)
		}
		if got := ptr.Deref(s.Message, "<nil>"); got != "Surge: replaced" {
			t.Fatalf("after Accept with an expected completion passed: message %q; want %q", got, "Surge: replaced")
		}
		rv := got.ResourceVersion
		if err := ForEviction(got, pod, me).Progress(ctx, c, removing); err != nil {
			t.Fatal(err)
		}
		if got = getEviction(t, c, ev); got.ResourceVersion != rv {
			t.Errorf("the same progress, its expected completion passed, wrote the Eviction again (resourceVersion %s -> %s)", rv, got.ResourceVersion)
		}
	})

	t.Run("progress due", func(t *testing.T) {
		c, pod, ev := setup(t)
		ev.Status.Responders[0].StartTime = mtime(HeartbeatInterval + 10*time.Minute)
		ev.Status.Responders[0].HeartbeatTime = mtime(HeartbeatInterval + time.Second)
		ev.Status.Responders[0].Message = ptr.To("Surge: waiting")
		if err := c.Status().Update(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if err := ForEviction(ev, pod, me).Progress(ctx, c, Progress{Reason: "Surge", Message: "waiting"}); err != nil {
			t.Fatal(err)
		}
		if s := ResponderStatusOf(getEviction(t, c, ev), me); time.Since(s.HeartbeatTime.Time) > 5*time.Second {
			t.Errorf("a due heartbeat was not written: %v", s.HeartbeatTime)
		}
	})

	t.Run("nothing new: a heartbeat when due, with what was reported", func(t *testing.T) {
		c, pod, ev := setup(t)
		expected := mtime(-5 * time.Minute) // 5 minutes ahead
		ev.Status.Responders[0].StartTime = mtime(HeartbeatInterval + 10*time.Minute)
		ev.Status.Responders[0].HeartbeatTime = mtime(time.Second)
		ev.Status.Responders[0].ExpectedCompletionTime = expected
		ev.Status.Responders[0].Message = ptr.To("Surge: surged")
		if err := c.Status().Update(ctx, ev); err != nil {
			t.Fatal(err)
		}
		ev = getEviction(t, c, ev)
		r := ForEviction(ev, pod, me)
		if !r.Reported(Progress{Reason: "Surge", Message: "surged"}) {
			t.Errorf("Reported(Surge, surged) = false; want true for the reported message")
		}
		if r.Reported(Progress{Reason: "Surge", Message: "other"}) {
			t.Errorf("Reported(Surge, other) = true; want false for a message not reported")
		}
		if err := r.Progress(ctx, c, Progress{}); err != nil {
			t.Fatal(err)
		}
		if got := getEviction(t, c, ev); got.ResourceVersion != ev.ResourceVersion {
			t.Errorf("nothing new before the heartbeat is due wrote the Eviction")
		}
		ev.Status.Responders[0].HeartbeatTime = mtime(HeartbeatInterval + time.Second)
		if err := c.Status().Update(ctx, ev); err != nil {
			t.Fatal(err)
		}
		ev = getEviction(t, c, ev)
		if err := ForEviction(ev, pod, me).Progress(ctx, c, Progress{}); err != nil {
			t.Fatal(err)
		}
		s := ResponderStatusOf(getEviction(t, c, ev), me)
		if time.Since(s.HeartbeatTime.Time) > 5*time.Second {
			t.Errorf("a due heartbeat with nothing new: heartbeat %v; want a new one", s.HeartbeatTime)
		}
		if got := ptr.Deref(s.Message, ""); got != "Surge: surged" {
			t.Errorf("a due heartbeat with nothing new: message %q; want the same, %q", got, "Surge: surged")
		}
		if s.ExpectedCompletionTime == nil || !s.ExpectedCompletionTime.Equal(expected) {
			t.Errorf("a due heartbeat with nothing new: expected completion %v; want the same, %v", s.ExpectedCompletionTime, expected)
		}
	})

	t.Run("accept marking: one write of the pod, the Eviction at the first heartbeat", func(t *testing.T) {
		c, pod, ev := setup(t)
		marks := map[string]*string{OriginalDeletionCostAnnotation: ptr.To(""), corev1.PodDeletionCost: ptr.To("-100")}
		r := ForEviction(ev, pod, me)
		if err := r.AcceptMarking(ctx, c, Progress{Reason: "Surge", Message: "waiting"}, marks); err != nil {
			t.Fatal(err)
		}
		if got := getEviction(t, c, ev); got.ResourceVersion != ev.ResourceVersion {
			t.Errorf("the Eviction was written: %+v", ResponderStatusOf(got, me))
		}
		// The pod given was updated to what the API server returned.
		if got := pod.Annotations[AcceptedEvictionAnnotation]; got != string(ev.UID) {
			t.Errorf("the pod's %s is %q; want %s", AcceptedEvictionAnnotation, got, ev.UID)
		}
		if got := pod.Annotations[corev1.PodDeletionCost]; got != "-100" {
			t.Errorf("the pod's %s is %q; want -100", corev1.PodDeletionCost, got)
		}
		if got := pod.Annotations[OriginalDeletionCostAnnotation]; got != "" {
			t.Errorf("the pod's %s is %q; want it empty", OriginalDeletionCostAnnotation, got)
		}
		r = ForEviction(ev, pod, me)
		if !r.Accepted() {
			t.Errorf("after AcceptMarking, the request reads not accepted")
		}
		if due := start.StartTime.Add(HeartbeatInterval); !r.HeartbeatDue().Equal(due) {
			t.Errorf("heartbeat due %v; want a HeartbeatInterval after startTime (%v)", r.HeartbeatDue(), due)
		}
		// Another Eviction of the pod (this one deleted, a new one made) was not accepted.
		next := ev.DeepCopy()
		next.UID = "another"
		if ForEviction(next, pod, me).Accepted() {
			t.Errorf("an Eviction of another UID reads accepted")
		}
		// Without marks it is Accept: the Eviction is written.
		pod2 := testPod()
		c2 := newClient(t, pod2, ev.DeepCopy())
		if err := ForEviction(ev, pod2, me).AcceptMarking(ctx, c2, Progress{Reason: "Surge", Message: "waiting"}, nil); err != nil {
			t.Fatal(err)
		}
		s := ResponderStatusOf(getEviction(t, c2, ev), me)
		if s.HeartbeatTime == nil {
			t.Errorf("accepted without marks: no heartbeat on the Eviction; want the acceptance there")
		}
		if got := ptr.Deref(s.Message, ""); got != "Surge: waiting" {
			t.Errorf("accepted without marks: message %q on the Eviction; want %q", got, "Surge: waiting")
		}
	})

	t.Run("accept marking on pod conditions: the condition and the marks in one write", func(t *testing.T) {
		pod := testPod()
		pod.Status.Conditions = []corev1.PodCondition{{Type: Request, Status: corev1.ConditionTrue, Reason: "nodemaint.dev/node-maintenance"}}
		c := newClient(t, pod)
		if err := ForPod(pod).AcceptMarking(ctx, c, Progress{Reason: "Surge", Message: "waiting"}, map[string]*string{corev1.PodDeletionCost: ptr.To("-100")}); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		if !Accepted(got) {
			t.Errorf("the pod's conditions %+v; want accepted", got.Status.Conditions)
		}
		if v := got.Annotations[corev1.PodDeletionCost]; v != "-100" {
			t.Errorf("the pod's %s is %q; want -100", corev1.PodDeletionCost, v)
		}
		if v := got.Annotations[AcceptedEvictionAnnotation]; v != "" {
			t.Errorf("the pod's %s is %q on pod conditions; want none", AcceptedEvictionAnnotation, v)
		}
	})

	t.Run("decline completes the turn", func(t *testing.T) {
		c, pod, ev := setup(t)
		if err := ForEviction(ev, pod, me).Decline(ctx, c, "MaxSurgeZero", "maxSurge is 0"); err != nil {
			t.Fatal(err)
		}
		got := getEviction(t, c, ev)
		keepsOthers(t, got)
		s := ResponderStatusOf(got, me)
		if s.CompletionTime == nil {
			t.Errorf("after Decline: no completionTime")
		}
		if m := ptr.Deref(s.Message, ""); !strings.Contains(m, "MaxSurgeZero") {
			t.Errorf("after Decline: message %q; want the reason, MaxSurgeZero", m)
		}
		if m := ptr.Deref(s.Message, ""); !strings.Contains(m, "declined") {
			t.Errorf("after Decline: message %q; want it to say declined", m)
		}
		if r := ForEviction(got, pod, me); r != nil {
			t.Errorf("a declined request is still the responder's to answer")
		}
	})

	t.Run("complete", func(t *testing.T) {
		c, pod, ev := setup(t)
		if err := ForEviction(ev, pod, me).Complete(ctx, c, "replaced"); err != nil {
			t.Fatal(err)
		}
		got := getEviction(t, c, ev)
		s := ResponderStatusOf(got, me)
		if s.CompletionTime == nil {
			t.Errorf("after Complete: no completionTime")
		}
		if m := ptr.Deref(s.Message, "<nil>"); m != "Completed: replaced" {
			t.Errorf("after Complete: message %q; want %q", m, "Completed: replaced")
		}
		keepsOthers(t, got)
	})

	t.Run("pod conditions", func(t *testing.T) {
		pod := testPod()
		SetCondition(pod, corev1.PodCondition{Type: Request, Status: corev1.ConditionTrue, Reason: ReasonNodeMaintenance})
		c := newClient(t, pod)
		r := ForPod(pod)
		if err := r.Accept(ctx, c, Progress{Reason: "Surge", Message: "moving"}); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		if !Accepted(got) {
			t.Fatalf("after Accept on pod conditions: %+v; want accepted", got.Status.Conditions)
		}
		if reason := Condition(got, Initiated).Reason; reason != "Surge" {
			t.Errorf("after Accept on pod conditions: reason %q; want Surge", reason)
		}
		if due := r.HeartbeatDue(); !due.IsZero() {
			t.Errorf("after Accept on pod conditions: heartbeat due %v; want none", due)
		}
		if err := ForPod(got).Decline(ctx, c, "Nope", "cannot"); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		if !Declined(got) {
			t.Fatalf("after Decline on pod conditions: %+v; want declined", got.Status.Conditions)
		}
		if reason := Condition(got, Initiated).Reason; reason != "Nope" {
			t.Errorf("after Decline on pod conditions: reason %q; want Nope", reason)
		}
	})
}

func TestExpectedHolds(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d).Truncate(time.Second)} }
	for _, tc := range []struct {
		name           string
		reported, want *metav1.Time
		holds          bool
	}{
		{"none", nil, nil, true},
		{"same", at(time.Minute), at(time.Minute), true},
		{"later, the reported one ahead", at(time.Minute), at(2 * time.Minute), true},
		{"earlier", at(2 * time.Minute), at(time.Minute), false},
		{"later, the reported one passed", at(-time.Minute), at(time.Minute), false},
		{"one appears", nil, at(time.Minute), false},
		{"one goes", at(time.Minute), nil, false},
	} {
		if got := expectedHolds(tc.reported, tc.want, now); got != tc.holds {
			t.Errorf("%s: expectedHolds = %t, want %t", tc.name, got, tc.holds)
		}
	}
}
