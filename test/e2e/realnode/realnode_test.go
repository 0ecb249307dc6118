// Package realnode proves on a real node what kwok cannot: a kubelet (built from the same
// Kubernetes module as the control plane) with containerd, runc and CNI plugins runs the pods,
// so their termination, grace periods and readiness are the kubelet's and the containers'
// own (test/localcluster, realnode.go). It needs root; `make test` and `make test-real-node` run it.
package realnode

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// realNodeEnv turns the package on: it builds and runs a kubelet and containerd as root. make
// test (as root) and make test-real-node set it; a plain go test ./... leaves the package out.
const realNodeEnv = "NODEMAINT_REAL_NODE"

// notAsked is why the package's tests do not run, when $NODEMAINT_REAL_NODE is not 1.
var notAsked string

func TestMain(m *testing.M) {
	if os.Getenv(realNodeEnv) != "1" {
		// Not asked for: no cluster, and every test reports itself skipped and why (go test -v,
		// go test -json), rather than the package passing with nothing run.
		notAsked = fmt.Sprintf("not asked for: the real node's tests run with %s=1, as root (make test as root, make test-real-node)", realNodeEnv)
		os.Exit(m.Run())
	}
	if os.Geteuid() != 0 {
		// Asked for and impossible: a failure, not a skip.
		fmt.Println("FAIL: the real node needs root (cgroups, mounts, network namespaces): sudo make test-real-node")
		os.Exit(1)
	}
	// The real node touches only what it made: a process of the host's in /kubepods survives
	// it, and the kernel settings are as they were once the cluster stopped.
	witness, err := witnessHost()
	if err != nil {
		fmt.Println("FAIL: witnessing the host:", err)
		os.Exit(1)
	}
	code := framework.Run(m, framework.Options{Nodes: 3, RealNodes: 1})
	if err := witness.check(); err != nil {
		fmt.Println("FAIL: the real node changed the host:", err)
		code = 1
	}
	os.Exit(code)
}

// requireRealNode is each test's first line: it skips the test when the package was not asked for.
func requireRealNode(t *testing.T) {
	t.Helper()
	if notAsked != "" {
		t.Skip(notAsked)
	}
}

