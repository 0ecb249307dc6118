package eviction

import (
	"context"
	"testing"
	"time"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// stateOf is the state of the responder named in the pod's one Eviction.
func stateOf(t *testing.T, c client.Client, name string) lifecyclev1alpha1.ResponderStateType {
	t.Helper()
	var evs lifecyclev1alpha1.EvictionList
	if err := c.List(context.Background(), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 {
		t.Fatalf("%d Evictions; want one", len(evs.Items))
	}
	for _, r := range evs.Items[0].Status.TargetResponders {
		if r.Name == name {
			return r.State
		}
	}
	t.Fatalf("no responder %s in %+v", name, evs.Items[0].Status.TargetResponders)
	return ""
}

// TestHeartbeatDeadlineByTheClock: a responder that never heartbeats after it was made Active is
// passed over (Interrupted) exactly at the KEP's heartbeat deadline from its start, on the clock
// the reconciler is given: Active a second before, Interrupted at the deadline. (The API server
// enforces the same deadline by its own clock: TestSilentResponderPassedOver takes the real 20
// minutes with NODEMAINT_SLOW_TESTS=1.)
func TestHeartbeatDeadlineByTheClock(t *testing.T) {
	pod, req := askedPod()
	c := writesClient(t, map[string]int{}, pod, req)
	start := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakePassiveClock(start)
	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), Name: "me", Clock: clk}
	res, err := r.Reconcile(context.Background(), reconcileRequest())
	if err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, c, responder); got != lifecyclev1alpha1.ResponderStateActive {
		t.Fatalf("at the start, %s is %s; want Active", responder, got)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > names.HeartbeatDeadline {
		t.Errorf("the reconcile of the active responder looks again after %v; want by its heartbeat deadline, %v", res.RequeueAfter, names.HeartbeatDeadline)
	}

	clk.SetTime(start.Add(names.HeartbeatDeadline - time.Second))
	reconcileOnce(t, r)
	if got := stateOf(t, c, responder); got != lifecyclev1alpha1.ResponderStateActive {
		t.Errorf("a second before its heartbeat deadline, %s is %s; want Active", responder, got)
	}

	clk.SetTime(start.Add(names.HeartbeatDeadline))
	reconcileOnce(t, r)
	if got := stateOf(t, c, responder); got != lifecyclev1alpha1.ResponderStateInterrupted {
		t.Errorf("at its heartbeat deadline, %s is %s; want Interrupted", responder, got)
	}
}

// TestGracefulCompletionByTheClock: once the pod is gone, its active responder has
// evictiondecide.GracefulCompletionDelay from when the controller saw it gone to report its
// completion: Active a moment before, Interrupted at it. The request is another requester's (not
// owned by the pod), so the Eviction stays to say so.
func TestGracefulCompletionByTheClock(t *testing.T) {
	pod, req := askedPod()
	req.OwnerReferences = nil
	c := writesClient(t, map[string]int{}, pod, req)
	start := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakePassiveClock(start)
	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), Name: "me", Clock: clk}
	reconcileOnce(t, r)
	if err := c.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	gone := start.Add(time.Minute)
	clk.SetTime(gone)
	// The look that sees the pod gone starts the grace.
	reconcileOnce(t, r)
	if got := stateOf(t, c, responder); got != lifecyclev1alpha1.ResponderStateActive {
		t.Fatalf("as the pod is seen gone, %s is %s; want Active", responder, got)
	}

	clk.SetTime(gone.Add(evictiondecide.GracefulCompletionDelay - time.Millisecond))
	reconcileOnce(t, r)
	if got := stateOf(t, c, responder); got != lifecyclev1alpha1.ResponderStateActive {
		t.Errorf("a moment before its grace ran out, %s is %s; want Active", responder, got)
	}

	clk.SetTime(gone.Add(evictiondecide.GracefulCompletionDelay))
	reconcileOnce(t, r)
	if got := stateOf(t, c, responder); got != lifecyclev1alpha1.ResponderStateInterrupted {
		t.Errorf("at the end of its grace, %s is %s; want Interrupted", responder, got)
	}
}
