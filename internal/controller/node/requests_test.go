package node

import (
	"context"
	"sync/atomic"
	"testing"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodemaint/nodemaint/internal/evictionrequest"
)

// TestRequestDeletedOnce: a reconcile that decides again, from a cache that still shows an
// EvictionRequest it deleted, to delete it does not send the deletion twice.
func TestRequestDeletedOnce(t *testing.T) {
	var deletes atomic.Int32
	c := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
		deletes.Add(1)
		return nil
	}})
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
}