const (
	timeout = 2 * time.Minute
	// gracePeriod is the workloads' terminationGracePeriodSeconds.
	gracePeriod = 20
	// shutdownDelay is how long the workload takes to exit after SIGTERM.
	shutdownDelay = 2 * time.Second
)

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := framework.Client().Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// workloadPod is a pod template of the real node's workload image: ready once it serves
// /readyz, exiting shutdownDelay after SIGTERM. Without the real node's label in
// requiredDuringScheduling it can land anywhere; onRealNode places the first pods.
func workloadPod(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](gracePeriod),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name:  "app",
				Image: localcluster.WorkloadImage,
				Env:   []corev1.EnvVar{{Name: "SHUTDOWN_DELAY", Value: shutdownDelay.String()}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

// onRealNode makes the scheduler place what create creates on the real node: the kwok nodes
// are cordoned meanwhile.
func onRealNode(t *testing.T, create func()) {
	t.Helper()
	var nodes corev1.NodeList
	if err := framework.Client().List(t.Context(), &nodes, client.MatchingLabels{localcluster.NodeTypeLabel: "kwok"}); err != nil {
		t.Fatal(err)
	}
	var kwok []string
	for _, n := range nodes.Items {
		kwok = append(kwok, n.Name)
	}
	kubectl(t, append([]string{"cordon"}, kwok...)...)
	defer kubectl(t, append([]string{"uncordon"}, kwok...)...)
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

// terminations records, per pod on the real node, the last status the kubelet wrote before
// the pod went away, and when its deletion was asked.
type terminations struct {
	mu   sync.Mutex
	last map[string]*corev1.Pod
	gone map[string]bool
	// asked is when the pod's deletion was asked: its first deletion timestamp less its grace
	// period (the kubelet's final deletion moves the timestamp to its own time).
	asked map[string]time.Time
}

func watchTerminations(t *testing.T, ns string) *terminations {
	t.Helper()
	pods := framework.Cluster().Client().CoreV1().Pods(ns)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + localcluster.RealNodeName})
	if err != nil {
		t.Fatal(err)
	}
	tr := &terminations{last: map[string]*corev1.Pod{}, gone: map[string]bool{}, asked: map[string]time.Time{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			tr.mu.Lock()
			tr.last[pod.Name] = pod
			if _, ok := tr.asked[pod.Name]; !ok && pod.DeletionTimestamp != nil {
				tr.asked[pod.Name] = pod.DeletionTimestamp.Add(-time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) * time.Second)
			}
			if ev.Type == watch.Deleted {
				tr.gone[pod.Name] = true
			}
			tr.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return tr
}

// terminated returns the container app's terminated state of the pod and when its deletion was
// asked, once the pod is gone.
func (tr *terminations) terminated(name string) (*corev1.Pod, *corev1.ContainerStateTerminated, time.Time, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	pod := tr.last[name]
	if pod == nil || !tr.gone[name] {
		return pod, nil, time.Time{}, false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "app" {
			return pod, cs.State.Terminated, tr.asked[name], true
		}
	}
	return pod, nil, tr.asked[name], true
}

// expectGracefulExit checks that the pod's container received SIGTERM, as its termination
// message says, and exited 0 within its grace period, by the kubelet's own account.
func expectGracefulExit(t *testing.T, tr *terminations, name string) {
	t.Helper()
	var pod *corev1.Pod
	var term *corev1.ContainerStateTerminated
	var asked time.Time
	testutil.Eventually(t, timeout, "pod "+name+" gone from the real node", func(context.Context) (bool, string, error) {
		var gone bool
		pod, term, asked, gone = tr.terminated(name)
		return gone, "", nil
	})
	if term == nil {
		t.Fatalf("pod %s: the kubelet reported no terminated state for its container: %+v", name, pod.Status.ContainerStatuses)
	}
	if term.ExitCode != 0 {
		t.Errorf("pod %s: container exited %d (%s); want 0", name, term.ExitCode, term.Reason)
	}
	if !strings.Contains(term.Message, "received terminated") {
		t.Errorf("pod %s: container's message %q; want it to have received SIGTERM", name, term.Message)
	}
	if asked.IsZero() {
		t.Fatalf("pod %s: never seen terminating", name)
	}
	// finishedAt has the kubelet's second precision.
	took := term.FinishedAt.Sub(asked)
	t.Logf("pod %s: deletion to exit %v (shutdown delay %v, grace period %ds): %q", name, took, shutdownDelay, gracePeriod, term.Message)
	if took < shutdownDelay-time.Second || took > gracePeriod*time.Second {
		t.Errorf("pod %s: exited %v after its deletion; want about %v, within the grace period of %ds", name, took, shutdownDelay, gracePeriod)
	}
}

func podsOn(t *testing.T, ns, node string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": node}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func isReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	return podutils.IsPodReady(pod)
}

// TestDrainRealNode: a single-replica Deployment behind a budget that allows no disruption,
// and a StatefulSet's pod, run on the real node; a maintenance drains it. The Deployment's
// replacement starts on another node before its old pod goes (never below its one replica, by
// the invariant checker), the StatefulSet's pod is evicted and comes back elsewhere, and each
// old container really receives SIGTERM and exits within its grace period, by the kubelet's
// own account of it.
func TestDrainRealNode(t *testing.T) {
	requireRealNode(t)
	ns := framework.Namespace(t)
	framework.NewController(t).Start()

	webLabels, dbLabels := map[string]string{"app": "web"}, map[string]string{"app": "db"}
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: webLabels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: workloadPod(webLabels),
		},
	}
	webPDB := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: webLabels}},
	}
	db := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: dbLabels},
			Template: workloadPod(dbLabels),
		},
	}
	onRealNode(t, func() {
		create(t, webPDB, db)
		framework.CreateDeployment(t, web)
		testutil.Eventually(t, timeout, "StatefulSet db ready", func(ctx context.Context) (bool, string, error) {
			err := framework.Client().Get(ctx, client.ObjectKeyFromObject(db), db)
			return db.Status.ReadyReplicas == 1, fmt.Sprintf("%d ready", db.Status.ReadyReplicas), err
		})
	})
	old := podsOn(t, ns, localcluster.RealNodeName)
	if len(old) != 2 {
		t.Fatalf("%d pods on the real node, want the Deployment's and the StatefulSet's", len(old))
	}
	for i := range old {
		if !isReady(&old[i]) || old[i].Status.PodIP == "" {
			t.Fatalf("pod %s on the real node: not Ready, or no IP: %+v", old[i].Name, old[i].Status)
		}
		t.Logf("pod %s runs on %s with IP %s", old[i].Name, old[i].Spec.NodeName, old[i].Status.PodIP)
	}

	checker, err := invariants.Start(context.Background(), framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{Namespaces: []string{ns}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = checker.Stop() }()
	if budgets, deployments := checker.Watched(); budgets != 1 || deployments != 1 {
		t.Fatalf("the invariant checker watches %d budgets and %d Deployments, want web's", budgets, deployments)
	}
	tr := watchTerminations(t, ns)

	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "real-node-drain"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(localcluster.RealNodeName), Cordon: true, Drain: true, Reason: "e2e real node",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Second},
		},
	}
	start := time.Now()
	create(t, nm)
	t.Cleanup(func() {
		_ = framework.Client().Delete(context.Background(), nm)
		testutil.Eventually(t, timeout, "NodeMaintenance gone", func(ctx context.Context) (bool, string, error) {
			err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm)
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		})
	})
	testutil.Eventually(t, timeout, "the real node drained", func(ctx context.Context) (bool, string, error) {
		v, err := testutil.ViewStatus(ctx, framework.Client(), nm.Name, "")
		return v.Drained == "True" && v.Phase == nodemaintv1alpha1.PhaseDrainComplete, fmt.Sprintf("%+v", v), err
	})
	t.Logf("drained in %v", time.Since(start).Round(100*time.Millisecond))

	for _, p := range old {
		expectGracefulExit(t, tr, p.Name)
	}
	framework.WaitDeploymentAvailable(t, ns, "web")
	testutil.Eventually(t, timeout, "StatefulSet db ready again", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(db), db)
		return db.Status.ReadyReplicas == 1, fmt.Sprintf("%d ready", db.Status.ReadyReplicas), err
	})
	var pods corev1.PodList
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == localcluster.RealNodeName {
			t.Errorf("pod %s still on the drained real node", p.Name)
		} else {
			t.Logf("pod %s now runs on %s", p.Name, p.Spec.NodeName)
		}
	}
	if v := checker.Violations(); len(v) > 0 {
		t.Errorf("invariant violations: %v", v)
	}
}

