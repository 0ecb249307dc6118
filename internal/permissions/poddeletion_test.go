package permissions

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// reviewer answers SelfSubjectAccessReviews for delete pods with allowed, and says each on asked.
func reviewer(allowed *atomic.Bool, asked chan<- struct{}) client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			r := obj.(*authorizationv1.SelfSubjectAccessReview)
			if a := r.Spec.ResourceAttributes; a == nil || a.Verb != "delete" || a.Resource != "pods" || a.Group != "" || a.Namespace != "" {
				panic("not a review of delete pods in every namespace")
			}
			r.Status.Allowed = allowed.Load()
			select {
			case asked <- struct{}{}:
			default:
			}
			return nil
		},
	}).Build()
}

// TestPodDeletion: the answer follows the API server's, the subscribers hear of each change and
// only of changes, and a forbidden deletion has the question asked again at once, not after the
// interval.
func TestPodDeletion(t *testing.T) {
	var allowed atomic.Bool
	asked := make(chan struct{}, 1)
	var nilChecker *PodDeletion
	if nilChecker.Denied() {
		t.Fatal("a nil PodDeletion denies")
	}
	nilChecker.Forbidden() // does nothing

	p := &PodDeletion{Client: reviewer(&allowed, asked), Interval: time.Hour}
	changes := p.Changes()
	if p.Denied() {
		t.Fatal("denied before any answer")
	}
	if err := p.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-asked
	if !p.Denied() {
		t.Fatal("allowed; the API server said denied")
	}
	select {
	case <-changes:
	default:
		t.Fatal("no change event for the first answer")
	}
	if err := p.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-asked
	select {
	case <-changes:
		t.Fatal("a change event without a change")
	default:
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()
	<-asked // Start asks at once
	allowed.Store(true)
	p.Forbidden()
	// The interval is an hour: only Forbidden can bring the next question before the test's
	// deadline.
	select {
	case <-changes:
	case <-t.Context().Done():
		t.Fatal("the permission granted, no change event after Forbidden")
	}
	if p.Denied() {
		t.Error("still denied after the permission was granted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}
