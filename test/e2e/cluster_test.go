package e2e

// These tests prove that the local cluster behaves like a real one: the end-to-end tests of
// nodemaint rely on the real scheduler, controllers and kubectl, and on kwok's kubelets.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

func TestNodesAreReady(t *testing.T) {
	var nodes corev1.NodeList
	if err := framework.Client().List(t.Context(), &nodes, client.MatchingLabels{localcluster.NodeTypeLabel: "kwok"}); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("no nodes")
	}
	for _, node := range nodes.Items {
		if !localcluster.IsNodeReady(&node) {
			t.Errorf("node %s is not Ready", node.Name)
		}
		if len(node.Spec.Taints) != 0 {
			t.Errorf("node %s has taints %v", node.Name, node.Spec.Taints)
		}
		if zone := node.Labels[corev1.LabelTopologyZone]; !sets.New(localcluster.Zones...).Has(zone) {
			t.Errorf("node %s is in zone %q", node.Name, zone)
		}
		if cpu := node.Status.Allocatable[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("32")) != 0 {
			t.Errorf("node %s has %s allocatable CPUs, want 32", node.Name, cpu.String())
		}
	}
}

func TestSchedulerSpreadsDeployment(t *testing.T) {
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "web", 3)
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:     d.Spec.Selector,
	}}
	framework.CreateDeployment(t, d)

	pods := podsOf(t, d)
	zones := sets.New[string]()
	for _, pod := range pods {
		var node corev1.Node
		if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: pod.Spec.NodeName}, &node); err != nil {
			t.Fatal(err)
		}
		zones.Insert(node.Labels[corev1.LabelTopologyZone])
	}
	if len(pods) != 3 {
		t.Errorf("%d pods, want 3", len(pods))
	}
	if zones.Len() != 3 {
		t.Errorf("pods in zones %v, want 3 zones", sets.List(zones))
	}
}

func TestPodStartupDelay(t *testing.T) {
	const delay = 5 * time.Second
	ns := framework.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        "slow",
			Annotations: map[string]string{localcluster.PodReadyDelayAnnotation: delay.String()},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := framework.Cluster().Client().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created := time.Now()
	if err := framework.Client().Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// kwok gives the pod an IP and creates its containers (pod-create stage), then makes it
	// Ready delay later (pod-ready stage): the watch sees both states, in that order.
	var sawStarting bool
	for event := range w.ResultChan() {
		pod, ok := event.Object.(*corev1.Pod)
		if !ok {
			t.Fatalf("watch: %v", event.Object)
		}
		if !podutils.IsPodReady(pod) {
			sawStarting = sawStarting || pod.Status.PodIP != ""
			continue
		}
		if took := time.Since(created); took < delay {
			t.Errorf("pod Ready %v after its creation, before its start-up delay %v", took, delay)
		}
		if !sawStarting {
			t.Error("pod Ready without being seen started and not Ready first")
		}
		return
	}
	t.Fatalf("pod not Ready: %v", ctx.Err())
}

func TestKubectlDrain(t *testing.T) {
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "web", 3)
	// One pod per node, and emptyDir data that only --delete-emptydir-data lets drain delete.
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelHostname,
		WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:     d.Spec.Selector,
	}}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	framework.CreateDeployment(t, d)
	evicted := podsOf(t, d)[0]
	node := evicted.Spec.NodeName
	t.Cleanup(func() { uncordon(t, node) })

	if out, err := framework.Kubectl(t, "drain", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s", node); err != nil {
		t.Fatalf("kubectl drain: %v\n%s", err, out)
	}

	var n corev1.Node
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable {
		t.Errorf("node %s not cordoned", node)
	}
	err := framework.Client().Get(t.Context(), client.ObjectKeyFromObject(&evicted), &corev1.Pod{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("pod %s still exists after the drain (err: %v)", evicted.Name, err)
	}
	framework.WaitDeploymentAvailable(t, ns, d.Name)
	for _, pod := range podsOf(t, d) {
		if pod.Spec.NodeName == node {
			t.Errorf("pod %s is on the drained node %s", pod.Name, node)
		}
	}
}

