package deployment

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestSurgeTimeoutByTheClock: a surge whose replacement never appears is given up exactly at its
// patience (the surge timeout, longer here than the Deployment's progressDeadlineSeconds) from its
// start, on the clock the responder is given: Reconcile called by the test at instants it sets
// keeps the surge a second before, and at the instant scales the Deployment back and declines
// the pod for good (SurgeTimedOut).
func TestSurgeTimeoutByTheClock(t *testing.T) {
	ctx := context.Background()
	const timeout = 3 * time.Minute
	d := newDeployment(1, 1)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	rs := replicaSet("rs", 1)
	rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}
	p := pod("web-1", onNode, requested(0))
	c := evictionTestClient(t, d, rs, p)
	start := now.Add(time.Minute)
	clk := clocktesting.NewFakePassiveClock(start)
	r := &Reconciler{Client: c, Recorder: discard{}, SurgeTimeout: timeout, Clock: clk}
	look := func(at time.Time) reconcile.Result {
		t.Helper()
		clk.SetTime(at)
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	replicas := func() int32 {
		t.Helper()
		got := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			t.Fatal(err)
		}
		return *got.Spec.Replicas
	}
	answer := func() *corev1.PodCondition {
		t.Helper()
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		return evacuation.Condition(got, evacuation.Initiated)
	}

	res := look(start)
	if got := replicas(); got != 2 {
		t.Fatalf("at the start, replicas %d; want a surge to 2", got)
	}
	if c := answer(); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("at the start, the pod's answer is %+v; want accepted", c)
	}
	if res.RequeueAfter != timeout {
		t.Errorf("the surging reconcile looks again after %v; want the surge timeout, %v", res.RequeueAfter, timeout)
	}

	look(start.Add(timeout - time.Second))
	if got := replicas(); got != 2 {
		t.Errorf("a second before the surge timeout, replicas %d; want the surge kept, 2", got)
	}

	look(start.Add(timeout))
	if got := replicas(); got != 1 {
		t.Errorf("at the surge timeout, replicas %d; want the surge given up, 1", got)
	}
	if c := answer(); c == nil || c.Reason != surgepolicy.ReasonSurgeTimedOut {
		t.Errorf("at the surge timeout, the pod's answer is %+v; want %s", c, surgepolicy.ReasonSurgeTimedOut)
	}
}
