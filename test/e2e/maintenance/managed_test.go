package maintenance_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// Rollouts that behave like managed offerings: a soak after each node (AKS's nodeSoakDuration),
// blocked nodes left cordoned while the rollout goes on (AKS's maxBlockedNodes), and
// control-plane nodes one at a time, a maintenance that would take them together refused. Each
// test adds a small pool of empty nodes of its own (label managedLabel), deleted after it.
const managedLabel = "e2e.nodemaint.dev/managed"

// createManaged creates a NodeMaintenance that cordons and drains the nodes with managedLabel=pool
// and deletes it when the test ends.
func createManaged(t *testing.T, name, pool string, mutate func(*nodemaintv1alpha1.NodeMaintenanceSpec)) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: managedLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{pool}}},
			}}},
			Cordon: true, Drain: true, Reason: "os upgrade",
		},
	}
	mutate(&nm.Spec)
	if err := framework.Client().Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := framework.Client().Delete(context.Background(), nm); client.IgnoreNotFound(err) == nil {
			expectGone(t, name)
		}
	})
}

// maintenanceWatch follows a NodeMaintenance on every watch event and checks each version with
// check, given the version before (nil for the first), recording the first failure.
type maintenanceWatch struct {
	mu     sync.Mutex
	failed string
	seen   []*nodemaintv1alpha1.NodeMaintenance
}

func watchMaintenance(t *testing.T, name string, check func(prev, cur *nodemaintv1alpha1.NodeMaintenance) string) *maintenanceWatch {
	t.Helper()
	w := &maintenanceWatch{}
	c, err := client.NewWithWatch(framework.Cluster().RESTConfig(), client.Options{Scheme: framework.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watcher, err := c.Watch(ctx, &nodemaintv1alpha1.NodeMaintenanceList{}, client.MatchingFields{"metadata.name": name})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range watcher.ResultChan() {
			nm, ok := e.Object.(*nodemaintv1alpha1.NodeMaintenance)
			if !ok {
				continue
			}
			w.mu.Lock()
			var prev *nodemaintv1alpha1.NodeMaintenance
			if len(w.seen) > 0 {
				prev = w.seen[len(w.seen)-1]
			}
			w.seen = append(w.seen, nm)
			if msg := check(prev, nm); msg != "" && w.failed == "" {
				w.failed = msg
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { watcher.Stop(); cancel(); <-done })
	return w
}

func (w *maintenanceWatch) failure() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *maintenanceWatch) any(cond func(*nodemaintv1alpha1.NodeMaintenance) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.seen, cond)
}

// cordonWatch follows the nodes with managedLabel=pool on every watch event: the most of them
// (among those named by which) unschedulable at once.
type cordonWatch struct {
	mu            sync.Mutex
	unschedulable map[string]bool
	ever          map[string]bool
	most          int
	which         func(*corev1.Node) bool
}

func watchCordons(t *testing.T, pool string, which func(*corev1.Node) bool) *cordonWatch {
	t.Helper()
	w := &cordonWatch{unschedulable: map[string]bool{}, ever: map[string]bool{}, which: which}
	ctx, cancel := context.WithCancel(context.Background())
	lw := toolscache.NewFilteredListWatchFromClient(framework.Cluster().Client().CoreV1().RESTClient(), "nodes", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = managedLabel + "=" + pool })
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, toolscache.Indexers{})
	observe := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok || !w.which(node) {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.unschedulable[node.Name] = node.Spec.Unschedulable
		w.ever[node.Name] = w.ever[node.Name] || node.Spec.Unschedulable
		n := 0
		for _, u := range w.unschedulable {
			if u {
				n++
			}
		}
		w.most = max(w.most, n)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) }})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !toolscache.WaitForCacheSync(t.Context().Done(), reg.HasSynced) {
		t.Fatal("the pool's nodes not listed")
	}
	return w
}

func (w *cordonWatch) stats() (most int, ever []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, e := range w.ever {
		if e {
			ever = append(ever, n)
		}
	}
	slices.Sort(ever)
	return w.most, ever
}

func rolloutCondition(nm *nodemaintv1alpha1.NodeMaintenance) *metav1.Condition {
	return meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
}

