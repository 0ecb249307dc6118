package eviction

import (
	"context"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
	"github.com/nodemaint/nodemaint/internal/requester"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

const responder = "example.com/owner"

// writesClient is a fake API server with the Eviction controller's indexes; every write it
// serves is counted by verb and resource ("create evictions", "patch evictionrequests/status"...).
func writesClient(t *testing.T, writes map[string]int, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	target := func(p func(client.Object) *string) client.IndexerFunc {
		return func(o client.Object) []string {
			if n := p(o); n != nil {
				return []string{o.GetNamespace() + "/" + *n}
			}
			return nil
		}
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&lifecyclev1alpha1.Eviction{}, &lifecyclev1alpha1.EvictionRequest{}).
		WithIndex(&lifecyclev1alpha1.EvictionRequest{}, targetIndex, target(func(o client.Object) *string {
			if p := o.(*lifecyclev1alpha1.EvictionRequest).Spec.Target.Pod; p != nil {
				return &p.Name
			}
			return nil
		})).
		WithIndex(&lifecyclev1alpha1.Eviction{}, targetIndex, target(func(o client.Object) *string {
			if p := o.(*lifecyclev1alpha1.Eviction).Spec.Target.Pod; p != nil {
				return &p.Name
			}
			return nil
		})).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				writes["create "+kind(obj)]++
				return c.Create(ctx, obj, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				writes["delete "+kind(obj)]++
				return c.Delete(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				writes["patch "+kind(obj)]++
				return c.Patch(ctx, obj, patch, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				writes["patch "+kind(obj)+"/"+sub]++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
}

func kind(o client.Object) string {
	switch o.(type) {
	case *lifecyclev1alpha1.Eviction:
		return "evictions"
	case *lifecyclev1alpha1.EvictionRequest:
		return "evictionrequests"
	case *corev1.Pod:
		return "pods"
	}
	return "other"
}

// A pod with a responder of its own, which nodemaint's drain asks to move (its request owned by
// the pod, as the drain makes them).
func askedPod() (*corev1.Pod, *lifecyclev1alpha1.EvictionRequest) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "uid-web-1"},
		Spec:       corev1.PodSpec{EvictionResponders: []corev1.EvictionResponder{{Name: responder, Priority: ptr.To[int32](10000)}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	req := &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nodemaint-uid-web-1", UID: "uid-req", Generation: 1,
			OwnerReferences: []metav1.OwnerReference{requester.PodOwner(pod.Name, pod.UID)}},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
			Requester: names.Requester, Intent: lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
	return pod, req
}

// reconcileRequest asks about askedPod's pod.
func reconcileRequest() reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web-1"}}
}

func reconcileOnce(t *testing.T, r *Reconciler) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcileRequest()); err != nil {
		t.Fatal(err)
	}
}

// TestResponderActiveFromTheCreatingReconcile: the reconcile that creates a pod's Eviction also
// makes its first responder Active (the status is decided from the Eviction the create returned,
// not left for a later look once the cache shows it, while the pod's response timeout runs), and
// writes the request's status once, with its Eviction's first conditions (AwaitingEviction, as
// upstream's controller does): a create and a status write of the Eviction, one of the request,
// and nothing else.
func TestResponderActiveFromTheCreatingReconcile(t *testing.T) {
	pod, req := askedPod()
	writes := map[string]int{}
	c := writesClient(t, writes, pod, req)
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Name: "me", Clock: clock.RealClock{}}
	reconcileOnce(t, r)

	var evs lifecyclev1alpha1.EvictionList
	if err := c.List(context.Background(), &evs); err != nil || len(evs.Items) != 1 {
		t.Fatalf("Evictions %v (%v); want one", evs.Items, err)
	}
	e := evs.Items[0]
	if len(e.Status.TargetResponders) == 0 {
		t.Fatalf("after the reconcile that created it, the Eviction has no responders; want %s Active", responder)
	}
	if got := e.Status.TargetResponders[0].Name; got != responder {
		t.Fatalf("after the reconcile that created it, the Eviction's first responder is %s; want %s", got, responder)
	}
	if got := e.Status.TargetResponders[0].State; got != lifecyclev1alpha1.ResponderStateActive {
		t.Fatalf("after the reconcile that created it, %s is %s; want %s", responder, got, lifecyclev1alpha1.ResponderStateActive)
	}
	want := map[string]int{"create evictions": 1, "patch evictions/status": 1, "patch evictionrequests/status": 1}
	if !maps.Equal(writes, want) {
		t.Errorf("writes %v; want %v", writes, want)
	}
	got := &lifecyclev1alpha1.EvictionRequest{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(req), got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)); c == nil ||
		c.Reason != string(lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction) {
		t.Errorf("the request's TargetEvicted condition as its Eviction started: %+v; want its Eviction's (AwaitingEviction)", c)
	}
	if g := ptr.Deref(got.Status.ObservedGeneration, 0); g != 1 {
		t.Errorf("the request's observed generation as its Eviction started: %d; want 1", g)
	}
	// Looked at again: nothing changed, nothing written.
	clear(writes)
	reconcileOnce(t, r)
	if len(writes) != 0 {
		t.Errorf("a second look wrote %v", writes)
	}
}