func TestKubectlDrainHonoursPDB(t *testing.T) {
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "db", 1)
	framework.CreateDeployment(t, d)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     d.Spec.Selector,
		},
	}
	if err := framework.Client().Create(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "PDB status from the disruption controller", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
		s := pdb.Status
		return s.ObservedGeneration == pdb.Generation && s.CurrentHealthy == 1 && s.DisruptionsAllowed == 0, "", err
	})
	pod := podsOf(t, d)[0]
	t.Cleanup(func() { uncordon(t, pod.Spec.NodeName) })

	out, err := framework.Kubectl(t, "drain", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=10s", pod.Spec.NodeName)
	if err == nil {
		t.Fatalf("kubectl drain succeeded despite the PDB:\n%s", out)
	}
	if !strings.Contains(out, "disruption budget") {
		t.Errorf("kubectl drain did not fail on the PDB:\n%s", out)
	}
	var after corev1.Pod
	if err := framework.Client().Get(t.Context(), client.ObjectKeyFromObject(&pod), &after); err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	if after.UID != pod.UID {
		t.Errorf("pod %s replaced despite its PDB: UID %s, was %s", pod.Name, after.UID, pod.UID)
	}
	if after.DeletionTimestamp != nil {
		t.Errorf("pod %s deleted despite its PDB", pod.Name)
	}
	if !podutils.IsPodReady(&after) {
		t.Errorf("pod %s not Ready despite its PDB: %+v", pod.Name, after.Status)
	}
}

func TestStopKubelet(t *testing.T) {
	c := framework.Cluster()
	node, ns, pod := nodeWithPod(t)
	// The control: a pod on a node whose kubelet runs, deleted right after the pod, is gone
	// once kwok got to both.
	control := framework.NewDeployment(ns, "control", 1)
	control.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}},
		}}},
	}}
	framework.CreateDeployment(t, control)
	controlPod := podsOf(t, control)[0]

	if err := c.StopKubelet(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, "node "+node+" NotReady", func(ctx context.Context) (bool, string, error) {
		var n corev1.Node
		err := framework.Client().Get(ctx, client.ObjectKey{Name: node}, &n)
		return !localcluster.IsNodeReady(&n), "", err
	})
	// Without its kubelet, a deleted pod stays Terminating.
	if err := framework.Client().Delete(t.Context(), &pod); err != nil {
		t.Fatal(err)
	}
	if err := framework.Client().Delete(t.Context(), &controlPod); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "control pod "+controlPod.Name+" deleted by kwok", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(&controlPod), &corev1.Pod{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	if err := framework.Client().Get(t.Context(), client.ObjectKeyFromObject(&pod), &pod); err != nil {
		t.Fatalf("pod %s on the stopped node: %v", pod.Name, err)
	}
	if pod.DeletionTimestamp == nil {
		t.Fatalf("pod %s on the stopped node is not Terminating", pod.Name)
	}

	if err := c.StartKubelet(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "node "+node+" Ready", func(ctx context.Context) (bool, string, error) {
		var n corev1.Node
		err := framework.Client().Get(ctx, client.ObjectKey{Name: node}, &n)
		return localcluster.IsNodeReady(&n), "", err
	})
	testutil.Eventually(t, 30*time.Second, "pod "+pod.Name+" deleted", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
}

// nodeWithPod adds a node for the test alone, deleted at its end, and returns it with the
// namespace of the test and the pod of a Deployment pinned to the node.
func nodeWithPod(t *testing.T) (string, string, corev1.Pod) {
	t.Helper()
	c := framework.Cluster()
	names, err := c.AddNodes(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	node := names[0]
	t.Cleanup(func() {
		if err := c.DeleteNode(context.Background(), node); err != nil {
			t.Error(err)
		}
	})
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "pinned", 1)
	d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	framework.CreateDeployment(t, d)
	return node, ns, podsOf(t, d)[0]
}

// TestHoldNodeStatus: while a node's status is held, the node reports what is written to it
// (NotReady, rebooting), though kwok still renews its Lease and plays its pods; once released,
// kwok marks it Ready, keeping the boot ID it reported while down.
func TestHoldNodeStatus(t *testing.T) {
	c := framework.Cluster()
	node, _, pod := nodeWithPod(t)

	held := time.Now()
	if err := c.HoldNodeStatus(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkNodeNotReady(t.Context(), node, ""); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "node "+node+" tainted not-ready", func(ctx context.Context) (bool, string, error) {
		var n corev1.Node
		err := framework.Client().Get(ctx, client.ObjectKey{Name: node}, &n)
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }), "", err
	})
	// kwok still has the node: it renews its Lease and deletes its pods.
	testutil.Eventually(t, time.Minute, "Lease of "+node+" renewed", func(ctx context.Context) (bool, string, error) {
		var l coordinationv1.Lease
		err := framework.Client().Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, &l)
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(held), fmt.Sprint(l.Spec.RenewTime), err
	})
	if err := framework.Client().Delete(t.Context(), &pod); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "pod "+pod.Name+" deleted by kwok", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	// ...but it left the node's status alone.
	var n corev1.Node
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	if localcluster.IsNodeReady(&n) {
		t.Fatalf("node %s Ready while its status is held: kwok wrote it", node)
	}

	bootID := string(uuid.NewUUID())
	if err := c.MarkNodeNotReady(t.Context(), node, bootID); err != nil {
		t.Fatal(err)
	}
	if err := c.ReleaseNodeStatus(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "node "+node+" Ready", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKey{Name: node}, &n)
		return localcluster.IsNodeReady(&n), "", err
	})
	if n.Status.NodeInfo.BootID != bootID {
		t.Errorf("node %s boot ID %q once Ready, want %q", node, n.Status.NodeInfo.BootID, bootID)
	}
}

