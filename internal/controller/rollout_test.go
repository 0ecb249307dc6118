package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

// readyNode creates a Ready node with a boot ID, as a kubelet reports it.
func readyNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	createNode(t, name, labels, false)
	setNodeBoot(t, name, "boot-1")
}

// setNodeBoot sets the node's boot ID and makes it Ready, as a kubelet does after a reboot.
func setNodeBoot(t *testing.T, name, bootID string) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	orig := node.DeepCopy()
	node.Status.NodeInfo.BootID = bootID
	now := metav1.Now()
	node.Status.Conditions = slices.DeleteFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now})
	if err := k8s.Status().Patch(ctx, node, client.StrategicMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// watchUnschedulable watches the nodes and returns the most of the named nodes that were
// unschedulable at once, at any event.
func watchUnschedulable(t *testing.T, names ...string) (most func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &corev1.NodeList{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	peak := 0
	state := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			node, ok := ev.Object.(*corev1.Node)
			if !ok || !slices.Contains(names, node.Name) {
				continue
			}
			mu.Lock()
			state[node.Name] = ev.Type != watch.Deleted && node.Spec.Unschedulable
			n := 0
			for _, u := range state {
				if u {
					n++
				}
			}
			peak = max(peak, n)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

func createRollout(t *testing.T, name string, rollout *nodemaintv1alpha1.RolloutSpec, nodes ...string) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(nodes...), Cordon: true, Drain: true, Reason: "kernel upgrade",
			EvictionPolicy: nodemaintv1alpha1.EvictionPolicySignalOnly, Rollout: rollout,
		},
	}
	if err := k8s.Create(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
}

func getNM(ctx context.Context, name string) (*nodemaintv1alpha1.NodeMaintenance, error) {
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	return nm, k8s.Get(ctx, types.NamespacedName{Name: name}, nm)
}

func hasCondition(node *corev1.Node, t corev1.NodeConditionType) bool {
	return slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == t && c.Status == corev1.ConditionTrue })
}

// A rollout with maxUnavailable 2 and release Rebooted, driven by a reboot daemon that waits for
// the KEP-5683 Drained condition: never more than 2 nodes cordoned at once, each node released
// only after its reboot, every node restored at the end and the maintenance complete.
func TestRolloutRebooted(t *testing.T) {
	names := []string{"roll-a", "roll-b", "roll-c", "roll-d", "roll-e"}
	for _, n := range names {
		readyNode(t, n, nil)
	}
	most := watchUnschedulable(t, names...)
	createRollout(t, "rollout-rebooted", &nodemaintv1alpha1.RolloutSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(2)), Release: nodemaintv1alpha1.ReleaseRebooted,
	}, names...)

	// The reboot daemon: a drained node (Drained=True) reboots once.
	rebooted := map[string]bool{}
	eventually(t, "every node rebooted in its turn and released", func(ctx context.Context) (bool, string, error) {
		for _, n := range names {
			node := &corev1.Node{}
			if err := k8s.Get(ctx, types.NamespacedName{Name: n}, node); err != nil {
				return false, "", err
			}
			if hasCondition(node, corev1.NodeDrained) && !rebooted[n] {
				if !node.Spec.Unschedulable {
					return false, "", fmt.Errorf("node %s Drained but not cordoned", n)
				}
				if !hasCondition(node, corev1.NodeMaintenanceInProgress) {
					return false, "", fmt.Errorf("node %s Drained but not under maintenance: %+v; want %s", n, node.Status.Conditions, corev1.NodeMaintenanceInProgress)
				}
				rebooted[n] = true
				setNodeBoot(t, n, "boot-2")
			}
		}
		nm, err := getNM(ctx, "rollout-rebooted")
		if err != nil || nm.Status.Rollout == nil {
			return false, "no rollout status", err
		}
		r := nm.Status.Rollout
		return nm.Status.Phase == nodemaintv1alpha1.PhaseMaintenanceComplete && r.NodesDone == 5,
			fmt.Sprintf("phase %s, done %d, in turn %d, waiting %d", nm.Status.Phase, r.NodesDone, r.NodesInTurn, r.NodesWaiting), nil
	})
	if len(rebooted) != len(names) {
		t.Errorf("rebooted %v, want every node", rebooted)
	}
	eventually(t, "every node restored", func(ctx context.Context) (bool, string, error) {
		for _, n := range names {
			node := &corev1.Node{}
			if err := k8s.Get(ctx, types.NamespacedName{Name: n}, node); err != nil {
				return false, "", err
			}
			for _, c := range node.Status.Conditions {
				if c.Reason == nodemaintv1alpha1.NodeConditionReasonNodeMaintenance || c.Type == nodemaintv1alpha1.NodeConditionUnderMaintenance {
					return false, fmt.Sprintf("%s has %s", n, c.Type), nil
				}
			}
			if node.Spec.Unschedulable || slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodemaintv1alpha1.PlannedMaintenanceTaint }) {
				return false, fmt.Sprintf("%s unschedulable %v, taints %v", n, node.Spec.Unschedulable, node.Spec.Taints), nil
			}
		}
		return true, "", nil
	})
	if m := most(); m != 2 {
		t.Errorf("at most %d nodes unschedulable at once; want 2 (the budget, used)", m)
	}
}