// TestGoneTargetLeftToTheGarbageCollector: once the pod is deleted, its Eviction, owned by
// requests that its pod owns, is left to the garbage collector with them: no TargetEvicted
// written to requests about to go, no delete sent beside the collector's. A request that its pod
// does not own (another requester's) learns TargetEvicted, and the Eviction, which says so too,
// is kept for it (as upstream's controller keeps it: the garbage collector takes it with the
// request).
func TestGoneTargetLeftToTheGarbageCollector(t *testing.T) {
	for _, owned := range []bool{true, false} {
		pod, req := askedPod()
		if !owned {
			req.OwnerReferences = nil
		}
		writes := map[string]int{}
		c := writesClient(t, writes, pod, req)
		reads := &countingReader{Reader: c}
		clock := clocktesting.NewFakePassiveClock(time.Now())
		r := &Reconciler{Client: c, APIReader: reads, Recorder: events.NewFakeRecorder(10), Name: "me", Clock: clock}
		reconcileOnce(t, r)
		if err := c.Delete(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		clear(writes)
		reconcileOnce(t, r)
		// Its active responder's grace since the controller saw the pod gone ran out.
		clock.SetTime(clock.Now().Add(evictiondecide.GracefulCompletionDelay))
		reconcileOnce(t, r)
		if reads.gets != 0 {
			// The controller made the pod's Eviction from the pod it read: the cache not
			// showing it any more means it is deleted.
			t.Errorf("the pod of its own Eviction read %d times from the API server once gone from the cache; want none", reads.gets)
		}

		var evs lifecyclev1alpha1.EvictionList
		if err := c.List(context.Background(), &evs); err != nil {
			t.Fatal(err)
		}
		got := &lifecyclev1alpha1.EvictionRequest{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(req), got); err != nil {
			t.Fatal(err)
		}
		evicted := false
		for _, cond := range got.Status.Conditions {
			evicted = evicted || cond.Type == string(lifecyclev1alpha1.EvictionConditionTargetEvicted) && cond.Status == metav1.ConditionTrue
		}
		switch {
		case owned && (len(writes) != 0 || len(evs.Items) != 1):
			t.Errorf("request owned by the pod: writes %v, %d Evictions left; want none written, the Eviction left to the garbage collector", writes, len(evs.Items))
		case !owned && (!evicted || len(evs.Items) != 1 || writes["delete evictions"] != 0 ||
			!meta.IsStatusConditionTrue(evs.Items[0].Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted))):
			t.Errorf("request not owned by the pod: TargetEvicted %t, writes %v, %d Evictions left; want TargetEvicted and the Eviction kept, saying so", evicted, writes, len(evs.Items))
		}
	}
}

