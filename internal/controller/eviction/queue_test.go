package eviction

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/evictionbacklog"
)

// TestWaitingPodLookedAtFirst: in a large drain, with many pods already answered (their request
// and Eviction exist) churning in the queue (their requests, pods and Evictions change), a new
// request's pod, queued last, is the next one looked at: its look creates its Eviction and makes
// its first responder Active. That look requeues it at the default priority, so it does not stay
// ahead of the others.
func TestWaitingPodLookedAtFirst(t *testing.T) {
	ctx := context.Background()
	const answered = 50
	var objs []client.Object
	var churn []*lifecyclev1alpha1.EvictionRequest
	for i := range answered {
		pod, req := askedPod()
		pod.Name, pod.UID = fmt.Sprintf("old-%d", i), types.UID(fmt.Sprintf("uid-old-%d", i))
		req.Name, req.UID = "nodemaint-"+string(pod.UID), types.UID("req-"+string(pod.UID))
		req.Spec.Target.Pod.Name, req.Spec.Target.Pod.UID = pod.Name, pod.UID
		ev := &lifecyclev1alpha1.Eviction{}
		ev.Namespace, ev.Name = pod.Namespace, "pod-1-"+pod.Name
		ev.Spec.Target.Pod = &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID}
		objs = append(objs, pod, req, ev)
		churn = append(churn, req)
	}
	pod, req := askedPod()
	objs = append(objs, pod, req)
	c := writesClient(t, map[string]int{}, objs...)

	q := priorityqueue.New[reconcile.Request]("eviction-test")
	defer q.ShutDown()
	h := enqueue(c, requestTarget, func(types.NamespacedName) {})
	wq := &queue{q}
	for _, r := range churn {
		// An answered pod's request changes (its status written, a withdrawal...).
		n := r.DeepCopy()
		n.ResourceVersion = "changed"
		h.Update(ctx, event.UpdateEvent{ObjectOld: r, ObjectNew: n}, wq)
		// And its pod and its Eviction change: looks at the default priority, as
		// handler.EnqueueRequestsFromMapFunc queues them.
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.Target.Pod.Name}})
	}
	h.Create(ctx, event.CreateEvent{Object: req}, wq)
	if q.Len() != answered+1 {
		t.Fatalf("%d pods queued; want %d", q.Len(), answered+1)
	}
	first, priority, _ := q.GetWithPriority()
	if first.Name != pod.Name {
		t.Fatalf("looked first at %s (priority %d), behind the %d answered pods; want the waiting %s first", first.Name, priority, answered, pod.Name)
	}
	q.Done(first)

	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Name: "me", Clock: clock.RealClock{}}
	res, err := r.Reconcile(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	e, err := evictionOfIn(ctx, c, pod)
	if err != nil || e == nil || len(e.Status.TargetResponders) == 0 || e.Status.TargetResponders[0].State != lifecyclev1alpha1.ResponderStateActive {
		t.Fatalf("after its first look, the waiting pod's Eviction is %+v (%v); want created, %s Active", e, err, responder)
	}
	if res.Priority == nil || *res.Priority >= waitingPriority {
		t.Errorf("once its Eviction is created, the pod's requeue priority is %d (nil: kept); want below %d", ptr.Deref(res.Priority, -1), waitingPriority)
	}
	if waits(ctx, c, first.NamespacedName) {
		t.Errorf("the pod still waits once its Eviction exists")
	}
}

// queue is a priority queue as handler.Funcs sees it.
type queue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func evictionOfIn(ctx context.Context, c client.Reader, pod *corev1.Pod) (*lifecyclev1alpha1.Eviction, error) {
	var evs lifecyclev1alpha1.EvictionList
	if err := c.List(ctx, &evs, client.InNamespace(pod.Namespace), client.MatchingFields{targetIndex: pod.Namespace + "/" + pod.Name}); err != nil || len(evs.Items) == 0 {
		return nil, err
	}
	return &evs.Items[0], nil
}

// TestBacklogTold: a request's creation seen by the watch puts its target pod in the drain's
// backlog (the drain in this process creates no request beyond its room), and a look at a target
// takes it out, whatever the look found.
func TestBacklogTold(t *testing.T) {
	ctx := context.Background()
	pod, req := askedPod()
	c := writesClient(t, map[string]int{}, pod, req)
	backlog := evictionbacklog.New(1)
	q := priorityqueue.New[reconcile.Request]("eviction-backlog-test")
	defer q.ShutDown()
	enqueue(c, requestTarget, backlog.Arrived).Create(ctx, event.CreateEvent{Object: req}, &queue{q})
	other := types.NamespacedName{Namespace: pod.Namespace, Name: "other"}
	if backlog.Len() != 1 {
		t.Fatalf("%d targets wait after the request's creation; want 1", backlog.Len())
	}
	if n := backlog.Admit("node", []types.NamespacedName{other}); n != 0 {
		t.Fatalf("%d more admitted after the request's creation; want no room for another", n)
	}
	item, _, _ := q.GetWithPriority()
	q.Done(item)
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Name: "me", Backlog: backlog, Clock: clock.RealClock{}}
	if _, err := r.Reconcile(ctx, item); err != nil {
		t.Fatal(err)
	}
	if backlog.Len() != 0 {
		t.Fatalf("%d targets wait after the look at %s", backlog.Len(), item.Name)
	}
	// A look that finds nothing to do ends the wait too.
	backlog.Arrived(other)
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: other}); err != nil {
		t.Fatal(err)
	}
	if backlog.Len() != 0 {
		t.Fatalf("%d targets wait after the look at a target with nothing", backlog.Len())
	}
}
