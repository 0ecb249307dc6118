// Package drain_test proves the server-side drain end to end: eviction through the real
// disruption controller's PodDisruptionBudgets, DrainRule order groups, skipped pods, on the local
// cluster with nodemaint-controller running as its ServiceAccount.
package drain_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.Options{Nodes: 5})) }

const timeout = 90 * time.Second

func node(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

func startController(t *testing.T) {
	t.Helper()
	framework.NewController(t).Start()
}

// onlyOn makes the scheduler place what create creates on the node: every other node is cordoned
// meanwhile.
func onlyOn(t *testing.T, target string, create func()) {
	t.Helper()
	var others []string
	for i := range 5 {
		if node(i) != target {
			others = append(others, node(i))
		}
	}
	kubectl(t, append([]string{"cordon"}, others...)...)
	defer kubectl(t, append([]string{"uncordon"}, others...)...)
	create()
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := framework.Kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := framework.Client().Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}
}

func barePod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: map[string]string{
		localcluster.PodDeleteDelayAnnotation: "2s",
	}}, Spec: podSpec()}
}

func waitRunning(t *testing.T, ns string, n int) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("%d pods ready in %s", n, ns), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := framework.Client().List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		ready := 0
		for i := range pods.Items {
			if podutils.IsPodReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready == n, fmt.Sprintf("%d ready", ready), nil
	})
}

func createDrainNM(t *testing.T, name string, nodes ...string) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(nodes...), Cordon: true, Drain: true, Reason: "e2e drain",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Second},
		},
	}
	create(t, nm)
	t.Cleanup(func() {
		_ = framework.Client().Delete(context.Background(), nm)
		testutil.Eventually(t, timeout, "NodeMaintenance "+name+" gone", func(ctx context.Context) (bool, string, error) {
			err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm)
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		})
	})
}

func nodeStatus(ctx context.Context, name, node string) (nodemaintv1alpha1.NodeMaintenanceNodeStatus, *nodemaintv1alpha1.NodeMaintenance, error) {
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, nm)
	return nm.Status.Nodes[node], nm, err
}

func expectDrained(t *testing.T, name string) {
	t.Helper()
	testutil.Eventually(t, timeout, name+" drained", func(ctx context.Context) (bool, string, error) {
		v, err := testutil.ViewStatus(ctx, framework.Client(), name, "")
		return v.Drained == "True" && v.Phase == nodemaintv1alpha1.PhaseDrainComplete, fmt.Sprintf("%+v", v), err
	})
}