func TestRestartKwok(t *testing.T) {
	c := framework.Cluster()
	ns := framework.Namespace(t)
	if err := c.StopKwok(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.StartKwok(context.Background()); err != nil {
			t.Error(err)
		}
	})
	d := framework.NewDeployment(ns, "web", 1)
	if err := framework.Client().Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	// The scheduler binds the pod, but no kubelet starts it.
	testutil.Eventually(t, 30*time.Second, "pod scheduled", func(ctx context.Context) (bool, string, error) {
		pods := podsOf(t, d)
		return len(pods) == 1 && pods[0].Spec.NodeName != "", "", nil
	})
	pod := podsOf(t, d)[0]
	if pod.Status.PodIP != "" {
		t.Fatalf("pod %s started without kwok", pod.Name)
	}

	// StopKwok returned once kwok's process had exited: the pod's start is the new kwok's.
	restarted := metav1.NewTime(time.Now().Truncate(time.Second)) // startTime has seconds
	if err := c.StartKwok(t.Context()); err != nil {
		t.Fatal(err)
	}
	framework.WaitDeploymentAvailable(t, ns, d.Name)
	if err := framework.Client().Get(t.Context(), client.ObjectKeyFromObject(&pod), &pod); err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	if pod.Status.StartTime == nil || pod.Status.StartTime.Before(&restarted) {
		t.Fatalf("pod %s started at %v, before kwok was started again at %v", pod.Name, pod.Status.StartTime, restarted)
	}
}

// TestPodReadyAgain: kube-controller-manager marks the pods of a node that missed its
// heartbeats not Ready; once the node is back, its kubelet marks them Ready again, and so does
// kwok (the pod-ready-again stage). Without it they would stay not Ready for good.
func TestPodReadyAgain(t *testing.T) {
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "web", 1)
	framework.CreateDeployment(t, d)
	pod := podsOf(t, d)[0]
	// What the node lifecycle controller writes (MarkPodsNotReady).
	patch := []byte(`{"status":{"conditions":[{"type":"Ready","status":"False","lastTransitionTime":"` +
		time.Now().UTC().Format(time.RFC3339) + `"}]}}`)
	if err := framework.Client().Status().Patch(t.Context(), &pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	if podutils.IsPodReady(&pod) {
		t.Fatalf("pod %s still Ready after the patch", pod.Name)
	}
	testutil.Eventually(t, 30*time.Second, "pod "+pod.Name+" Ready again", func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(&pod), &p); err != nil {
			return false, "", err
		}
		if p.UID != pod.UID {
			return false, "", fmt.Errorf("pod %s was replaced", pod.Name)
		}
		return podutils.IsPodReady(&p), "", nil
	})
}

func TestRestartAPIServer(t *testing.T) {
	if err := framework.Cluster().RestartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The controllers, the scheduler and kwok reconnect.
	ns := framework.Namespace(t)
	framework.CreateDeployment(t, framework.NewDeployment(ns, "after-restart", 2))
}

// podsOf returns the pods of the Deployment d.
func podsOf(t *testing.T, d *appsv1.Deployment) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func uncordon(t *testing.T, node string) {
	if out, err := framework.Kubectl(t, "uncordon", node); err != nil {
		t.Errorf("kubectl uncordon: %v\n%s", err, out)
	}
}
