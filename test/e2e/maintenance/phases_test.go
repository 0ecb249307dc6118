package maintenance_test

import (
	"context"
	"testing"

	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// spreadDeployment is a Deployment whose replicas the scheduler spreads evenly over the
// schedulable nodes.
func spreadDeployment(t *testing.T, namespace, name string, replicas int32) {
	t.Helper()
	d := framework.NewDeployment(namespace, name, replicas)
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:    d.Spec.Selector,
		NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
	}}
	framework.CreateDeployment(t, d)
}

func daemonSet(t *testing.T, namespace, name string) {
	t.Helper()
	labels := map[string]string{"app": name}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if err := framework.Client().Create(t.Context(), ds); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "DaemonSet "+name+" ready on every node", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(ds), ds)
		return ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled, "", err
	})
}

// TestPhases walks a NodeMaintenance through Planning → Cordon → Drain → (pods removed by
// someone else) Drain Complete → Maintenance Complete, checking the node, the pods and the status
// at each step.
func TestPhases(t *testing.T) {
	ns := framework.Namespace(t)
	startController(t)
	target := node(0)
	spreadDeployment(t, ns, "web", 5)
	daemonSet(t, ns, "agent")
	bare := barePod(t, ns, "bare", target)

	createNM(t, "phases", false, false, "kernel upgrade", target)
	expectNode(t, target, testutil.NodeView{PlannedTaint: true, Maintenances: "phases=Planning", Condition: "True/Planning"})
	expectStatus(t, "phases", target, testutil.StatusView{Phase: nodemaintv1alpha1.PhasePlanning, Selected: 1, Pending: 2, NodePending: 2, Drained: "False"})
	expectKstatus(t, "phases", kstatus.CurrentStatus, nodemaintv1alpha1.ReasonPlanned)
	expectRequests(t, ns, target, map[string]string{"web-": "", "bare": "", "agent-": ""})

	setNM(t, "phases", true, false)
	expectNode(t, target, testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "phases=Cordon", Condition: "True/Cordon"})
	expectStatus(t, "phases", target, testutil.StatusView{Phase: nodemaintv1alpha1.PhaseCordon, Selected: 1, Pending: 2, NodePending: 2, Drained: "False"})
	expectKstatus(t, "phases", kstatus.CurrentStatus, nodemaintv1alpha1.ReasonCordoned)
	expectRequests(t, ns, target, map[string]string{"web-": "", "bare": "", "agent-": ""})

	setNM(t, "phases", true, true)
	const requested = "True/NodeMaintenance/kernel upgrade"
	expectRequests(t, ns, target, map[string]string{"web-": requested, "bare": requested, "agent-": ""})
	expectNode(t, target, testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "phases=Drain", Condition: "True/Drain"})
	expectStatus(t, "phases", target, testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 1, Pending: 2, NodePending: 2, Drained: "False"})
	expectKstatus(t, "phases", kstatus.InProgressStatus, nodemaintv1alpha1.ReasonPodsPending)
	for i := 1; i < 5; i++ {
		expectNode(t, node(i), restored)
	}

	// An owner accepts: its pod counts as evacuating.
	setPodCondition(t, bare, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Test"})
	expectStatus(t, "phases", target, testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrain, Selected: 1, Pending: 2, Evacuating: 1, NodePending: 2, NodeEvacuating: 1, Drained: "False"})

	// Someone else removes the pods; the ReplicaSet's replacement lands elsewhere (cordoned).
	if out, err := framework.Kubectl(t, "delete", "pod", "-n", ns, "-l", "app=web", "--field-selector", "spec.nodeName="+target); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := framework.Kubectl(t, "delete", "pod", "-n", ns, "bare"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	expectStatus(t, "phases", target, testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 1, Drained: "True"})
	expectKstatus(t, "phases", kstatus.CurrentStatus, nodemaintv1alpha1.ReasonDrained)
	expectNode(t, target, testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "phases=DrainComplete", Condition: "True/DrainComplete"})
	framework.WaitDeploymentAvailable(t, ns, "web")
	expectRequests(t, ns, target, map[string]string{"agent-": ""})

	setNM(t, "phases", false, false)
	expectStatus(t, "phases", target, testutil.StatusView{Phase: nodemaintv1alpha1.PhaseMaintenanceComplete, Selected: 1, Drained: "False"})
	expectKstatus(t, "phases", kstatus.CurrentStatus, nodemaintv1alpha1.ReasonMaintenanceComplete)
	expectNode(t, target, restored)

	deleteNM(t, "phases")
	expectGone(t, "phases")
	expectNode(t, target, restored)
}

