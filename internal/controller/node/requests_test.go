package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/evictionbacklog"
	"github.com/nodemaint/nodemaint/internal/requester"
)

// TestRequestDeletedOnce: a reconcile that decides again, from a cache that still shows an
// EvictionRequest it deleted, to delete it does not send the deletion twice; one that decides
// again, from a cache that does not show a request it created yet, to create it does not send the
// creation twice; and once the request is deleted, its pod may be asked again.
func TestRequestDeletedOnce(t *testing.T) {
	var deletes, creates atomic.Int32
	c := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			deletes.Add(1)
			return nil
		},
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			creates.Add(1)
			return nil
		},
	})
	req := lifecyclev1alpha1.EvictionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nodemaint-a", UID: "req-a"},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{Target: lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: "a", UID: "a"}}}}
	seen := &requester.Observed{Node: "n", Requests: []lifecyclev1alpha1.EvictionRequest{req}}
	r := &Reconciler{Client: c, Observer: &observe.Observer{}}
	for range 2 {
		if err := r.writeRequests(context.Background(), requester.Writes{Delete: []*lifecyclev1alpha1.EvictionRequest{&seen.Requests[0]}}, seen, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := deletes.Load(); n != 1 {
		t.Fatalf("%d deletions sent; want 1", n)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "b"}, Spec: corev1.PodSpec{
		EvictionResponders: []corev1.EvictionResponder{{Name: "owner.example.com/r"}}}}
	ownedByReplicaSet(pod)
	plan := requester.WritesOf(requester.Observed{Node: "n"}, []*corev1.Pod{pod}, []*corev1.Pod{pod}, nil, "r", time.Now())
	for range 2 {
		if err := r.writeRequests(context.Background(), plan, &requester.Observed{Node: "n"}, []*corev1.Pod{pod}); err != nil {
			t.Fatal(err)
		}
	}
	if n := creates.Load(); n != 1 {
		t.Fatalf("%d creations sent; want 1", n)
	}
	made := *plan.Create[0]
	made.UID = "req-b"
	if err := r.writeRequests(context.Background(), requester.Writes{Delete: []*lifecyclev1alpha1.EvictionRequest{&made}},
		&requester.Observed{Node: "n", Requests: []lifecyclev1alpha1.EvictionRequest{made}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.writeRequests(context.Background(), plan, &requester.Observed{Node: "n"}, []*corev1.Pod{pod}); err != nil {
		t.Fatal(err)
	}
	if n := creates.Load(); n != 2 {
		t.Fatalf("%d creations sent after the request's deletion; want 2", n)
	}
}

// TestRequestsPacedByBacklog: the drain creates EvictionRequests only while the Eviction
// controller's backlog has room, in the plan's order; a look of the controller at a target makes
// room for the next request, and a creation the API server refuses gives its room back. A node
// whose requests found no room is woken when there is, and its next reconcile creates them.
func TestRequestsPacedByBacklog(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string
	)
	refuse := "p1"
	c := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, o client.Object, _ ...client.CreateOption) error {
			pod := o.(*lifecyclev1alpha1.EvictionRequest).Spec.Target.Pod.Name
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, pod)
			if pod == refuse {
				return apierrors.NewForbidden(lifecyclev1alpha1.Resource("evictionrequests"), o.GetName(), errors.New("denied by a webhook"))
			}
			return nil
		},
	})
	var pods []*corev1.Pod
	for i := range 5 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: corev1.PodSpec{EvictionResponders: []corev1.EvictionResponder{{Name: "owner.example.com/r"}}}}
		ownedByReplicaSet(pod)
		pods = append(pods, pod)
	}
	backlog := evictionbacklog.New(2)
	r := &Reconciler{Client: c, Backlog: backlog, Observer: &observe.Observer{}}
	write := func() error {
		plan := requester.WritesOf(requester.Observed{Node: "n"}, pods, pods, nil, "r", time.Now())
		if len(plan.Create) != len(pods) {
			t.Fatalf("the plan creates %d requests; want %d", len(plan.Create), len(pods))
		}
		return r.writeRequests(context.Background(), plan, &requester.Observed{Node: "n"}, pods)
	}
	if err := write(); err == nil {
		t.Fatal("the refused creation is not an error")
	}
	if !slices.Equal(sent, []string{"p0", "p1"}) && !slices.Equal(sent, []string{"p1", "p0"}) {
		t.Fatalf("sent the creations of %v with room for 2; want p0 and p1", sent)
	}
	if backlog.Len() != 1 {
		t.Fatalf("%d targets wait; want 1 (p0; p1's creation was refused)", backlog.Len())
	}
	refuse = ""
	sent = nil
	_ = write()
	if !slices.Equal(sent, []string{"p1"}) {
		t.Fatalf("sent %v with p0 waiting and room for 1; want p1 again", sent)
	}
	sent = nil
	_ = write()
	if len(sent) != 0 {
		t.Errorf("sent %v with the backlog full; want none sent", sent)
	}
	if !backlog.Queued("n") {
		t.Errorf("with the backlog full, the node is not queued for room; want it queued")
	}
	if t.Failed() {
		t.FailNow()
	}
	backlog.Done(types.NamespacedName{Namespace: "ns", Name: "p0"})
	select {
	case e := <-backlog.Wake():
		if e.Object.GetName() != "n" {
			t.Fatalf("woke %s for the room; want n", e.Object.GetName())
		}
	default:
		t.Fatal("the node is not woken when the controller's look makes room")
	}
	sent = nil
	_ = write()
	if !slices.Equal(sent, []string{"p2"}) {
		t.Fatalf("sent %v after the controller looked at p0; want p2 (p0 and p1 created already)", sent)
	}
}
