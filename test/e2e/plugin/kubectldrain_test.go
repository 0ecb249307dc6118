package plugin_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// TestKubectlDrainLines runs the kubectl drain lines of published runbooks, with `kubectl drain`
// become `kubectl maintenance drain` and nothing else changed: kubeadm's and EKS's upgrade
// (--ignore-daemonsets, --delete-emptydir-data: accepted, nodemaint behaves so already) drain a
// Deployment whose pods have emptyDir volumes, a server dry run writes nothing, GKE's line
// (--force, --grace-period) is refused with the option nodemaint offers, changing nothing, and a
// line that drains one workload first (--pod-selector, --grace-period) moves only its pods, each
// evicted with the grace period it gives, and leaves the others running.
func TestKubectlDrainLines(t *testing.T) {
	ns := framework.Namespace(t)
	framework.NewController(t).Start()
	node := "kwok-node-3"

	// The Deployment's two pods on the node: the other nodes cordoned while they are placed.
	setUnschedulable := func(name string, on bool) {
		t.Helper()
		n := &corev1.Node{}
		if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		orig := n.DeepCopy()
		n.Spec.Unschedulable = on
		if err := framework.Client().Patch(t.Context(), n, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
	others := []string{"kwok-node-0", "kwok-node-1", "kwok-node-2"}
	for _, o := range others {
		setUnschedulable(o, true)
	}
	d := framework.NewDeployment(ns, "cache", 2)
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	framework.CreateDeployment(t, d)
	framework.WaitDeploymentAvailable(t, ns, "cache")
	framework.CreateDeployment(t, batchDeployment(ns))
	t.Cleanup(func() { removeBatch(ns) })
	for _, o := range others {
		setUnschedulable(o, false)
	}
	podsOnNode := func(ctx context.Context, app string) ([]corev1.Pod, error) {
		var pods corev1.PodList
		err := framework.Client().List(ctx, &pods, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": node}, client.MatchingLabels{"app": app})
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		return running, err
	}
	if cache, err := podsOnNode(t.Context(), "cache"); err != nil || len(cache) != 2 {
		t.Fatalf("%d of the cache Deployment's pods on %s (%v), want 2", len(cache), node, err)
	}
	batch, err := podsOnNode(t.Context(), "batch")
	if err != nil || len(batch) != 1 {
		t.Fatalf("%d of the batch Deployment's pods on %s (%v), want 1", len(batch), node, err)
	}
	noMaintenance := func(what string) {
		t.Helper()
		err := framework.Client().Get(t.Context(), client.ObjectKey{Name: node}, &nodemaintv1alpha1.NodeMaintenance{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: NodeMaintenance %s: %v, want none", what, node, err)
		}
	}

	// A server dry run: the preflight, the object validated by the API server, nothing stored.
	out, code := plugin(t, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--dry-run=server")
	if code != 0 {
		t.Errorf("drain --dry-run=server: exit %d, want 0", code)
	}
	if !strings.Contains(out, "nodemaintenance.nodemaint.dev/"+node+": draining (server dry run)") {
		t.Errorf("drain --dry-run=server: output %q, want the NodeMaintenance as a dry run", out)
	}
	if !strings.Contains(out, "EmptyDir") {
		t.Errorf("drain --dry-run=server: output %q, want the preflight (emptyDir data lost)", out)
	}
	noMaintenance("after --dry-run=server")

	// GKE's line: refused in one line naming what nodemaint does instead; nothing changes.
	out, code = plugin(t, "drain", "--force", "--ignore-daemonsets", "--delete-local-data", "--grace-period=10", node)
	if code != 1 {
		t.Errorf("drain --force: exit %d, want 1", code)
	}
	if !strings.Contains(out, "--force: nodemaint evicts pods that no controller manages") {
		t.Errorf("drain --force: output %q, want why", out)
	}
	noMaintenance("after a refused --force")
	if ok, err := unschedulable(t.Context(), node); err != nil || ok {
		t.Errorf("node %s cordoned by a refused drain (%v)", node, err)
	}

	// One workload first: only the batch pod goes, evicted with 3s to stop (its own grace
	// period is 10 minutes, which its fake kubelet would take: the drain would not end in time);
	// the cache's pods stay, running, never asked, reported skipped.
	graceOf := watchGracePeriods(t, ns, "batch")
	out, code = plugin(t, "drain", node, "--ignore-daemonsets", "--pod-selector", "app=batch", "--grace-period", "3")
	if code != 0 {
		t.Errorf("drain --pod-selector app=batch --grace-period 3: exit %d, want 0", code)
	}
	if !strings.Contains(out, "drained") {
		t.Errorf("drain --pod-selector app=batch --grace-period 3: output %q, want drained", out)
	}
	if g, ok := graceOf(batch[0].Name); !ok || g != 3 {
		t.Errorf("batch pod %s: evicted with a grace period of %ds (seen %v), want 3s", batch[0].Name, g, ok)
	}
	cache, err := podsOnNode(t.Context(), "cache")
	if err != nil || len(cache) != 2 {
		t.Fatalf("%d of the cache Deployment's pods still on %s (%v), want 2: not selected, they stay", len(cache), node, err)
	}
	for _, p := range cache {
		if r := testutil.Request(&p); r != "" {
			t.Errorf("cache pod %s: evacuation request %q, want never asked", p.Name, r)
		}
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("cache pod %s: phase %s, want running", p.Name, p.Status.Phase)
		}
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: node}, nm); err != nil {
		t.Fatal(err)
	}
	if nm.Spec.PodSelector == nil || nm.Spec.PodSelector.MatchLabels["app"] != "batch" {
		t.Errorf("NodeMaintenance %s: podSelector %v, want app=batch", node, nm.Spec.PodSelector)
	}
	if nm.Spec.EvictionGracePeriodSeconds == nil || *nm.Spec.EvictionGracePeriodSeconds != 3 {
		t.Errorf("NodeMaintenance %s: evictionGracePeriodSeconds %v, want 3", node, ptr.Deref(nm.Spec.EvictionGracePeriodSeconds, -1))
	}
	if nm.Status.PodsSkipped != 2 {
		t.Errorf("NodeMaintenance %s: %d pods skipped, want 2", node, nm.Status.PodsSkipped)
	}

	// kubeadm's and EKS's lines, without --pod-selector: every pod; the Deployment surges
	// elsewhere, the node is drained.
	out, code = plugin(t, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data")
	if code != 0 {
		t.Errorf("drain --ignore-daemonsets --delete-emptydir-data: exit %d, want 0", code)
	}
	if !strings.Contains(out, "drained") {
		t.Errorf("drain --ignore-daemonsets --delete-emptydir-data: output %q, want drained", out)
	}
	testutil.Eventually(t, timeout, "no pod of the Deployment left on "+node, func(ctx context.Context) (bool, string, error) {
		left, err := podsOnNode(ctx, "cache")
		return len(left) == 0, "", err
	})
	framework.WaitDeploymentAvailable(t, ns, "cache")
	// And the runbook's last line, kubectl uncordon: the maintenance ends and goes.
	if _, code := plugin(t, "uncordon", node); code != 0 {
		t.Errorf("uncordon: exit %d", code)
	}
	noMaintenances(t)
	if ok, err := unschedulable(t.Context(), node); err != nil || ok {
		t.Errorf("node %s still cordoned after uncordon (%v)", node, err)
	}
}

// batchDeployment is a workload the Deployment responder declines to surge (Recreate), so that
// the drain evicts its pod at once, with the drain's grace period: its own is 10 minutes, and its
// fake kubelet takes as long to stop it as its grace period allows.
func batchDeployment(ns string) *appsv1.Deployment {
	d := framework.NewDeployment(ns, "batch", 1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	d.Spec.Template.Annotations = map[string]string{localcluster.PodDeleteDelayAnnotation: "10m"}
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600)
	return d
}

// removeBatch deletes the batch Deployment and its pods with a grace period of 1s: their own
// 10 minutes would hold the namespace's deletion, and the pods of the tests after it on their
// nodes. The Deployment and its ReplicaSet go first, orphaning the pods, so that neither deletes
// one with its own grace period; the pods are deleted until none is left, a replacement the
// ReplicaSet made before it saw its own deletion included.
func removeBatch(ns string) {
	ctx := context.Background()
	c, batch, orphan := framework.Client(), client.MatchingLabels{"app": "batch"}, client.PropagationPolicy(metav1.DeletePropagationOrphan)
	_ = c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"}}, orphan)
	_ = c.DeleteAllOf(ctx, &appsv1.ReplicaSet{}, client.InNamespace(ns), batch, orphan)
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_ = c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), batch, client.GracePeriodSeconds(1))
		var left corev1.PodList
		err := c.List(ctx, &left, client.InNamespace(ns), batch)
		return err != nil || len(left.Items) == 0, nil
	})
}

// watchGracePeriods watches the pods of the app and returns what the deletion grace period of a
// pod was when it was first seen terminating (false: not seen so).
func watchGracePeriods(t *testing.T, ns, app string) func(name string) (int64, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pods := framework.Cluster().Client().CoreV1().Pods(ns)
	list, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int64{}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || pod.DeletionTimestamp == nil || pod.DeletionGracePeriodSeconds == nil {
				continue
			}
			mu.Lock()
			if _, ok := seen[pod.Name]; !ok {
				seen[pod.Name] = *pod.DeletionGracePeriodSeconds
			}
			mu.Unlock()
		}
	}()
	return func(name string) (int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		g, ok := seen[name]
		return g, ok
	}
}