func realNode(ctx context.Context) (*corev1.Node, error) {
	node := &corev1.Node{}
	return node, framework.Client().Get(ctx, client.ObjectKey{Name: localcluster.RealNodeName}, node)
}

func nodeCondition(node *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// TestRebootRealNode: a rollout with release Rebooted over the real node. Once the node is
// drained, it is rebooted for real: the kubelet stops and the node goes NotReady (the node
// lifecycle controller's verdict, as no heartbeat comes), its containers are killed and
// containerd stops; then containerd and the kubelet start again with a new boot ID. The rollout
// sees the new boot ID, and once the node is Ready again releases it: uncordoned.
func TestRebootRealNode(t *testing.T) {
	requireRealNode(t)
	ns := framework.Namespace(t)
	framework.NewController(t).Start()
	ctx := t.Context()

	// A pod to drain, so that the node's turn has work: a Deployment that surges elsewhere.
	labels := map[string]string{"app": "rebooted"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rebooted"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: workloadPod(labels),
		},
	}
	onRealNode(t, func() { framework.CreateDeployment(t, d) })
	before, err := realNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldBootID := before.Status.NodeInfo.BootID
	if want, _ := framework.Cluster().RealNodeBootID(); oldBootID != want {
		t.Fatalf("the node reports boot ID %q, the kubelet's mount namespace has %q", oldBootID, want)
	}

	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "real-node-reboot"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(localcluster.RealNodeName), Cordon: true, Drain: true, Reason: "e2e real node reboot",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Second},
			Rollout:                   &nodemaintv1alpha1.RolloutSpec{Release: nodemaintv1alpha1.ReleaseRebooted},
		},
	}
	start := time.Now()
	create(t, nm)
	t.Cleanup(func() {
		_ = framework.Client().Delete(context.Background(), nm)
		testutil.Eventually(t, timeout, "NodeMaintenance gone", func(ctx context.Context) (bool, string, error) {
			err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm)
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		})
	})

	// The reboot daemon's part: wait for the node's Drained condition (KEP-5683).
	testutil.Eventually(t, timeout, "the real node Drained", func(ctx context.Context) (bool, string, error) {
		node, err := realNode(ctx)
		return nodeCondition(node, corev1.NodeDrained) == corev1.ConditionTrue && node.Spec.Unschedulable, fmt.Sprint(node.Status.Conditions), err
	})
	t.Logf("drained in %v; rebooting", time.Since(start).Round(100*time.Millisecond))
	if err := framework.Cluster().ShutDownRealNode(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	testutil.Eventually(t, timeout, "the real node NotReady", func(ctx context.Context) (bool, string, error) {
		node, err := realNode(ctx)
		return nodeCondition(node, corev1.NodeReady) != corev1.ConditionTrue, string(nodeCondition(node, corev1.NodeReady)), err
	})
	t.Logf("NotReady %v after the kubelet stopped", time.Since(down).Round(100*time.Millisecond))
	// Down, the node is not released: its boot ID has not changed yet.
	if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm); err != nil {
		t.Fatal(err)
	}
	if nm.Status.Rollout == nil || nm.Status.Rollout.NodesDone != 0 {
		t.Fatalf("rollout status while the node is down: %+v; want the node in its turn", nm.Status.Rollout)
	}
	if err := framework.Cluster().BootRealNode(ctx); err != nil {
		t.Fatal(err)
	}
	booted := time.Now()
	testutil.Eventually(t, timeout, "the real node Ready with a new boot ID", func(ctx context.Context) (bool, string, error) {
		node, err := realNode(ctx)
		id := node.Status.NodeInfo.BootID
		return nodeCondition(node, corev1.NodeReady) == corev1.ConditionTrue && id != oldBootID && id != "", fmt.Sprintf("Ready %s, boot ID %s", nodeCondition(node, corev1.NodeReady), id), err
	})
	t.Logf("Ready %v after the kubelet started", time.Since(booted).Round(100*time.Millisecond))
	after, err := realNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := framework.Cluster().RealNodeBootID(); after.Status.NodeInfo.BootID != want {
		t.Errorf("the node reports boot ID %q after its reboot, the kubelet's mount namespace has %q", after.Status.NodeInfo.BootID, want)
	}
	testutil.Eventually(t, timeout, "the real node released and uncordoned", func(ctx context.Context) (bool, string, error) {
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm); err != nil {
			return false, "", err
		}
		node, err := realNode(ctx)
		r := nm.Status.Rollout
		return r != nil && r.NodesDone == 1 && len(r.InTurn) == 0 && !node.Spec.Unschedulable, fmt.Sprintf("rollout %+v, unschedulable %v", r, node.Spec.Unschedulable), err
	})
	t.Logf("released %v after the maintenance was created", time.Since(start).Round(100*time.Millisecond))
	framework.WaitDeploymentAvailable(t, ns, "rebooted")
}