// A rollout halts while a pod created since it started cannot be scheduled, and resumes once it
// can; with release Manual, a node's turn ends when the node annotation completes it.
func TestRolloutHaltsAndManualRelease(t *testing.T) {
	names := []string{"halt-a", "halt-b", "halt-c"}
	for _, n := range names {
		readyNode(t, n, nil)
	}
	most := watchUnschedulable(t, names...)
	createRollout(t, "rollout-manual", &nodemaintv1alpha1.RolloutSpec{Release: nodemaintv1alpha1.ReleaseManual}, names...)
	status := func(ctx context.Context) (*nodemaintv1alpha1.RolloutStatus, *metav1.Condition, error) {
		nm, err := getNM(ctx, "rollout-manual")
		if err != nil || nm.Status.Rollout == nil {
			return &nodemaintv1alpha1.RolloutStatus{}, nil, err
		}
		return nm.Status.Rollout, meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted), nil
	}
	eventually(t, "halt-a in its turn (first by name), the others waiting", func(ctx context.Context) (bool, string, error) {
		r, _, err := status(ctx)
		return len(r.InTurn) == 1 && r.InTurn[0].Name == "halt-a" && r.NodesWaiting == 2, fmt.Sprintf("%+v", r), err
	})

	// A replacement that cannot be scheduled.
	pod := createUnschedulablePod(t, "replacement")
	eventually(t, "the rollout halted on the unschedulable replacement", func(ctx context.Context) (bool, string, error) {
		_, c, err := status(ctx)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == nodemaintv1alpha1.ReasonReplacementsUnschedulable, fmt.Sprintf("%+v", c), err
	})

	// Completing halt-a ends its turn; halted, no node starts. The status that counts halt-a done
	// was decided with the rollout halted: the turns decided then, with a place free, are the
	// evidence that nothing starts while it is.
	complete(t, "halt-a", "rollout-manual")
	eventually(t, "halt-a released and uncordoned, decided with the rollout halted: nothing started", func(ctx context.Context) (bool, string, error) {
		r, c, err := status(ctx)
		node := &corev1.Node{}
		if err == nil {
			err = k8s.Get(ctx, types.NamespacedName{Name: "halt-a"}, node)
		}
		halted := c != nil && c.Status == metav1.ConditionTrue && c.Reason == nodemaintv1alpha1.ReasonReplacementsUnschedulable
		return r.NodesDone == 1 && halted && !node.Spec.Unschedulable, fmt.Sprintf("%+v %+v, halt-a unschedulable %v", r, c, node.Spec.Unschedulable), err
	})
	// Looked at again since (a drain under way is looked at every 5s), still nothing.
	looked := time.Now()
	expectReconciled(t, "nodemaintenance", "rollout-manual", looked, "")
	if r, c, err := status(context.Background()); err != nil || len(r.InTurn) != 0 || r.NodesWaiting != 2 {
		t.Fatalf("a node started while the rollout is halted: %+v %+v (%v)", r, c, err)
	}

	// The replacement is placed: the rollout resumes.
	deletePod(pod)
	eventually(t, "the rollout resumed with halt-b", func(ctx context.Context) (bool, string, error) {
		r, c, err := status(ctx)
		return len(r.InTurn) == 1 && r.InTurn[0].Name == "halt-b" && c != nil && c.Status == metav1.ConditionFalse, fmt.Sprintf("%+v %+v", r, c), err
	})
	complete(t, "halt-b", "rollout-manual")
	complete(t, "halt-c", "rollout-manual")
	eventually(t, "the rollout complete", func(ctx context.Context) (bool, string, error) {
		r, c, err := status(ctx)
		return r.NodesDone == 3 && c != nil && c.Reason == nodemaintv1alpha1.ReasonRolloutComplete, fmt.Sprintf("%+v %+v", r, c), err
	})
	if m := most(); m != 1 {
		t.Errorf("at most %d nodes unschedulable at once; want 1", m)
	}
}

