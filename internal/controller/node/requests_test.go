package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodemaint/nodemaint/internal/evictionrequest"
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
	seen := &evictionrequest.Observed{Node: "n", Requests: []lifecyclev1alpha1.EvictionRequest{req}}
	r := &Reconciler{Client: c}
	for range 2 {
		if err := r.writeRequests(context.Background(), evictionrequest.Plan{Delete: []*lifecyclev1alpha1.EvictionRequest{&seen.Requests[0]}}, seen, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := deletes.Load(); n != 1 {
		t.Fatalf("%d deletions sent; want 1", n)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "b"}, Spec: corev1.PodSpec{
		EvictionResponders: []corev1.EvictionResponder{{Name: "owner.example.com/r"}}}}
	ownedByReplicaSet(pod)
	plan := evictionrequest.Decide(evictionrequest.Observed{Node: "n"}, []*corev1.Pod{pod}, []*corev1.Pod{pod}, nil, "r", time.Now())
	for range 2 {
		if err := r.writeRequests(context.Background(), plan, &evictionrequest.Observed{Node: "n"}, []*corev1.Pod{pod}); err != nil {
			t.Fatal(err)
		}
	}
	if n := creates.Load(); n != 1 {
		t.Fatalf("%d creations sent; want 1", n)
	}
	made := *plan.Create[0]
	made.UID = "req-b"
	if err := r.writeRequests(context.Background(), evictionrequest.Plan{Delete: []*lifecyclev1alpha1.EvictionRequest{&made}},
		&evictionrequest.Observed{Node: "n", Requests: []lifecyclev1alpha1.EvictionRequest{made}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.writeRequests(context.Background(), plan, &evictionrequest.Observed{Node: "n"}, []*corev1.Pod{pod}); err != nil {
		t.Fatal(err)
	}
	if n := creates.Load(); n != 2 {
		t.Fatalf("%d creations sent after the request's deletion; want 2", n)
	}
}
