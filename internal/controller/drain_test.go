package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Without a kubelet, an evicted pod stays terminating: these tests see evictions as a deletion
// timestamp, and remove pods themselves where the drain must see them gone.

func createDrainNM(t *testing.T, name string, timeout time.Duration, nodes ...string) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(nodes...), Cordon: true, Drain: true, Reason: "drain test",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: timeout},
		},
	}
	if err := k8s.Create(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
}

func ownedByReplicaSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
}

func withLabels(l map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels = l }
}

func getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	return pod, k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, pod)
}

func expectEvicted(t *testing.T, name string) { t.Helper(); testutil.ExpectEvicted(t, k8s, name) }

func notEvicted(t *testing.T, name string) { t.Helper(); testutil.ExpectNotEvicted(t, k8s, name) }

// expectBlocked waits until the node's status names the pod with the reason and a message
// containing msg.
func expectBlocked(t *testing.T, nm, node, pod, reason, msg string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s blocked by %s", pod, reason), func(ctx context.Context) (bool, string, error) {
		obj := &nodemaintv1alpha1.NodeMaintenance{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: nm}, obj); err != nil {
			return false, "", err
		}
		blocked := obj.Status.Nodes[node].Blocked
		for _, b := range blocked {
			for _, p := range b.Pods {
				if p == "default/"+pod && b.Reason == reason && strings.Contains(b.Message, msg) {
					return true, "", nil
				}
			}
		}
		return false, fmt.Sprintf("%+v", blocked), nil
	})
}

// TestEvictionFallback: a declined pod is evicted at once, an unanswered one after the response
// timeout, and an accepted one never. A bare pod waits the response timeout like the others (an
// operator may answer for it), and the status and an Event say that it will not come back.
func TestEvictionFallback(t *testing.T) {
	createNode(t, "evict-node", nil, false)
	createPod(t, "evict-bare", "evict-node")
	createPod(t, "evict-silent", "evict-node", ownedByReplicaSet)
	createPod(t, "evict-declined", "evict-node", ownedByReplicaSet)
	createPod(t, "evict-accepted", "evict-node", ownedByReplicaSet)
	createDrainNM(t, "evict", 4*time.Second, "evict-node")

	expectBlocked(t, "evict", "evict-node", "evict-bare", nodemaintv1alpha1.BlockedReasonWaitingForOwner, "bare pod (no controller): it will not be recreated once evicted; waiting up to 4s")
	if e := expectWarning(t, "Pod", "evict-bare", "BarePod"); !strings.Contains(e.Note, "will not be recreated") {
		t.Errorf("the BarePod Event does not say the pod will not come back: %q", e.Note)
	}
	expectBlocked(t, "evict", "evict-node", "evict-silent", nodemaintv1alpha1.BlockedReasonWaitingForOwner, "waiting up to 4s")
	setPodCondition(t, "evict-accepted", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Surge", Message: "waiting for Deployment web to surge"})
	setPodCondition(t, "evict-declined", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: "NoCapacity"})
	expectEvicted(t, "evict-declined")
	expectBlocked(t, "evict", "evict-node", "evict-accepted", nodemaintv1alpha1.BlockedReasonEvacuatingByOwner, "waiting for Deployment web to surge")

	expectEvicted(t, "evict-silent")
	expectEvicted(t, "evict-bare")
	notEvicted(t, "evict-accepted")
}

// TestOwnPodsNeverEvicted: nodemaint-controller's own pods are asked to move like any other, but
// never evicted, however long their owner takes; the status says so. The other pods of the node
// are evicted.
func TestOwnPodsNeverEvicted(t *testing.T) {
	createNode(t, "own-node", nil, false)
	createPod(t, "own-controller", "own-node", ownedByReplicaSet, withLabels(ownPodLabels))
	createPod(t, "own-other", "own-node", ownedByReplicaSet)
	createDrainNM(t, "own", time.Second, "own-node")

	expectEvicted(t, "own-other")
	expectRequest(t, "own-controller", "True/NodeMaintenance/drain test")
	expectBlocked(t, "own", "own-node", "own-controller", nodemaintv1alpha1.BlockedReasonProtected, "nodemaint-controller's own pod: never evicted or deleted by nodemaint")
	notEvicted(t, "own-controller")
}

// TestDrainLabelPolicyIgnore: with drainLabelPolicy Ignore, a pod's nodemaint.dev/drain=skip label
// does not keep it on the node: it is drained like the others. With the default (Honor) it stays.
func TestDrainLabelPolicyIgnore(t *testing.T) {
	ctx := context.Background()
	skip := withLabels(map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip})
	createNode(t, "label-ignored", nil, false)
	createNode(t, "label-honored", nil, false)
	createPod(t, "label-ignored-app", "label-ignored", ownedByReplicaSet, skip)
	createPod(t, "label-honored-app", "label-honored", ownedByReplicaSet, skip)
	createDrainNM(t, "label-honored", time.Second, "label-honored")
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "label-ignored"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor("label-ignored"), Cordon: true, Drain: true,
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Second},
			DrainLabelPolicy:          nodemaintv1alpha1.DrainLabelPolicyIgnore,
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })

	expectEvicted(t, "label-ignored-app")
	expectBlocked(t, "label-honored", "label-honored", "label-honored-app", nodemaintv1alpha1.BlockedReasonSkipped, "label nodemaint.dev/drain=skip")
	notEvicted(t, "label-honored-app")
}