// complete sets the node annotation that completes the node's turn in the maintenance.
func complete(t *testing.T, node, nm string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, nodemaintv1alpha1.CompleteAnnotation, nm))
	if err := k8s.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// A rollout that only cordons (release Manual: the admin does the work on each node) halts on a
// pod that cannot be scheduled, and resumes once the pod is gone, though nothing on a selected
// node changes: no drain refreshes its status now and then.
func TestRolloutCordonOnlyResumes(t *testing.T) {
	names := []string{"cordon-a", "cordon-b"}
	for _, n := range names {
		readyNode(t, n, nil)
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "rollout-cordon"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(names...), Cordon: true, Reason: "rack move",
			Rollout: &nodemaintv1alpha1.RolloutSpec{Release: nodemaintv1alpha1.ReleaseManual},
		},
	}
	if err := k8s.Create(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	status := func(ctx context.Context) (*nodemaintv1alpha1.RolloutStatus, *metav1.Condition, error) {
		nm, err := getNM(ctx, "rollout-cordon")
		if err != nil || nm.Status.Rollout == nil {
			return &nodemaintv1alpha1.RolloutStatus{}, nil, err
		}
		return nm.Status.Rollout, meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted), nil
	}
	eventually(t, "cordon-a in its turn", func(ctx context.Context) (bool, string, error) {
		r, _, err := status(ctx)
		return len(r.InTurn) == 1 && r.InTurn[0].Name == "cordon-a", fmt.Sprintf("%+v", r), err
	})

	pod := createUnschedulablePod(t, "unplaced")
	complete(t, "cordon-a", "rollout-cordon")
	eventually(t, "cordon-a released, halted on the pod", func(ctx context.Context) (bool, string, error) {
		r, c, err := status(ctx)
		return r.NodesDone == 1 && len(r.InTurn) == 0 && c != nil && c.Status == metav1.ConditionTrue && c.Reason == nodemaintv1alpha1.ReasonReplacementsUnschedulable,
			fmt.Sprintf("%+v %+v", r, c), err
	})

	deletePod(pod)
	eventually(t, "the rollout resumed with cordon-b", func(ctx context.Context) (bool, string, error) {
		r, c, err := status(ctx)
		return len(r.InTurn) == 1 && r.InTurn[0].Name == "cordon-b" && c != nil && c.Status == metav1.ConditionFalse, fmt.Sprintf("%+v %+v", r, c), err
	})
}

// createUnschedulablePod creates a pod the scheduler could not place, as the scheduler reports it
// (PodScheduled False, reason Unschedulable).
func createUnschedulablePod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(pod) })
	orig := pod.DeepCopy()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu.", LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Patch(context.Background(), pod, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	return pod
}