// TestRolloutSoak: with soakTime, after a node's turn ends no node starts its turn before the
// soak ran. Checked on every version of the status the watch delivers, by the status's own
// times (a turn new in a version started soakTime after its lastReleaseTime at the earliest),
// not by the test's clock; and the
// rollout was seen soaking (RolloutHalted False, Soaking, with soakingUntil).
func TestRolloutSoak(t *testing.T) {
	const name, pool, soak = "managed-soak", "soak", 3 * time.Second
	nodes := newNodePool(t).add(t, 3, map[string]string{managedLabel: pool})
	slices.Sort(nodes)
	startController(t)
	watch := watchMaintenance(t, name, func(prev, cur *nodemaintv1alpha1.NodeMaintenance) string {
		r := cur.Status.Rollout
		if r == nil || r.LastReleaseTime == nil {
			return ""
		}
		var was []string
		if prev != nil && prev.Status.Rollout != nil {
			was = inTurn(prev.Status.Rollout)
		}
		for _, turn := range r.InTurn {
			if !slices.Contains(was, turn.Name) && turn.Since.Time.Before(r.LastReleaseTime.Add(soak)) {
				return fmt.Sprintf("node %s started its turn at %s, within soakTime %s after the last release at %s", turn.Name,
					turn.Since.UTC().Format(time.RFC3339), soak, r.LastReleaseTime.UTC().Format(time.RFC3339))
			}
		}
		return ""
	})
	createManaged(t, name, pool, func(s *nodemaintv1alpha1.NodeMaintenanceSpec) {
		s.Rollout = &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2)), SoakTime: &nodemaintv1alpha1.Duration{Duration: soak}}
	})
	expectRollout(t, name, timeout, "every node released", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		c := rolloutCondition(nm)
		return r.NodesDone == 3 && c != nil && c.Reason == nodemaintv1alpha1.ReasonRolloutComplete
	})
	if f := watch.failure(); f != "" {
		t.Fatal(f)
	}
	if !watch.any(func(nm *nodemaintv1alpha1.NodeMaintenance) bool {
		c := rolloutCondition(nm)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == nodemaintv1alpha1.ReasonSoaking &&
			nm.Status.Rollout.SoakingUntil != nil && nm.Status.Rollout.NodesWaiting > 0 && strings.Contains(c.Message, "soakTime 3s")
	}) {
		t.Error("never seen soaking (RolloutHalted False, reason Soaking, status.rollout.soakingUntil)")
	}
	for _, n := range nodes {
		expectReleased(t, n, name+"="+string(nodemaintv1alpha1.PhaseReleased))
	}
}

// TestRolloutBlockedNodes: with maxBlockedNodes 1, the first node whose drain a budget blocks
// past drainTimeout is left cordoned, reported blocked, and no longer counted: the next node
// starts. The second blocked node is one too many: the rollout halts (onNodeFailure Pause).
// Once the budget lets go, both are drained and released, and the rollout completes.
func TestRolloutBlockedNodes(t *testing.T) {
	const name, pool = "managed-blocked", "blocked"
	nodes := newNodePool(t).add(t, 3, map[string]string{managedLabel: pool})
	slices.Sort(nodes)
	ns := framework.Namespace(t)
	for i, n := range nodes[:2] {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%d", i), Labels: map[string]string{"app": "db"}},
			Spec:       corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if err := framework.Client().Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	if err := framework.Client().Create(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	// A pod that is not running yet may be evicted whatever its budget says: the drain starts once
	// both run Ready and the budget counts them.
	testutil.Eventually(t, timeout, "budget db: 2 pods healthy, no disruption allowed", func(ctx context.Context) (bool, string, error) {
		var got policyv1.PodDisruptionBudget
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(pdb), &got)
		s := got.Status
		return err == nil && s.ObservedGeneration >= got.Generation && s.CurrentHealthy == 2 && s.DisruptionsAllowed == 0,
			fmt.Sprintf("%d healthy, %d disruptions allowed", s.CurrentHealthy, s.DisruptionsAllowed), err
	})
	checker := startChecker(t, ns)
	startController(t)
	createManaged(t, name, pool, func(s *nodemaintv1alpha1.NodeMaintenanceSpec) {
		s.EvacuationResponseTimeout = &nodemaintv1alpha1.Duration{Duration: time.Second}
		s.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: 3 * time.Second}
		s.Rollout = &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxBlockedNodes: 1}
	})

	// The first node is blocked, the second starts in its place and is blocked too: one too many.
	expectRollout(t, name, timeout, "first node blocked, the second holding the rollout", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		return halted(nm, nodemaintv1alpha1.ReasonNodeDrainTimedOut) && slices.Equal(inTurn(r), nodes[:2]) &&
			r.InTurn[0].Blocked && !r.InTurn[1].Blocked && r.NodesBlocked == 1 && r.NodesWaiting == 1
	})
	expectWarning(t, "NodeBlocked", "NodeMaintenance", name)
	nm := getRollout(t, name)
	c := rolloutCondition(nm)
	if !strings.Contains(c.Message, nodes[1]) {
		t.Errorf("RolloutHalted message %q does not name %s holding", c.Message, nodes[1])
	}
	if !strings.Contains(c.Message, "1 more are blocked already (maxBlockedNodes): "+nodes[0]) {
		t.Errorf("RolloutHalted message %q does not name %s blocked", c.Message, nodes[0])
	}
	for _, n := range nodes {
		node := &corev1.Node{}
		if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: n}, node); err != nil {
			t.Fatal(err)
		}
		if want := n != nodes[2]; node.Spec.Unschedulable != want {
			t.Errorf("node %s unschedulable %v, want %v", n, node.Spec.Unschedulable, want)
		}
	}

	// The budget lets go: both drain and are released, then the third.
	if err := framework.Client().Delete(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	expectRollout(t, name, timeout, "every node released", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		c := rolloutCondition(nm)
		return r.NodesDone == 3 && r.NodesFailed == 0 && r.NodesBlocked == 0 && c != nil && c.Reason == nodemaintv1alpha1.ReasonRolloutComplete
	})
	for _, n := range nodes {
		expectReleased(t, n, name+"="+string(nodemaintv1alpha1.PhaseReleased))
	}
	expectNoViolation(t, checker)
}

