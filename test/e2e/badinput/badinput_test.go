package badinput_test

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

const timeout = 2 * time.Minute

// TestDeploymentDeletedMidSurge: the Deployment whose pod is being moved is deleted while its
// surge pods start. The garbage collector removes its pods, the drain completes, the status is
// right, and no reconciler keeps failing on the Deployment that is gone.
func TestDeploymentDeletedMidSurge(t *testing.T) {
	ctl := framework.NewController(t)
	ctl.Start()
	c := framework.Client()
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "web", 2)
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}
	// The surge pod takes long to start, so the surge is under way when the Deployment goes.
	d.Spec.Template.Annotations = map[string]string{localcluster.PodReadyDelayAnnotation: "30s"}
	framework.CreateDeployment(t, d)

	var pods corev1.PodList
	if err := c.List(t.Context(), &pods, client.InNamespace(ns)); err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of the Deployment: %v, %v", len(pods.Items), err)
	}
	node := pods.Items[0].Spec.NodeName
	maintain(t, "surge-deleted", node)

	testutil.Eventually(t, timeout, "the surge under way", func(ctx context.Context) (bool, string, error) {
		var cur appsv1.Deployment
		err := c.Get(ctx, client.ObjectKeyFromObject(d), &cur)
		v, ok := cur.Annotations[evacuation.SurgeAnnotation]
		return ok, "annotation " + v, err
	})
	// Counted from the deletion on, a reconciler failing on the Deployment gone is seen at its
	// first failure, not only at a retry.
	before := reconcileErrors(t, ctl)
	if err := c.Delete(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	expectDrained(t, "surge-deleted", 1)
	// The controller settled (its queues empty, nothing in progress) and is at work, its metrics
	// current: a change of the node is reconciled by the node and the NodeMaintenance
	// controllers after that.
	ctl.WaitSettled(t, timeout)
	probeNode(t, ctl, node)
	if after := reconcileErrors(t, ctl); after != before {
		t.Errorf("reconcile errors since the Deployment's deletion: %v, after the drain %v", before, after)
	}
}

// probeNode annotates the node and waits until the node and NodeMaintenance controllers counted
// a reconcile more each (controller_runtime_reconcile_total): evidence that the controller looks
// at the node now, before a test asserts that something did not happen.
func probeNode(t *testing.T, ctl *framework.Controller, node string) {
	t.Helper()
	reconciles := func(ctx context.Context) (map[string]float64, error) {
		m, err := framework.ScrapeMetrics(ctx, ctl.MetricsTarget())
		if err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for _, c := range []string{"node", "nodemaintenance"} {
			out[c], _ = m.Value("controller_runtime_reconcile_total", map[string]string{"controller": c})
		}
		return out, nil
	}
	before, err := reconciles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const key = "e2e.nodemaint.dev/probe"
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, time.Now().Format(time.RFC3339Nano))
	if err := framework.Client().Patch(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, key)
		_ = framework.Client().Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch))
	})
	testutil.Eventually(t, timeout, "node "+node+" reconciled since the probe", func(ctx context.Context) (bool, string, error) {
		now, err := reconciles(ctx)
		if err != nil {
			return false, "", err
		}
		return now["node"] > before["node"] && now["nodemaintenance"] > before["nodemaintenance"], fmt.Sprintf("reconciles %v, before %v", now, before), nil
	})
}

// TestEvictionForbidden: with a role narrowed so that nodemaint may not evict, the maintenance
// says so plainly (the blocked pod's reason is EvictionFailed, quoting "forbidden", and a Warning
// Event names the missing permission), and completes once the permission is back.
func TestEvictionForbidden(t *testing.T) {
	c := framework.Client()
	restore := narrowRole(t, func(r rbacv1.PolicyRule) rbacv1.PolicyRule {
		if slices.Contains(r.Resources, "pods/eviction") {
			r.Verbs = nil
		}
		return r
	})
	framework.NewController(t).Start()
	ns := framework.Namespace(t)
	node := createBarePod(t, ns)
	maintain(t, "forbidden-evict", node)

	testutil.Eventually(t, timeout, "the refusal in the status", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := c.Get(ctx, types.NamespacedName{Name: "forbidden-evict"}, nm); err != nil {
			return false, "", err
		}
		for _, b := range nm.Status.Nodes[node].Blocked {
			if b.Reason == nodemaintv1alpha1.BlockedReasonEvictionFailed && strings.Contains(b.Message, "forbidden") && strings.Contains(b.Message, `cannot create resource "pods/eviction"`) &&
				slices.Contains(b.Pods, ns+"/bare") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("node status %+v, conditions %+v", nm.Status.Nodes[node], nm.Status.Conditions), nil
	})
	expectWarning(t, "NodeMaintenance", "forbidden-evict", "Forbidden", `cannot create resource "pods/eviction"`)
	expectWarning(t, "Pod", "bare", nodemaintv1alpha1.BlockedReasonEvictionFailed, `cannot create resource "pods/eviction"`)

	// The permission back, the drain completes.
	restore()
	expectDrained(t, "forbidden-evict", 1)
}