// TestLooksOnlyAtWhatDecides: an Eviction whose responder only heartbeats or reports progress, and
// a pod whose marks, evacuation conditions or status reports change, bring no look; a completed
// turn, a state or condition change, the pod's deletion, phase, labels or readiness do.
func TestLooksOnlyAtWhatDecides(t *testing.T) {
	ev := &lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-1-web-1"},
		Status: lifecyclev1alpha1.EvictionStatus{
			TargetResponders: []lifecyclev1alpha1.TargetResponder{{Name: responder, State: lifecyclev1alpha1.ResponderStateActive}},
			Responders:       []lifecyclev1alpha1.ResponderStatus{{Name: responder, StartTime: ptr.To(metav1.Now())}},
		},
	}
	evChange := func(f func(*lifecyclev1alpha1.Eviction)) bool {
		n := ev.DeepCopy()
		f(n)
		return (&Reconciler{Name: "me"}).evictionDecides().Update(event.UpdateEvent{ObjectOld: ev, ObjectNew: n})
	}
	now := ptr.To(metav1.Now())
	for what, want := range map[string]bool{
		"heartbeat and progress": false, "completion": true, "state": true, "imperative evictor's message": true,
	} {
		got := evChange(func(n *lifecyclev1alpha1.Eviction) {
			switch what {
			case "heartbeat and progress":
				n.Status.Responders[0].HeartbeatTime, n.Status.Responders[0].Message, n.Status.Responders[0].ExpectedCompletionTime = now, ptr.To("moving"), now
			case "completion":
				n.Status.Responders[0].CompletionTime = now
			case "state":
				n.Status.TargetResponders[0].State = lifecyclev1alpha1.ResponderStateCanceled
			case "imperative evictor's message":
				n.Status.Responders = append(n.Status.Responders, lifecyclev1alpha1.ResponderStatus{Name: names.ImperativeEvictor, Message: ptr.To("evicting")})
			}
		})
		if got != want {
			t.Errorf("Eviction update, %s: looked %t; want %t", what, got, want)
		}
	}

	created := func(e *lifecyclev1alpha1.Eviction, initial bool) bool {
		return (&Reconciler{Name: "me"}).evictionDecides().Create(event.CreateEvent{Object: e, IsInInitialList: initial})
	}
	mine := ev.DeepCopy()
	mine.Labels = map[string]string{names.ControllerLabel: "me"}
	if created(mine, false) {
		t.Errorf("its own Eviction created: looked at; want not")
	}
	if !created(mine, true) {
		t.Errorf("its own Eviction in the initial list: not looked at; want looked at")
	}
	if !created(ev, false) {
		t.Errorf("another's Eviction created: not looked at; want looked at")
	}

	pod, _ := askedPod()
	podChange := func(f func(*corev1.Pod)) bool {
		n := pod.DeepCopy()
		f(n)
		return podDecides().Update(event.UpdateEvent{ObjectOld: pod, ObjectNew: n})
	}
	for what, want := range map[string]bool{
		"deletion cost": false, "conditions": false, "deleted": true, "phase": true, "labels": true, "ready": true,
	} {
		got := podChange(func(n *corev1.Pod) {
			switch what {
			case "deletion cost":
				n.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-1000"}
			case "conditions":
				n.Status.Conditions = append(n.Status.Conditions, corev1.PodCondition{Type: "EvacuationRequest", Status: corev1.ConditionTrue})
			case "deleted":
				n.DeletionTimestamp = now
			case "phase":
				n.Status.Phase = corev1.PodSucceeded
			case "labels":
				n.Labels = map[string]string{"app": "other"}
			case "ready":
				n.Status.Conditions = append(n.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse})
			}
		})
		if got != want {
			t.Errorf("pod update, %s: looked %t; want %t", what, got, want)
		}
	}
}

// countingReader counts the reads of the API server (Reconciler.APIReader).
type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestEventsOnlyOfStatusWritten: a decision's Events report the steps of the Eviction's status it
// writes; when that write fails (here: the Eviction is gone since the cache showed it), no Event
// says the step was taken, and the next decision reports it once it is written.
func TestEventsOnlyOfStatusWritten(t *testing.T) {
	ctx := context.Background()
	pod, _ := askedPod()
	ev := &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-1-web-1"},
		Spec: lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID}}}}
	for _, stored := range []bool{false, true} {
		var objs []client.Object
		if stored {
			objs = append(objs, ev.DeepCopy())
		}
		c := writesClient(t, map[string]int{}, objs...)
		seen := ev.DeepCopy()
		if stored {
			if err := c.Get(ctx, client.ObjectKeyFromObject(ev), seen); err != nil {
				t.Fatal(err)
			}
		}
		want := seen.DeepCopy()
		want.Status.TargetResponders = []lifecyclev1alpha1.TargetResponder{{Name: responder, Priority: ptr.To[int32](10000), State: lifecyclev1alpha1.ResponderStateCompleted}}
		d := evictiondecide.Decision{Status: []*lifecyclev1alpha1.Eviction{want},
			Events: []evictiondecide.Event{{Eviction: ev.Name, Reason: evictiondecide.ResponderCompleted, Responder: responder, ResponderMessage: "declined"}}}
		rec := events.NewFakeRecorder(10)
		r := &Reconciler{Client: c, Recorder: rec, Name: "me", Clock: clock.RealClock{}}
		_, _, _ = r.apply(ctx, evictiondecide.Observation{Namespace: "ns", Name: pod.Name, Evictions: []lifecyclev1alpha1.Eviction{*seen}}, d)
		if got := len(rec.Events); got != map[bool]int{false: 0, true: 1}[stored] {
			t.Errorf("status written %t: %d Events; want %d", stored, got, map[bool]int{false: 0, true: 1}[stored])
		}
	}
}