// TestControlPlaneOneAtATime: a maintenance without a rollout that selects three control-plane
// nodes is refused (NodesSelected False, EtcdQuorumAtRisk, a Warning Event): no node it selects
// is cordoned. Given a rollout of maxUnavailable 100%, it takes the control-plane nodes one at a
// time, the worker along with the first. The invariant checker, which fails a controller that
// cordons two control-plane nodes for one maintenance (KindControlPlaneTogether), finds nothing.
func TestControlPlaneOneAtATime(t *testing.T) {
	const name, pool = "managed-control-plane", "control-plane"
	p := newNodePool(t)
	controlPlanes := p.add(t, 3, map[string]string{managedLabel: pool, nodemaintv1alpha1.ControlPlaneLabel: ""})
	worker := p.add(t, 1, map[string]string{managedLabel: pool})[0]
	checker := startChecker(t, framework.Namespace(t))
	startController(t)
	cps := watchCordons(t, pool, func(n *corev1.Node) bool { _, ok := n.Labels[nodemaintv1alpha1.ControlPlaneLabel]; return ok })
	createManaged(t, name, pool, func(*nodemaintv1alpha1.NodeMaintenanceSpec) {})

	testutil.Eventually(t, timeout, "refused", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionNodesSelected)
		ready := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == nodemaintv1alpha1.ReasonEtcdQuorumAtRisk &&
			ready != nil && ready.Reason == nodemaintv1alpha1.ReasonEtcdQuorumAtRisk, fmt.Sprint(nm.Status.Conditions), nil
	})
	expectWarning(t, nodemaintv1alpha1.ReasonEtcdQuorumAtRisk, "NodeMaintenance", name)
	// The node reconciler looked: every node carries the maintenance as planned, none cordoned.
	for _, n := range append(slices.Clone(controlPlanes), worker) {
		testutil.Eventually(t, timeout, "node "+n+" planned", func(ctx context.Context) (bool, string, error) {
			node := &corev1.Node{}
			err := framework.Client().Get(ctx, client.ObjectKey{Name: n}, node)
			return node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation] == name+"="+string(nodemaintv1alpha1.PhasePlanning) && !node.Spec.Unschedulable,
				fmt.Sprintf("annotations %v, unschedulable %v", node.Annotations, node.Spec.Unschedulable), err
		})
	}
	if _, ever := cps.stats(); len(ever) > 0 {
		t.Fatalf("control-plane nodes cordoned by a refused maintenance: %v", ever)
	}

	// With a rollout released by hand: one control-plane node at a time, the worker with the
	// first. Each control-plane node is completed once cordoned; the next starts then.
	patch := []byte(`{"spec":{"rollout":{"maxUnavailable":"100%","release":"Manual"}}}`)
	if err := framework.Client().Patch(t.Context(), &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	var done []string
	for range controlPlanes {
		var current string
		expectRollout(t, name, timeout, "one control-plane node in its turn", func(_ *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
			var in []string
			for _, n := range inTurn(r) {
				if slices.Contains(controlPlanes, n) {
					in = append(in, n)
				}
			}
			if len(in) != 1 || slices.Contains(done, in[0]) || r.NodesWaiting != int32(len(controlPlanes)-len(done)-1) {
				return false
			}
			current = in[0]
			return true
		})
		testutil.Eventually(t, timeout, "node "+current+" cordoned", func(ctx context.Context) (bool, string, error) {
			node := &corev1.Node{}
			err := framework.Client().Get(ctx, client.ObjectKey{Name: current}, node)
			return node.Spec.Unschedulable, "", err
		})
		completeTurn(t, current, name)
		done = append(done, current)
	}
	completeTurn(t, worker, name)
	expectRollout(t, name, timeout, "every node released", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		c := rolloutCondition(nm)
		return r.NodesDone == 4 && c != nil && c.Reason == nodemaintv1alpha1.ReasonRolloutComplete
	})
	most, ever := cps.stats()
	if most != 1 {
		t.Errorf("at most %d control-plane nodes cordoned at once, want 1", most)
	}
	if len(ever) != 3 {
		t.Errorf("control-plane nodes %v cordoned ever, want each of the 3", ever)
	}
	expectNoViolation(t, checker)
	for _, n := range append(controlPlanes, worker) {
		expectReleased(t, n, name+"="+string(nodemaintv1alpha1.PhaseReleased))
	}
}