// TestCordonForbidden: with a role that may not patch nodes, nodemaint cannot cordon: a Warning
// Event on the maintenance says so, nothing is evicted from the uncordoned node, and the
// maintenance completes once the permission is back.
func TestCordonForbidden(t *testing.T) {
	c := framework.Client()
	restore := narrowRole(t, func(r rbacv1.PolicyRule) rbacv1.PolicyRule {
		if slices.Contains(r.Resources, "nodes") {
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "patch" })
		}
		return r
	})
	framework.NewController(t).Start()
	ns := framework.Namespace(t)
	node := createBarePod(t, ns)
	maintain(t, "forbidden-cordon", node)

	expectWarning(t, "NodeMaintenance", "forbidden-cordon", "Forbidden", `cannot patch resource "nodes"`)
	n := &corev1.Node{}
	if err := c.Get(t.Context(), types.NamespacedName{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "bare"}, pod); err != nil || pod.DeletionTimestamp != nil {
		t.Fatalf("the pod of a node nodemaint could not cordon was evicted: %v, %v", err, pod.DeletionTimestamp)
	}
	if n.Spec.Unschedulable {
		t.Fatalf("node %s cordoned without permission", node)
	}

	restore()
	expectDrained(t, "forbidden-cordon", 1)
}

// narrowRole changes every rule of nodemaint's ClusterRole with narrow until the test ends or
// the returned function restores it.
func narrowRole(t *testing.T, narrow func(rbacv1.PolicyRule) rbacv1.PolicyRule) (restore func()) {
	t.Helper()
	c := framework.Client()
	role := &rbacv1.ClusterRole{}
	if err := c.Get(t.Context(), types.NamespacedName{Name: "nodemaint-controller"}, role); err != nil {
		t.Fatal(err)
	}
	full := role.DeepCopy()
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if r = narrow(*r.DeepCopy()); len(r.Verbs) > 0 {
			rules = append(rules, r)
		}
	}
	role.Rules = rules
	if err := c.Update(t.Context(), role); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		cur := &rbacv1.ClusterRole{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: full.Name}, cur); err != nil {
			t.Error(err)
			return
		}
		cur.Rules = full.Rules
		if err := c.Update(context.Background(), cur); err != nil {
			t.Errorf("restoring the role: %v", err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// createBarePod creates a pod without owner on the first node and returns the node. Nobody
// answers for it here, so it is evicted after maintain's response timeout.
func createBarePod(t *testing.T, ns string) string {
	t.Helper()
	c := framework.Client()
	var nodes corev1.NodeList
	if err := c.List(t.Context(), &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	node := nodes.Items[0].Name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return node
}

// expectWarning waits for a Warning Event of the reason about the object, whose note says want.
func expectWarning(t *testing.T, kind, name, reason, want string) {
	t.Helper()
	testutil.Eventually(t, timeout, "Warning Event "+reason+" on "+kind+" "+name, func(ctx context.Context) (bool, string, error) {
		var events eventsv1.EventList
		if err := framework.Client().List(ctx, &events); err != nil {
			return false, "", err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.Regarding.Kind == kind && e.Regarding.Name == name {
				if !strings.Contains(e.Note, "forbidden") || !strings.Contains(e.Note, want) {
					return false, "", fmt.Errorf("the event does not say %q: %q", want, e.Note)
				}
				t.Logf("%s %s: %s", kind, name, e.Note)
				return true, e.Note, nil
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items)), nil
	})
}

// maintain cordons and drains the nodes until the test ends; the test then waits until the
// NodeMaintenance is gone, so the nodes are restored for the next test.
func maintain(t *testing.T, name string, nodes ...string) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(nodes...), Cordon: true, Drain: true, Reason: "e2e " + t.Name(),
			// A bare pod waits the response timeout like any other before it is evicted.
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 2 * time.Second},
		},
	}
	if err := framework.Client().Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := framework.Client().Delete(ctx, nm); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting NodeMaintenance %s: %v", name, err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, &nodemaintv1alpha1.NodeMaintenance{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("NodeMaintenance %s not gone: %v", name, err)
		}
	})
}

// expectDrained waits until the maintenance is Drained with nothing pending on its nodes.
func expectDrained(t *testing.T, name string, selected int32) {
	t.Helper()
	testutil.Eventually(t, timeout, name+" drained", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, nm); err != nil {
			return false, "", err
		}
		s := nm.Status
		ok := s.Phase == nodemaintv1alpha1.PhaseDrainComplete && s.SelectedNodes == selected && s.PodsPendingEvacuation == 0 &&
			s.PodsEvacuating == 0 && meta.IsStatusConditionTrue(s.Conditions, nodemaintv1alpha1.ConditionDrained)
		for _, ns := range s.Nodes {
			ok = ok && ns.PodsPendingEvacuation == 0 && len(ns.Blocked) == 0
		}
		return ok, fmt.Sprintf("%+v", s), nil
	})
}

// reconcileErrors sums controller_runtime_reconcile_errors_total over the controller's
// controllers, from its metrics endpoint.
func reconcileErrors(t *testing.T, ctl *framework.Controller) float64 {
	t.Helper()
	resp, err := framework.GetMetrics(ctl.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "controller_runtime_reconcile_errors_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}
