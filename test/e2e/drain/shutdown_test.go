package drain_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

func outOfServiceTainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService && t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// watchNode reports whether the node was ever seen in a state seen says, from a watch started
// now and stopped when the test ends.
func watchNode(t *testing.T, node string, seen func(*corev1.Node) bool) *atomic.Bool {
	t.Helper()
	var saw atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	w, err := framework.Cluster().Client().CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted && seen(n) {
				saw.Store(true)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &saw
}

// watchTaintedWhileReady reports whether the node was ever seen Ready with the out-of-service taint.
func watchTaintedWhileReady(t *testing.T, node string) *atomic.Bool {
	return watchNode(t, node, func(n *corev1.Node) bool { return localcluster.IsNodeReady(n) && outOfServiceTainted(n) })
}

// watchTaintedUnconfirmed reports whether the node was ever seen with the out-of-service taint
// and without the confirmation of its shutdown.
func watchTaintedUnconfirmed(t *testing.T, node string) *atomic.Bool {
	return watchNode(t, node, func(n *corev1.Node) bool {
		return outOfServiceTainted(n) && n.Annotations[nodemaintv1alpha1.ShutdownConfirmedAnnotation] == ""
	})
}

// setBootID gives the node a new status.nodeInfo.bootID, as a kubelet reports after a boot (kwok
// keeps what it finds there), and returns it.
func setBootID(t *testing.T, node string) string {
	t.Helper()
	n := &corev1.Node{}
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	orig := n.DeepCopy()
	n.Status.NodeInfo.BootID = fmt.Sprintf("%s-boot-%d", node, time.Now().UnixNano())
	if err := framework.Client().Status().Patch(t.Context(), n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	return n.Status.NodeInfo.BootID
}

// TestOutOfServiceAfterShutdown: a drained node whose kubelet stops (kwok's heartbeat) while a pod
// is stuck terminating gets the out-of-service taint after the grace period; the real pod GC of
// kube-controller-manager then removes the pod, and the taint goes once the node is Ready again.
// A Ready node of the same maintenance, with a pod stuck terminating too, never gets it.
func TestOutOfServiceAfterShutdown(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	ns := framework.Namespace(t)
	controller := framework.NewController(t)
	controller.Start()
	down, up := node(4), node(0)
	stuck := func(name string) *corev1.Pod {
		p := barePod(ns, name, nil)
		// It takes ten minutes to stop: it will still be terminating when the node goes down.
		p.Annotations[localcluster.PodDeleteDelayAnnotation] = "10m"
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600)
		return p
	}
	onlyOn(t, down, func() { create(t, stuck("stuck-down")); waitRunning(t, ns, 1) })
	onlyOn(t, up, func() { create(t, stuck("stuck-up")); waitRunning(t, ns, 2) })
	taintedWhileReady := watchTaintedWhileReady(t, up)

	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "shutdown"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(down, up), Cordon: true, Drain: true,
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 2 * time.Second},
			Shutdown:                  &nodemaintv1alpha1.ShutdownSpec{ApplyOutOfServiceTaint: true, NotReadyGracePeriod: &nodemaintv1alpha1.Duration{Duration: 3 * time.Second}},
		},
	}
	create(t, nm)
	t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), nm) })
	// The bare pods are evicted after the response timeout; they then take ten minutes to stop.
	testutil.Eventually(t, timeout, "both pods terminating", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		err := framework.Client().List(ctx, &pods, client.InNamespace(ns))
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d terminating", n), err
	})
	// The status names the stuck pod and how long it has been terminating, in 10s steps.
	testutil.Eventually(t, timeout, "the status says how long the pod has been terminating", func(ctx context.Context) (bool, string, error) {
		st, _, err := nodeStatus(ctx, "shutdown", up)
		ok := len(st.Blocked) == 1 && st.Blocked[0].Reason == nodemaintv1alpha1.BlockedReasonTerminating &&
			slices.Equal(st.Blocked[0].Pods, []string{ns + "/stuck-up"}) &&
			strings.HasPrefix(st.Blocked[0].Message, "terminating for ") && st.Blocked[0].Message != "terminating for 0s"
		return ok, fmt.Sprintf("%+v", st.Blocked), err
	})

	// The node goes down, but nothing says it was shut down rather than cut off: NotReady alone
	// never gets the taint (watched, not sampled), and an Event says what is missing.
	bootID := setBootID(t, down)
	taintedUnconfirmed := watchTaintedUnconfirmed(t, down)
	if err := framework.Cluster().StopKubelet(t.Context(), down); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = framework.Cluster().StartKubelet(context.Background(), down) })
	testutil.Eventually(t, 2*timeout, "a ShutdownNotConfirmed Event on the node that went down", func(ctx context.Context) (bool, string, error) {
		var events eventsv1.EventList
		if err := framework.Client().List(ctx, &events); err != nil {
			return false, "", err
		}
		for _, e := range events.Items {
			if e.Reason == "ShutdownNotConfirmed" && e.Regarding.Kind == "Node" && e.Regarding.Name == down {
				return strings.Contains(e.Note, nodemaintv1alpha1.ShutdownConfirmedAnnotation), e.Note, nil
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items)), nil
	})
	// The automation that shut it down confirms it, naming the boot it ended.
	n := &corev1.Node{}
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: down}, n); err != nil {
		t.Fatal(err)
	}
	orig := n.DeepCopy()
	metav1.SetMetaDataAnnotation(&n.ObjectMeta, nodemaintv1alpha1.ShutdownConfirmedAnnotation, bootID)
	if err := framework.Client().Patch(t.Context(), n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		patch := []byte(`{"metadata":{"annotations":{"` + nodemaintv1alpha1.ShutdownConfirmedAnnotation + `":null}}}`)
		_ = framework.Client().Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: down}}, client.RawPatch(types.MergePatchType, patch))
	})
	testutil.Eventually(t, 2*timeout, "out-of-service taint on the node that went down", func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		err := framework.Client().Get(ctx, client.ObjectKey{Name: down}, n)
		return outOfServiceTainted(n) && !localcluster.IsNodeReady(n), fmt.Sprintf("ready %v, taints %v", localcluster.IsNodeReady(n), n.Spec.Taints), err
	})
	// The metrics count the taint, and the maintenance's node out of service.
	expectMetrics(t, controller.MetricsTarget(), "the out-of-service taint counted", func(m framework.Metrics) []string {
		return check(m,
			want("nodemaint_out_of_service_taints_total", nil, eq(1)),
			want("nodemaint_maintenance_nodes", map[string]string{"maintenance": "shutdown", "state": "out_of_service"}, eq(1)),
		)
	})
	testutil.Eventually(t, timeout, "pod GC removes the stuck pod", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "stuck-down"}, &corev1.Pod{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})

	if err := framework.Cluster().StartKubelet(t.Context(), down); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "taint removed once Ready", func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		err := framework.Client().Get(ctx, client.ObjectKey{Name: down}, n)
		return !outOfServiceTainted(n) && localcluster.IsNodeReady(n), fmt.Sprintf("ready %v, taints %v", localcluster.IsNodeReady(n), n.Spec.Taints), err
	})
	if taintedUnconfirmed.Load() {
		t.Errorf("node %s was tainted out-of-service before its shutdown was confirmed", down)
	}
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: up}, n); err != nil {
		t.Fatal(err)
	}
	if outOfServiceTainted(n) {
		t.Errorf("the Ready node %s has the out-of-service taint", up)
	}
	if taintedWhileReady.Load() {
		t.Errorf("the Ready node %s got the out-of-service taint meanwhile", up)
	}
	// Clean up the pod still stopping on the Ready node.
	_ = framework.Client().Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck-up"}}, client.GracePeriodSeconds(0))
}
