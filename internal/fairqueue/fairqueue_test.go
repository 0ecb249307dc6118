package fairqueue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodemaint/nodemaint/internal/fairqueue"
)

// A key that gets an event during each of its reconciles (a node whose pods keep changing) must
// not keep the keys of the initial list (the other nodes of the maintenance) from their turn.
func TestNoStarvation(t *testing.T) {
	const cold = 20
	hot := reconcile.Request{NamespacedName: types.NamespacedName{Name: "hot"}}
	var (
		mu    sync.Mutex
		queue workqueue.TypedRateLimitingInterface[reconcile.Request]
		seen  = map[string]bool{}
		done  = make(chan struct{})
	)
	opts := fairqueue.Options(1)
	opts.SkipNameValidation = ptr.To(true)
	opts.Reconciler = reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if req == hot {
			queue.Add(hot) // an event about it while it is reconciled
			return reconcile.Result{}, nil
		}
		seen[req.Name] = true
		if len(seen) == cold {
			close(done)
		}
		return reconcile.Result{}, nil
	})
	c, err := controller.NewUnmanaged("fairness", opts)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		mu.Lock()
		defer mu.Unlock()
		queue = q
		for i := range cold {
			req := reconcile.Request{NamespacedName: types.NamespacedName{Name: fmt.Sprintf("node-%d", i)}}
			if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
				// What an object of the initial list gets from controller-runtime's handlers.
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
			} else {
				q.Add(req)
			}
		}
		q.Add(hot)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d keys reconciled in 10s while one key had an event in each of its reconciles", len(seen), cold)
	}
}
