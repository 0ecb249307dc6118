package deployment

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/ownwrites"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// activeEviction is the Eviction of pod with the Deployment responder Active since a minute,
// after a third-party responder of higher priority that completed, and before the imperative
// evictor.
func activeEviction(p *corev1.Pod) *lifecyclev1alpha1.Eviction {
	start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	return &lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "pod-1-" + p.Name, UID: types.UID("eviction-of-" + p.UID)},
		Spec:       lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: p.Name, UID: p.UID}}},
		Status: lifecyclev1alpha1.EvictionStatus{
			Requesters: []lifecyclev1alpha1.Requester{{Name: "nodemaint.dev/node-maintenance", Intent: lifecyclev1alpha1.RequesterIntentEviction}},
			TargetResponders: []lifecyclev1alpha1.TargetResponder{
				{Name: "example.com/checkpoint", Priority: ptr.To[int32](20000), State: lifecyclev1alpha1.ResponderStateCompleted},
				{Name: EvictionResponder, Priority: ptr.To[int32](10000), State: lifecyclev1alpha1.ResponderStateActive},
				{Name: lifecyclev1alpha1.EvictionResponderImperativeEviction, Priority: ptr.To[int32](100), State: lifecyclev1alpha1.ResponderStateInactive},
			},
			Responders: []lifecyclev1alpha1.ResponderStatus{
				{Name: "example.com/checkpoint", StartTime: &start, CompletionTime: &start, Message: ptr.To("checkpointed")},
				{Name: EvictionResponder, StartTime: &start},
			},
		},
	}
}

func evictionTestClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	byController := func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&corev1.Pod{}, &lifecyclev1alpha1.Eviction{}, &appsv1.Deployment{}).
		WithIndex(&corev1.Pod{}, controllerOwnerIndex, byController).
		WithIndex(&appsv1.ReplicaSet{}, controllerOwnerIndex, byController).
		WithIndex(&lifecyclev1alpha1.Eviction{}, evictionTargetIndex, evictionTarget).Build()
}