// TestOverlappingMaintenances: two maintenances on one node; deleting either keeps the node
// cordoned and the requests in place; deleting both restores everything.
func TestOverlappingMaintenances(t *testing.T) {
	ns := framework.Namespace(t)
	startController(t)
	target := node(1)
	barePod(t, ns, "app", target)
	createNM(t, "overlap-a", true, true, "firmware", target)
	createNM(t, "overlap-b", true, true, "kernel", target)
	expectNode(t, target, testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "overlap-a=Drain,overlap-b=Drain", Condition: "True/Drain"})
	expectRequests(t, ns, target, map[string]string{"app": "True/NodeMaintenance/firmware"})

	deleteNM(t, "overlap-a")
	expectGone(t, "overlap-a")
	expectNode(t, target, testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "overlap-b=Drain", Condition: "True/Drain"})
	expectRequests(t, ns, target, map[string]string{"app": "True/NodeMaintenance/kernel"})

	deleteNM(t, "overlap-b")
	expectGone(t, "overlap-b")
	expectNode(t, target, restored)
	expectRequests(t, ns, target, map[string]string{"app": ""})
}

// TestCordonedBeforeStaysCordoned: nodemaint restores only what it changed.
func TestCordonedBeforeStaysCordoned(t *testing.T) {
	startController(t)
	target := node(4)
	if out, err := framework.Kubectl(t, "cordon", target); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = framework.Kubectl(t, "uncordon", target) })
	createNM(t, "precordoned", true, false, "", target)
	expectNode(t, target, testutil.NodeView{Unschedulable: true, Maintenances: "precordoned=Cordon", Condition: "True/Cordon"})
	deleteNM(t, "precordoned")
	expectGone(t, "precordoned")
	expectNode(t, target, testutil.NodeView{Unschedulable: true})
}

// TestOtherRequesterUntouched: a descheduler's EvacuationRequest is neither overwritten nor
// withdrawn.
func TestOtherRequesterUntouched(t *testing.T) {
	ns := framework.Namespace(t)
	startController(t)
	target := node(2)
	theirs := barePod(t, ns, "theirs", target)
	barePod(t, ns, "ours", target)
	setPodCondition(t, theirs, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: "Descheduler", Message: "rebalancing"})
	createNM(t, "other", true, true, "maintenance", target)
	expectRequests(t, ns, target, map[string]string{"ours": "True/NodeMaintenance/maintenance", "theirs": "True/Descheduler/rebalancing"})
	deleteNM(t, "other")
	expectGone(t, "other")
	expectRequests(t, ns, target, map[string]string{"ours": "", "theirs": "True/Descheduler/rebalancing"})
}

// TestManualUncordonReverted: `kubectl uncordon` of a node under maintenance is undone within
// seconds, with a Warning Event on the node and on the NodeMaintenance.
func TestManualUncordonReverted(t *testing.T) {
	startController(t)
	target := node(3)
	createNM(t, "uncordon", true, false, "", target)
	cordoned := testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "uncordon=Cordon", Condition: "True/Cordon"}
	expectNode(t, target, cordoned)
	if out, err := framework.Kubectl(t, "uncordon", target); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	expectNode(t, target, cordoned)
	expectWarning(t, "UncordonReverted", "Node", target)
	expectWarning(t, "UncordonReverted", "NodeMaintenance", "uncordon")
	deleteNM(t, "uncordon")
	expectGone(t, "uncordon")
	expectNode(t, target, restored)
}

// TestControllerKilled: the controller is SIGKILLed while it marks pods and again while it
// restores; each restart converges to the same end state.
func TestControllerKilled(t *testing.T) {
	ns := framework.Namespace(t)
	ctrl := startController(t)
	nodes := []string{node(1), node(2), node(3)}
	spreadDeployment(t, ns, "crash", 15)

	createNM(t, "crash", true, true, "crash test", nodes...)
	testutil.Eventually(t, timeout, "a first pod requested", func(ctx context.Context) (bool, string, error) {
		pods, err := podsOn(ctx, ns, nodes[0])
		for _, p := range pods {
			if evacuation.Requested(p) {
				return true, "", err
			}
		}
		return false, "", err
	})
	ctrl.Kill()
	ctrl.Start(controllerArgs...)
	for _, n := range nodes {
		expectRequests(t, ns, n, map[string]string{"crash-": "True/NodeMaintenance/crash test"})
		expectNode(t, n, testutil.NodeView{Unschedulable: true, CordonedByUs: true, Maintenances: "crash=Drain", Condition: "True/Drain"})
	}

	deleteNM(t, "crash")
	ctrl.Kill()
	ctrl.Start(controllerArgs...)
	expectGone(t, "crash")
	for _, n := range nodes {
		expectNode(t, n, restored)
		expectRequests(t, ns, n, map[string]string{"crash-": ""})
	}
}