// TestMixedNode: a Deployment with maxSurge is moved by the responder (never evicted, never below
// its replicas), a StatefulSet behind a PodDisruptionBudget is evicted as the budget allows, a
// bare pod is evicted, a DaemonSet pod and a pod labelled skip stay (the latter reported), and the
// maintenance reaches Drained.
func TestMixedNode(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	ns := framework.Namespace(t)
	startController(t)
	target := node(0)
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
				localcluster.PodReadyDelayAnnotation: "2s",
			}}, Spec: podSpec()},
		},
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}}, Spec: podSpec()},
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	web := framework.NewDeployment(ns, "web", 2)
	web.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
	}}
	web.Spec.Template.Annotations = map[string]string{localcluster.PodReadyDelayAnnotation: "2s"}
	onlyOn(t, target, func() {
		create(t, sts, pdb, barePod(ns, "bare", nil), barePod(ns, "keep", map[string]string{"nodemaint.dev/drain": "skip"}))
		framework.CreateDeployment(t, web)
		waitRunning(t, ns, 7)
	})
	create(t, ds)
	waitRunning(t, ns, 12)

	// Watch the ready pods throughout: the StatefulSet's budget allows one down; the Deployment
	// is never below its replicas and its pods are never evicted.
	db := watchPods(t, ns, "app=db")
	webPods := watchPods(t, ns, "app=web")
	createDrainNM(t, "mixed", target)
	expectDrained(t, "mixed")
	testutil.Eventually(t, timeout, "StatefulSet back to 3 ready", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(sts), sts)
		return sts.Status.ReadyReplicas == 3, fmt.Sprintf("%d ready", sts.Status.ReadyReplicas), err
	})
	framework.WaitDeploymentAvailable(t, ns, "web")
	if got := db.minReady(); got < 2 {
		t.Errorf("the StatefulSet went down to %d ready pods; its budget allows 2", got)
	}
	if got := webPods.minReady(); got < 2 {
		t.Errorf("the Deployment went down to %d ready pods; it has 2 replicas and maxSurge", got)
	}
	if evicted := webPods.deletedUnaccepted(); len(evicted) > 0 {
		t.Errorf("Deployment pods removed without the responder accepting: %v", evicted)
	}
	var pods corev1.PodList
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": target}); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name)
	}
	slices.Sort(left)
	if len(left) != 2 {
		t.Errorf("pods left on %s: %v; want 2, the skipped pod and the DaemonSet's", target, left)
	} else {
		if !strings.HasPrefix(left[0], "agent-") {
			t.Errorf("pods left on %s: %v; want the DaemonSet's among them", target, left)
		}
		if left[1] != "keep" {
			t.Errorf("pods left on %s: %v; want the skipped pod keep among them", target, left)
		}
	}
	st, _, err := nodeStatus(t.Context(), "mixed", target)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Blocked) != 1 {
		t.Errorf("status of %s: %+v; want one blocked entry, the skipped pod", target, st)
	} else {
		if st.Blocked[0].Reason != nodemaintv1alpha1.BlockedReasonSkipped {
			t.Errorf("status of %s: blocked %s, want %s", target, st.Blocked[0].Reason, nodemaintv1alpha1.BlockedReasonSkipped)
		}
		if !slices.Equal(st.Blocked[0].Pods, []string{ns + "/keep"}) {
			t.Errorf("status of %s: blocked pods %v, want [%s/keep]", target, st.Blocked[0].Pods, ns)
		}
	}
}

// podWatch follows the pods matching a selector: the fewest ready at once, and the pods that went
// terminating without their owner having accepted an evacuation (evicted, or deleted by hand).
type podWatch struct {
	mu         sync.Mutex
	ready      map[string]bool
	fewest     int
	unaccepted []string
}

func (w *podWatch) minReady() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fewest
}

func (w *podWatch) deletedUnaccepted() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.unaccepted)
}

func (w *podWatch) observe(pod *corev1.Pod, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pod.DeletionTimestamp != nil && w.ready[pod.Name] && !evacuation.Accepted(pod) && !slices.Contains(w.unaccepted, pod.Name) {
		w.unaccepted = append(w.unaccepted, pod.Name)
	}
	w.ready[pod.Name] = !deleted && isReady(pod)
	n := 0
	for _, r := range w.ready {
		if r {
			n++
		}
	}
	w.fewest = min(w.fewest, n)
}

// watchPods starts a podWatch on the pods of the namespace matching the selector.
func watchPods(t *testing.T, ns, selector string) *podWatch {
	t.Helper()
	pods := framework.Cluster().Client().CoreV1().Pods(ns)
	list, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	pw := &podWatch{ready: map[string]bool{}}
	for i := range list.Items {
		pw.ready[list.Items[i].Name] = isReady(&list.Items[i])
		if pw.ready[list.Items[i].Name] {
			pw.fewest++
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				pw.observe(pod, ev.Type == watch.Deleted)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return pw
}

// isReady: Ready and not terminating.
func isReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	return podutils.IsPodReady(pod)
}

// TestUnbudgetedPodBlocks: a pod whose budget allows no disruption holds its node, the status
// names it and quotes the budget, another node of the same maintenance drains meanwhile, and the
// drain finishes once the budget is gone.
func TestUnbudgetedPodBlocks(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions, framework.EvictionRequests)
	ns := framework.Namespace(t)
	startController(t)
	blockedNode, freeNode := node(1), node(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "never"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "precious"}}},
	}
	onlyOn(t, blockedNode, func() {
		create(t, pdb, barePod(ns, "precious", map[string]string{"app": "precious"}), barePod(ns, "other", nil))
		waitRunning(t, ns, 2)
	})
	onlyOn(t, freeNode, func() {
		create(t, barePod(ns, "elsewhere", nil))
		waitRunning(t, ns, 3)
	})
	createDrainNM(t, "blocked", blockedNode, freeNode)

	testutil.Eventually(t, timeout, "the budget named in the status", func(ctx context.Context) (bool, string, error) {
		blocked, nm, err := nodeStatus(ctx, "blocked", blockedNode)
		free := nm.Status.Nodes[freeNode]
		ok := blocked.PodsPendingEvacuation == 1 && free.PodsPendingEvacuation == 0 && len(blocked.Blocked) == 1 &&
			blocked.Blocked[0].Reason == nodemaintv1alpha1.BlockedReasonPodDisruptionBudget &&
			slices.Equal(blocked.Blocked[0].Pods, []string{ns + "/precious"}) &&
			strings.Contains(blocked.Blocked[0].Message, "The disruption budget never does not allow evicting pods")
		return ok, fmt.Sprintf("%s: %+v; %s: %+v", blockedNode, blocked, freeNode, free), err
	})
	v, err := testutil.ViewStatus(t.Context(), framework.Client(), "blocked", blockedNode)
	if err != nil || v.Drained != "False" {
		t.Fatalf("drained while a pod is held: %+v %v", v, err)
	}
	if err := framework.Client().Delete(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	expectDrained(t, "blocked")
}