// TestPodSelectorAndGracePeriod: kubectl drain's --pod-selector and --grace-period as a
// NodeMaintenance's podSelector and evictionGracePeriodSeconds: the pod it selects is asked and
// evicted with that grace period (the pod's deletionGracePeriodSeconds), the other is left
// running, never asked, and reported skipped by spec.podSelector.
func TestPodSelectorAndGracePeriod(t *testing.T) {
	ctx := context.Background()
	createNode(t, "selector-node", nil, false)
	createPod(t, "selector-web", "selector-node", ownedByReplicaSet, withLabels(map[string]string{"app": "web"}))
	createPod(t, "selector-db", "selector-node", ownedByReplicaSet, withLabels(map[string]string{"app": "db"}))
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "selector"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor("selector-node"), Cordon: true, Drain: true, Reason: "drain test",
			EvacuationResponseTimeout:  &nodemaintv1alpha1.Duration{Duration: time.Second},
			PodSelector:                &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			EvictionGracePeriodSeconds: ptr.To[int64](7),
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })

	expectEvicted(t, "selector-web")
	if pod, err := getPod(ctx, "selector-web"); err != nil || pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds != 7 {
		t.Errorf("selector-web evicted with grace period %v (%v), want 7s", pod.DeletionGracePeriodSeconds, err)
	}
	expectBlocked(t, "selector", "selector-node", "selector-db", nodemaintv1alpha1.BlockedReasonSkipped, "skipped: not selected by spec.podSelector")
	notEvicted(t, "selector-db")
	if got, err := requestOf(ctx, "selector-db"); err != nil || got != "" {
		t.Errorf("selector-db asked to move (%q, %v); a pod the podSelector leaves alone is not", got, err)
	}
}

// TestPodDisruptionBudgetHolds: an eviction a PodDisruptionBudget refuses is retried with back-off,
// and the status quotes the budget; without the budget the pod goes.
func TestPodDisruptionBudgetHolds(t *testing.T) {
	ctx := context.Background()
	createNode(t, "pdb-node", nil, false)
	guarded := createPod(t, "pdb-guarded", "pdb-node", withLabels(map[string]string{"app": "guarded"}))
	// The Eviction API ignores budgets for pods that do not run yet: make it run, as a kubelet would.
	guarded.Status.Phase = corev1.PodRunning
	guarded.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := k8s.Status().Update(ctx, guarded); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guard"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}
	if err := k8s.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	// There is no disruption controller here: write the status it would.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1, DisruptionsAllowed: 0,
	}
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	createDrainNM(t, "pdb", time.Second, "pdb-node")
	expectBlocked(t, "pdb", "pdb-node", "pdb-guarded", nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, "The disruption budget guard needs 1 healthy pods and has 1 currently")
	notEvicted(t, "pdb-guarded")
	if err := k8s.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	expectEvicted(t, "pdb-guarded")
}

// TestDrainRules: order groups drain one after the other; skipped and wait-completed pods are
// reported and never evicted.
func TestDrainRules(t *testing.T) {
	ctx := context.Background()
	rule := &nodemaintv1alpha1.DrainRule{
		ObjectMeta: metav1.ObjectMeta{Name: "late-databases"},
		Spec: nodemaintv1alpha1.DrainRuleSpec{
			Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorDrain, Order: ptr.To[int32](100)},
			Pods:  []nodemaintv1alpha1.DrainRulePodSelector{{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
		},
	}
	if err := k8s.Create(ctx, rule); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rule) })
	createNode(t, "rules-node", nil, false)
	early := createPod(t, "rules-web", "rules-node")
	createPod(t, "rules-db", "rules-node", withLabels(map[string]string{"app": "db"}))
	createPod(t, "rules-skip", "rules-node", withLabels(map[string]string{"nodemaint.dev/drain": "skip"}))
	createPod(t, "rules-batch", "rules-node", withLabels(map[string]string{"nodemaint.dev/drain": "wait-completed"}))
	createPod(t, "rules-tolerant", "rules-node", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	})
	createDrainNM(t, "rules", 2*time.Second, "rules-node")

	expectEvicted(t, "rules-web")
	expectBlocked(t, "rules", "rules-node", "rules-db", nodemaintv1alpha1.BlockedReasonWaitingForOrder, "order 100")
	expectBlocked(t, "rules", "rules-node", "rules-skip", nodemaintv1alpha1.BlockedReasonSkipped, "label nodemaint.dev/drain=skip")
	expectBlocked(t, "rules", "rules-node", "rules-tolerant", nodemaintv1alpha1.BlockedReasonSkipped, "tolerates node.kubernetes.io/unschedulable")
	expectBlocked(t, "rules", "rules-node", "rules-batch", nodemaintv1alpha1.BlockedReasonWaitCompleted, "label nodemaint.dev/drain=wait-completed")
	for _, p := range []string{"rules-db", "rules-skip", "rules-batch", "rules-tolerant"} {
		if got, err := requestOf(ctx, p); err != nil || got != "" {
			t.Errorf("pod %s: request %q (%v) before its turn", p, got, err)
		}
	}

	// The kubelet would now remove the evicted pod: the next group starts.
	deletePod(early)
	expectEvicted(t, "rules-db")
	// Once the batch pod completes, only skipped pods are left: drained.
	deletePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rules-db"}})
	deletePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rules-batch"}})
	expectStatus(t, "rules", "rules-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 1, Drained: "True"})
	notEvicted(t, "rules-skip")
	notEvicted(t, "rules-tolerant")
}