// TestEvictionResponder: the Deployment responder, Active on a pod's Eviction, surges as it does
// for the pod condition (the same decision), never answers on the pod's conditions, accepts with
// one write of the pod (its mark and the Eviction's UID) and writes the Eviction only at the
// heartbeat's cadence from its startTime, each heartbeat with the surge's progress and expected
// completion, or the pod's removal while it keeps its turn until the pod is gone; a Deployment
// that cannot surge declines by completing its turn at once.
func TestEvictionResponder(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, maxSurge int32) (client.Client, *Reconciler, *appsv1.Deployment, *corev1.Pod, *lifecyclev1alpha1.Eviction) {
		d := newDeployment(1, maxSurge)
		rs := replicaSet("rs", 1)
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}
		p := pod("web-1", onNode, func(p *corev1.Pod) { p.UID = "11111111-1111-1111-1111-111111111111" })
		ev := activeEviction(p)
		c := evictionTestClient(t, d, rs, p, ev)
		return c, &Reconciler{Client: c, Recorder: discard{}, EvictionResponder: EvictionResponder, Clock: clock.RealClock{}}, d, p, ev
	}
	reconcileOnce := func(t *testing.T, r *Reconciler, d *appsv1.Deployment) reconcile.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	get := func(t *testing.T, c client.Client, obj client.Object) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
	}
	mine := func(t *testing.T, c client.Client, ev *lifecyclev1alpha1.Eviction) lifecyclev1alpha1.ResponderStatus {
		t.Helper()
		get(t, c, ev)
		return evacuation.ResponderStatusOf(ev, EvictionResponder)
	}
	// heartbeatDue moves the responder's start and last heartbeat on the Eviction a heartbeat
	// interval back, as time passing would.
	heartbeatDue := func(t *testing.T, c client.Client, ev *lifecyclev1alpha1.Eviction) {
		t.Helper()
		get(t, c, ev)
		back := func(t *metav1.Time) *metav1.Time {
			if t == nil {
				return nil
			}
			return ptr.To(metav1.NewTime(t.Add(-evacuation.HeartbeatInterval - time.Second)))
		}
		for i := range ev.Status.Responders {
			if rs := &ev.Status.Responders[i]; rs.Name == EvictionResponder {
				rs.StartTime, rs.HeartbeatTime = back(rs.StartTime), back(rs.HeartbeatTime)
			}
		}
		if err := c.Status().Update(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	podUntouched := func(t *testing.T, c client.Client, p *corev1.Pod) {
		t.Helper()
		get(t, c, p)
		if c := evacuation.Condition(p, evacuation.Request); c != nil {
			t.Errorf("the pod got a %s condition: %+v; want none", evacuation.Request, c)
		}
		if c := evacuation.Condition(p, evacuation.Initiated); c != nil {
			t.Errorf("the pod got a %s condition: %+v; want none", evacuation.Initiated, c)
		}
	}

	t.Run("surges, reports, completes", func(t *testing.T) {
		c, r, d, p, ev := setup(t, 1)
		reconcileOnce(t, r, d)
		get(t, c, d)
		if *d.Spec.Replicas != 2 {
			t.Fatalf("replicas %d; want a surge to 2", *d.Spec.Replicas)
		}
		if d.Annotations[evacuation.SurgeAnnotation] == "" {
			t.Fatalf("no surge record; want one")
		}
		// Accepted on the pod, the Eviction's first write is its first heartbeat.
		s := mine(t, c, ev)
		if s.HeartbeatTime != nil {
			t.Errorf("after the first look, the responder's heartbeat is %v; want none", s.HeartbeatTime)
		}
		if s.Message != nil {
			t.Errorf("after the first look, the responder's message is %q; want none", *s.Message)
		}
		if s.CompletionTime != nil {
			t.Fatalf("after the first look, the responder's completion is %v; want none", s.CompletionTime)
		}
		get(t, c, p)
		if !marks.IsMarked(p) {
			t.Errorf("the evacuated pod's annotations %v; want it marked to go first", p.Annotations)
		}
		if got := p.Annotations[evacuation.AcceptedEvictionAnnotation]; got != string(ev.UID) {
			t.Errorf("the evacuated pod's %s is %q; want %s", evacuation.AcceptedEvictionAnnotation, got, ev.UID)
		}
		podUntouched(t, c, p)

		// Accepted: the next look writes nothing, on the Eviction or the pod (the acceptance
		// stands for the move), and looks again by the first heartbeat.
		rv, podRV := ev.ResourceVersion, p.ResourceVersion
		res := reconcileOnce(t, r, d)
		if get(t, c, ev); ev.ResourceVersion != rv {
			t.Errorf("the Eviction was written before its first heartbeat was due: %+v", evacuation.ResponderStatusOf(ev, EvictionResponder))
		}
		if get(t, c, p); p.ResourceVersion != podRV {
			t.Errorf("the pod was written again: %v", p.Annotations)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > evacuation.HeartbeatInterval {
			t.Errorf("RequeueAfter = %v; want at most the heartbeat interval %v", res.RequeueAfter, evacuation.HeartbeatInterval)
		}
		// The heartbeat due: it reports the surge's progress with the expected completion.
		heartbeatDue(t, c, ev)
		reconcileOnce(t, r, d)
		s = mine(t, c, ev)
		if got := ptr.Deref(evacuation.ResponderStatusOf(ev, "example.com/checkpoint").Message, "<nil>"); got != "checkpointed" {
			t.Errorf("the other responder's message changed: %q; want checkpointed", got)
		}
		if s.HeartbeatTime == nil {
			t.Errorf("heartbeat: no heartbeat time; want one")
		}
		if s.ExpectedCompletionTime == nil || !s.ExpectedCompletionTime.After(time.Now()) {
			t.Errorf("heartbeat: expected completion %v; want one ahead", s.ExpectedCompletionTime)
		}
		if got, want := ptr.Deref(s.Message, ""), "surged from 1 to 2 replicas: the pod goes once the replacements are available"; !strings.Contains(got, want) {
			t.Fatalf("heartbeat: message %q; want the surge, %q", got, want)
		}

		// The replacement is available: the Deployment scales back; the ReplicaSet removes the
		// marked pod; the responder then completes its turn.
		get(t, c, d)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2}
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
		replacement := pod("web-2", onNode, func(p *corev1.Pod) { p.UID = "22222222-2222-2222-2222-222222222222" })
		if err := c.Create(ctx, replacement); err != nil {
			t.Fatal(err)
		}
		reconcileOnce(t, r, d)
		get(t, c, d)
		if *d.Spec.Replicas != 1 {
			t.Fatalf("after the replacement is available: replicas %d; want back to 1", *d.Spec.Replicas)
		}
		if rec := d.Annotations[evacuation.SurgeAnnotation]; rec != "" {
			t.Fatalf("after the replacement is available: surge record %q; want none", rec)
		}
		if s := mine(t, c, ev); s.CompletionTime != nil {
			t.Fatalf("completed its turn: %+v", s)
		}
		get(t, c, p)
		p.Finalizers = []string{"example.com/hold"}
		if err := c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		get(t, c, ev)
		rv = ev.ResourceVersion
		reconcileOnce(t, r, d)
		s = mine(t, c, ev)
		if ev.ResourceVersion != rv {
			t.Fatalf("the pod being removed, before the heartbeat is due: the Eviction written (%+v); want nothing written", s)
		}
		if s.CompletionTime != nil {
			t.Fatalf("the pod being removed, before the heartbeat is due: completion %v; want its turn kept", s.CompletionTime)
		}
		heartbeatDue(t, c, ev)
		reconcileOnce(t, r, d)
		// The fake API server sets the deletionTimestamp at the delete: by the heartbeat it has
		// passed, so no expected completion (the Eviction API refuses one in the past).
		s = mine(t, c, ev)
		if s.CompletionTime != nil {
			t.Errorf("the pod being removed, at the heartbeat: completion %v; want its turn kept (the pod's end completes it)", s.CompletionTime)
		}
		if got := ptr.Deref(s.Message, ""); !strings.Contains(got, "replaced the pod") {
			t.Errorf("the pod being removed, at the heartbeat: message %q; want the removal reported", got)
		}
		if s.ExpectedCompletionTime != nil {
			t.Errorf("the pod being removed, at the heartbeat: expected completion %v; want none (its deletionTimestamp has passed)", s.ExpectedCompletionTime)
		}
		podUntouched(t, c, p)
	})

	t.Run("a pod waiting for its wave: its first heartbeat says its acceptance", func(t *testing.T) {
		d := newDeployment(2, 1)
		rs := replicaSet("rs", 2)
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}
		p1 := pod("web-1", onNode, func(p *corev1.Pod) { p.UID = "11111111-1111-1111-1111-111111111111" })
		p2 := pod("web-2", onNode, func(p *corev1.Pod) { p.UID = "22222222-2222-2222-2222-222222222222" })
		ev1, ev2 := activeEviction(p1), activeEviction(p2)
		c := evictionTestClient(t, d, rs, p1, p2, ev1, ev2)
		r := &Reconciler{Client: c, Recorder: discard{}, EvictionResponder: EvictionResponder, Clock: clock.RealClock{}}
		reconcileOnce(t, r, d)
		heartbeatDue(t, c, ev1)
		heartbeatDue(t, c, ev2)
		reconcileOnce(t, r, d)
		var messages []string
		for _, ev := range []*lifecyclev1alpha1.Eviction{ev1, ev2} {
			s := mine(t, c, ev)
			if s.HeartbeatTime == nil {
				t.Fatalf("%s at its first heartbeat: %+v; want a heartbeat time", ev.Name, s)
			}
			if s.Message == nil {
				t.Fatalf("%s at its first heartbeat: %+v; want a message", ev.Name, s)
			}
			messages = append(messages, *s.Message)
		}
		slices.Sort(messages)
		want := []string{
			surgepolicy.ReasonSurge + ": Deployment " + d.Name + " surged from 2 to 3 replicas: the pod goes once the replacements are available",
			surgepolicy.ReasonSurge + ": Deployment " + d.Name + " surges a replacement before the pod is removed",
		}
		if !slices.Equal(messages, want) {
			t.Errorf("the first heartbeats say %q; want the wave's surge for one and the acceptance for the other, %q", messages, want)
		}
	})

	t.Run("canceled: the mark and the record of the acceptance go", func(t *testing.T) {
		c, r, d, p, ev := setup(t, 1)
		reconcileOnce(t, r, d)
		get(t, c, p)
		if p.Annotations[evacuation.AcceptedEvictionAnnotation] != string(ev.UID) {
			t.Fatalf("not accepted on the pod: %v", p.Annotations)
		}
		get(t, c, ev)
		ev.Status.TargetResponders[1].State = lifecyclev1alpha1.ResponderStateCanceled
		if err := c.Status().Update(ctx, ev); err != nil {
			t.Fatal(err)
		}
		for range 3 { // the rollback's scale-back, then the marks
			reconcileOnce(t, r, d)
		}
		get(t, c, p)
		if cost, marked := p.Annotations[evacuation.OriginalDeletionCostAnnotation]; marked {
			t.Errorf("the pod's %s after the cancellation: %q; want the mark gone", evacuation.OriginalDeletionCostAnnotation, cost)
		}
		if got := p.Annotations[evacuation.AcceptedEvictionAnnotation]; got != "" {
			t.Errorf("the pod's %s after the cancellation: %q; want none", evacuation.AcceptedEvictionAnnotation, got)
		}
	})

	t.Run("declines by completing its turn", func(t *testing.T) {
		c, r, d, p, ev := setup(t, 0)
		reconcileOnce(t, r, d)
		s := mine(t, c, ev)
		if s.CompletionTime == nil {
			t.Errorf("responder entry %+v; want completed (declined)", s)
		}
		if got := ptr.Deref(s.Message, ""); !strings.Contains(got, surgepolicy.ReasonMaxSurgeZero) {
			t.Fatalf("responder message %q; want %s", got, surgepolicy.ReasonMaxSurgeZero)
		}
		get(t, c, d)
		if *d.Spec.Replicas != 1 {
			t.Errorf("replicas %d; want 1 (no surge)", *d.Spec.Replicas)
		}
		podUntouched(t, c, p)
		// Declined: the request is no longer the responder's; nothing more is written.
		rv := ev.ResourceVersion
		reconcileOnce(t, r, d)
		if get(t, c, ev); ev.ResourceVersion != rv {
			t.Errorf("the Eviction was written again after the decline")
		}
	})

	t.Run("not active: left alone", func(t *testing.T) {
		c, r, d, p, ev := setup(t, 1)
		ev.Status.TargetResponders[1].State = lifecyclev1alpha1.ResponderStateInactive
		if err := c.Status().Update(ctx, ev); err != nil {
			t.Fatal(err)
		}
		reconcileOnce(t, r, d)
		get(t, c, d)
		s := mine(t, c, ev)
		if *d.Spec.Replicas != 1 {
			t.Errorf("inactive: replicas %d; want 1, nothing done", *d.Spec.Replicas)
		}
		if s.HeartbeatTime != nil {
			t.Errorf("inactive: entry %+v; want no heartbeat, nothing done", s)
		}
		podUntouched(t, c, p)
	})
}