// TestKubeletEvictionAndStuckPod: on the real node, the kubelet itself evicts a pod that writes
// past its emptyDir's sizeLimit (Failed, reason Evicted, its container killed), and a pod whose
// container ignores SIGTERM stays terminating through its grace period once drained: the
// maintenance's status names it (Terminating) while it is stuck, the kubelet SIGKILLs it at the
// end of its grace period, and the drain then completes.
func TestKubeletEvictionAndStuckPod(t *testing.T) {
	requireRealNode(t)
	ns := framework.Namespace(t)
	framework.NewController(t).Start()
	ctx := t.Context()
	const stuckGrace = 25

	hog := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hog"},
		Spec: corev1.PodSpec{
			NodeName:                     localcluster.RealNodeName,
			AutomountServiceAccountToken: ptr.To(false),
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: ptr.To(resource.MustParse("1Mi")),
			}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: localcluster.WorkloadImage,
				Env:          []corev1.EnvVar{{Name: "WRITE_BYTES", Value: strconv.Itoa(8 << 20)}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
		},
	}
	stuck := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck"},
		Spec: corev1.PodSpec{
			NodeName:                      localcluster.RealNodeName,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](stuckGrace),
			Containers: []corev1.Container{{
				Name: "app", Image: localcluster.WorkloadImage,
				Env: []corev1.EnvVar{{Name: "IGNORE_SIGTERM", Value: "true"}},
			}},
		},
	}
	tr := watchTerminations(t, ns)
	create(t, hog, stuck)

	start := time.Now()
	// The kubelet's eviction manager kills the pod and records an Event Evicted. The pod's
	// status says so (phase Failed, reason Evicted, DisruptionTarget TerminationByKubelet) only
	// sometimes: seen here too is phase Succeeded with neither, when the status the pod worker
	// derives from the container (which exits 0 on SIGTERM) overwrites the eviction manager's.
	var evicted string
	testutil.Eventually(t, timeout, "the kubelet evicts hog", func(ctx context.Context) (bool, string, error) {
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(hog), hog); err != nil {
			return false, "", err
		}
		var events corev1.EventList
		if err := framework.Client().List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "hog" && e.Reason == "Evicted" && e.Source.Component == "kubelet" {
				evicted = e.Message
			}
		}
		terminal := hog.Status.Phase == corev1.PodFailed || hog.Status.Phase == corev1.PodSucceeded
		return evicted != "" && terminal, fmt.Sprintf("phase %s, Evicted event %q", hog.Status.Phase, evicted), nil
	})
	t.Logf("the kubelet evicted hog after %v (%q): phase %s, reason %q", time.Since(start).Round(100*time.Millisecond), evicted, hog.Status.Phase, hog.Status.Reason)
	testutil.Eventually(t, timeout, "stuck running", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(stuck), stuck)
		return stuck.Status.Phase == corev1.PodRunning, string(stuck.Status.Phase), err
	})

	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "real-node-stuck"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(localcluster.RealNodeName), Cordon: true, Drain: true, Reason: "e2e real node stuck pod",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 2 * time.Second},
		},
	}
	create(t, nm)
	drainStart := time.Now()
	t.Cleanup(func() {
		_ = framework.Client().Delete(context.Background(), nm)
		testutil.Eventually(t, timeout, "NodeMaintenance gone", func(ctx context.Context) (bool, string, error) {
			err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm)
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		})
	})
	testutil.Eventually(t, timeout, "the status names stuck as Terminating", func(ctx context.Context) (bool, string, error) {
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm); err != nil {
			return false, "", err
		}
		st := nm.Status.Nodes[localcluster.RealNodeName]
		for _, b := range st.Blocked {
			if b.Reason == nodemaintv1alpha1.BlockedReasonTerminating && slices.Contains(b.Pods, ns+"/stuck") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%+v", st), nil
	})
	t.Logf("status of the real node while stuck terminates: %+v", nm.Status.Nodes[localcluster.RealNodeName])
	if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(hog), hog); err == nil {
		t.Logf("the kubelet-evicted pod hog is still there: %s %s", hog.Status.Phase, hog.Status.Reason)
	} else if apierrors.IsNotFound(err) {
		t.Logf("the kubelet-evicted pod hog is gone")
	}

	// The kubelet SIGKILLs stuck at the end of its grace period; then the node is drained.
	var term *corev1.ContainerStateTerminated
	var asked time.Time
	testutil.Eventually(t, timeout, "stuck gone", func(context.Context) (bool, string, error) {
		var gone bool
		_, term, asked, gone = tr.terminated("stuck")
		return gone, "", nil
	})
	if term == nil {
		t.Fatal("stuck: the kubelet reported no terminated state")
	}
	took := term.FinishedAt.Sub(asked)
	t.Logf("stuck: deletion to exit %v, exit code %d (%s), message %q", took, term.ExitCode, term.Reason, term.Message)
	if term.ExitCode != 137 {
		t.Errorf("stuck: exit code %d, want SIGKILL's (137)", term.ExitCode)
	}
	if !strings.Contains(term.Message, "ignored") {
		t.Errorf("stuck: message %q, want SIGTERM ignored", term.Message)
	}
	if took < (stuckGrace-1)*time.Second || took > (stuckGrace+5)*time.Second {
		t.Errorf("stuck: killed %v after its deletion, want at the end of its %ds grace period", took, stuckGrace)
	}
	testutil.Eventually(t, timeout, "the real node drained", func(ctx context.Context) (bool, string, error) {
		v, err := testutil.ViewStatus(ctx, framework.Client(), nm.Name, "")
		return v.Drained == "True" && v.Phase == nodemaintv1alpha1.PhaseDrainComplete, fmt.Sprintf("%+v", v), err
	})
	t.Logf("drained %v after the maintenance was created", time.Since(drainStart).Round(100*time.Millisecond))
}