// TestDrainRuleOrder: with DrainRules of orders 0, 100 and 200, every pod of a group is gone
// before the next group's first eviction, as seen from the pods' deletion times.
func TestDrainRuleOrder(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions, framework.EvictionRequests)
	ns := framework.Namespace(t)
	startController(t)
	target := node(3)
	for _, order := range []int32{0, 100, 200} {
		rule := &nodemaintv1alpha1.DrainRule{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("order-%d", order)},
			Spec: nodemaintv1alpha1.DrainRuleSpec{
				Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorDrain, Order: ptr.To(order)},
				Pods: []nodemaintv1alpha1.DrainRulePodSelector{{
					Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"order": fmt.Sprint(order)}},
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				}},
			},
		}
		create(t, rule)
		t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), rule) })
	}
	onlyOn(t, target, func() {
		for _, order := range []string{"200", "100", "0"} {
			for i := range 2 {
				create(t, barePod(ns, fmt.Sprintf("order-%s-%d", order, i), map[string]string{"order": order}))
			}
		}
		waitRunning(t, ns, 6)
	})

	// Record when each pod was asked to go (its deletion timestamp) and when it was gone.
	type times struct{ deleted, gone time.Time }
	var mu sync.Mutex
	seen := map[string]*times{}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := framework.Cluster().Client().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := framework.Cluster().Client().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			ts := seen[pod.Name]
			if ts == nil {
				ts = &times{}
				seen[pod.Name] = ts
			}
			if pod.DeletionTimestamp != nil && ts.deleted.IsZero() {
				ts.deleted = time.Now()
			}
			if ev.Type == watch.Deleted {
				ts.gone = time.Now()
			}
			mu.Unlock()
		}
	}()
	defer cancel()

	createDrainNM(t, "ordered", target)
	expectDrained(t, "ordered")
	mu.Lock()
	defer mu.Unlock()
	group := func(order string) (firstDeleted, lastGone time.Time) {
		for i := range 2 {
			ts := seen[fmt.Sprintf("order-%s-%d", order, i)]
			if ts == nil {
				t.Fatalf("pod order-%s-%d: not seen", order, i)
			}
			if ts.deleted.IsZero() {
				t.Fatalf("pod order-%s-%d: not seen evicted: %+v", order, i, ts)
			}
			if ts.gone.IsZero() {
				t.Fatalf("pod order-%s-%d: not seen gone: %+v", order, i, ts)
			}
			if firstDeleted.IsZero() || ts.deleted.Before(firstDeleted) {
				firstDeleted = ts.deleted
			}
			if ts.gone.After(lastGone) {
				lastGone = ts.gone
			}
		}
		return firstDeleted, lastGone
	}
	_, gone0 := group("0")
	first100, gone100 := group("100")
	first200, _ := group("200")
	if first100.Before(gone0) {
		t.Errorf("order 100 evicted at %v, before order 0 was gone at %v", first100, gone0)
	}
	if first200.Before(gone100) {
		t.Errorf("order 200 evicted at %v, before order 100 was gone at %v", first200, gone100)
	}
}
