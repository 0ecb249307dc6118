package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/observe/observetest"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// clockedReconciler is the node reconciler as setup.Controllers makes it, its Observer on a
// clock the test steps (observetest.Clocked): the test calls Reconcile itself.
func clockedReconciler(t *testing.T, clk *clocktesting.FakePassiveClock) *Reconciler {
	t.Helper()
	obs, mgr := observetest.Clocked(t, cfg, clk)
	return &Reconciler{Client: mgr.GetClient(), APIReader: k8s, Recorder: events.NewFakeRecorder(100), Observer: obs}
}

// TestReconcileByTheClock: the response timeout of a pod nobody answers for runs on the clock
// the reconciler is given, not the wall's. Reconcile is called by the test at instants it sets:
// the pod is asked, not evicted a second before its timeout, and evicted at it.
func TestReconcileByTheClock(t *testing.T) {
	ctx := t.Context()
	start := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakePassiveClock(start)
	r := clockedReconciler(t, clk)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "clocked-node"}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	pod := createPod(t, "clocked-bare", node.Name)
	const timeout = 30 * time.Second
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "clocked"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(node.Name), Cordon: true, Drain: true, Reason: "clock",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: timeout},
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}}

	// Cordoned, then asked: each reconcile decides from what the cache shows of the last.
	eventually(t, "the pod asked to move at the test's start", func(ctx context.Context) (bool, string, error) {
		if _, err := r.Reconcile(ctx, req); err != nil {
			return false, "", err
		}
		cached := &corev1.Pod{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, cached); err != nil {
			return false, "", err
		}
		c := evacuation.Condition(cached, evacuation.Request)
		return c != nil && c.LastTransitionTime.Time.Equal(start), fmt.Sprintf("request %+v", c), nil
	})
	// Asked, the pod waits: the reconcile looks again at the response timeout's end.
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > timeout+time.Second {
		t.Errorf("a reconcile of the asked pod looks again after %v; want the response timeout's end, within %v", res.RequeueAfter, timeout+time.Second)
	}

	clk.SetTime(start.Add(timeout - time.Second))
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	notEvicted(t, pod.Name)

	clk.SetTime(start.Add(timeout + time.Second))
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	expectEvicted(t, pod.Name)
}
