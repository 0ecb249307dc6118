package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Fifty Planning maintenances computing their preflight at once read the cluster once, not fifty
// times; a look past preflightShare reads it again.
func TestPreflightReadsShared(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := nodemaintv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var lists atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists.Add(1)
			return c.List(ctx, list, opts...)
		},
	}).Build()
	var reads preflightReads
	now := time.Now()
	done := make(chan error)
	for range 50 {
		go func() {
			_, err := reads.read(context.Background(), c, now, false)
			done <- err
		}()
	}
	for range 50 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	once := lists.Load()
	if once == 0 || once > 11 {
		t.Fatalf("50 preflights listed %d times, want one read (11 lists)", once)
	}
	if _, err := reads.read(context.Background(), c, now.Add(preflightShare), false); err != nil {
		t.Fatal(err)
	}
	if lists.Load() != 2*once {
		t.Errorf("a preflight past preflightShare listed %d times in all, want a second read (%d)", lists.Load(), 2*once)
	}
	// A maintenance's first preflight reads anew, however recent the last read.
	if _, err := reads.read(context.Background(), c, now.Add(preflightShare), true); err != nil {
		t.Fatal(err)
	}
	if lists.Load() != 3*once {
		t.Errorf("a first preflight listed %d times in all, want a third read (%d)", lists.Load(), 3*once)
	}
}