// TestEvictionWritesRemembered: what the responder wrote on an Eviction is what its next look
// reads until the cache shows the write, so that a look in between (another pod's event) does
// not write it again.
func TestEvictionWritesRemembered(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "web-1-uid"}}
	c := evictionTestClient(t, pod, activeEviction(pod))
	r := &Reconciler{Client: c, EvictionResponder: EvictionResponder, evictionWrites: ownwrites.New[*lifecyclev1alpha1.Eviction](nil), Clock: clock.RealClock{}}
	cached := &lifecyclev1alpha1.Eviction{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(activeEviction(pod)), cached); err != nil {
		t.Fatal(err)
	}
	if err := evacuation.ForEviction(cached, pod, EvictionResponder).Accept(ctx, r.evictionClient(), evacuation.Progress{Reason: surgepolicy.ReasonSurge, Message: "accepted"}); err != nil {
		t.Fatal(err)
	}
	if evacuation.ForEviction(cached, pod, EvictionResponder).Accepted() {
		t.Fatal("the cached Eviction shows the acceptance already; the test needs it stale")
	}
	if fresh := r.evictionWrites.Fresh(cached); !evacuation.ForEviction(fresh, pod, EvictionResponder).Accepted() {
		t.Errorf("a look before the cache shows the acceptance reads it unaccepted: it would accept again")
	}
	current := &lifecyclev1alpha1.Eviction{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cached), current); err != nil {
		t.Fatal(err)
	}
	if fresh := r.evictionWrites.Fresh(current); fresh != current {
		t.Errorf("once the cache shows the write, a look reads the cache's Eviction")
	}
	if r.evictionWrites.Len() != 0 {
		t.Errorf("the write is still remembered once the cache showed it")
	}
}
