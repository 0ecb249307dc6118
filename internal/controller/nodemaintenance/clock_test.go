package nodemaintenance

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/observe/observetest"
	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

// clockedReconciler is the NodeMaintenance reconciler as setup.Controllers makes it, its Observer
// on a clock the test steps (observetest.Clocked), on an API server of its own: the test calls
// Reconcile itself. It returns the reconciler and a client of the API server.
func clockedReconciler(t *testing.T, clk *clocktesting.FakePassiveClock) (*Reconciler, client.Client) {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	obs, mgr := observetest.Clocked(t, env.Config, clk)
	return &Reconciler{Client: mgr.GetClient(), Recorder: events.NewFakeRecorder(100), Observer: obs}, env.Client
}

// TestDrainTimeoutByTheClock: a maintenance's DrainTimedOut condition turns True exactly at
// drainTimeout from its status.drainStartTime, on the clock the reconciler is given. Reconcile is
// called by the test at instants it sets: the drain starts at the first, the condition is False a
// second before the timeout and True at it, while a pod is left on the node.
func TestDrainTimeoutByTheClock(t *testing.T) {
	ctx := t.Context()
	start := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakePassiveClock(start)
	r, k8s := clockedReconciler(t, clk)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "clocked-node"}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	testutil.CreatePod(t, k8s, "clocked-left", node.Name)
	const timeout = 5 * time.Minute
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "clocked"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(node.Name), Cordon: true, Drain: true, Reason: "clock",
			DrainTimeout: &nodemaintv1alpha1.Duration{Duration: timeout},
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: nm.Name}}
	// reconcileAt reconciles at the instant until the cache shows the status the reconcile
	// decided (a reconcile that meets a stale cache writes nothing) and returns it.
	reconcileAt := func(at time.Time, what string, done func(nodemaintv1alpha1.NodeMaintenanceStatus) bool) nodemaintv1alpha1.NodeMaintenanceStatus {
		t.Helper()
		clk.SetTime(at)
		var status nodemaintv1alpha1.NodeMaintenanceStatus
		testutil.Eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, string, error) {
			if _, err := r.Reconcile(ctx, req); err != nil {
				return false, "", err
			}
			cached := &nodemaintv1alpha1.NodeMaintenance{}
			if err := r.Client.Get(ctx, req.NamespacedName, cached); err != nil {
				return false, "", err
			}
			status = cached.Status
			return done(status), fmt.Sprintf("status %+v", status), nil
		})
		return status
	}
	timedOut := func(s nodemaintv1alpha1.NodeMaintenanceStatus) *metav1.Condition {
		return meta.FindStatusCondition(s.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut)
	}
	observed := func(s nodemaintv1alpha1.NodeMaintenanceStatus) bool {
		return s.DrainStartTime != nil && timedOut(s) != nil
	}

	status := reconcileAt(start, "the drain's start in the status", observed)
	if got := status.DrainStartTime.Time; !got.Equal(start) {
		t.Fatalf("drainStartTime %v; want the test's start, %v", got, start)
	}
	if c := timedOut(status); c.Status != metav1.ConditionFalse {
		t.Errorf("at the drain's start, DrainTimedOut is %s (%s); want False", c.Status, c.Message)
	}

	// The cache shows the last status written: this reconcile decides from the maintenance as it
	// is, and writes what it decides (nothing, when that is the status it has).
	clk.SetTime(start.Add(timeout - time.Second))
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	stored := &nodemaintv1alpha1.NodeMaintenance{}
	if err := k8s.Get(ctx, req.NamespacedName, stored); err != nil {
		t.Fatal(err)
	}
	if c := timedOut(stored.Status); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("a second before the drain timeout, DrainTimedOut is %+v; want False", c)
	}

	reconcileAt(start.Add(timeout), "DrainTimedOut True at the drain timeout", func(s nodemaintv1alpha1.NodeMaintenanceStatus) bool {
		return observed(s) && timedOut(s).Status == metav1.ConditionTrue
	})
}
