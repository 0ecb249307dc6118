package maintenance_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// The rollout's node pool: nodes of its own, added by TestRollout and deleted after it. The
// package's other tests select their nodes by name among the cluster's first nodes and run one at
// a time, so none of their maintenances or pods meets the pool.
const (
	poolLabel, poolValue = "pool", "rollout"
	poolSize             = 8
	maxUnavailable       = 2
	// bigLabel marks the only nodes the Deployment "big" runs on: the pool's first node, and the
	// spare node added to give its replacement room.
	bigLabel = "e2e.nodemaint.dev/big"
	// rolloutTimeout bounds the rollout of the whole pool.
	rolloutTimeout = 2 * time.Minute
)

// TestRollout rolls maintenances through a pool of 8 nodes, 2 at a time, with nodemaint's
// Deployment responder moving the pods: one released on reboot, halted by a replacement that fits
// nowhere until a node is added, and one released by hand whose window closes mid-rollout. It
// watches (informers, not polls) that never more than 2 pool nodes are unschedulable at once and
// that no surge-capable Deployment has fewer Ready pods than its replicas.
func TestRollout(t *testing.T) {
	pool := newNodePool(t)
	nodes := pool.add(t, poolSize, map[string]string{poolLabel: poolValue})
	slices.Sort(nodes) // the rollout's order: by name (none is cordoned)
	labelNode(t, nodes[0], bigLabel, "true")
	ns := framework.Namespace(t)
	expectPoolAlone(t, nodes)
	// With the Deployment responder: Deployments surge. With the default leader election: the
	// framework's is short, for tests that kill controllers; this one runs the controller for
	// minutes, on a machine that may be loaded, where a lease not renewed within 3s ends it.
	framework.NewController(t).Start("--leader-election-lease-duration=15s", "--leader-election-renew-deadline=10s", "--leader-election-retry-period=2s")

	deployments := []*appsv1.Deployment{
		poolDeployment(ns, "web", 8, map[string]string{poolLabel: poolValue}),
		poolDeployment(ns, "api", 6, map[string]string{poolLabel: poolValue}),
		poolDeployment(ns, "worker", 4, map[string]string{poolLabel: poolValue}),
		// One replica on the first node of the pool, the only one with bigLabel: once that node is
		// cordoned its replacement fits nowhere.
		poolDeployment(ns, "big", 1, map[string]string{bigLabel: "true"}),
	}
	for _, d := range deployments {
		if err := framework.Client().Create(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range deployments {
		framework.WaitDeploymentAvailable(t, ns, d.Name)
	}
	checker := startChecker(t, ns)
	if _, watched := checker.Watched(); watched != len(deployments) {
		t.Fatalf("the invariant checker watches %d Deployments, want %d", watched, len(deployments))
	}
	watch := watchPool(t)

	if !t.Run("RebootedHaltedResumed", func(t *testing.T) { testRolloutRebooted(t, pool, nodes, watch, checker, ns) }) {
		return
	}
	t.Run("WindowCloses", func(t *testing.T) { testRolloutWindow(t, nodes, watch, checker, ns) })
}

// testRolloutRebooted: release Rebooted, driven by a reboot daemon that waits for the KEP-5683
// Drained condition. The pool's first node holds the only replica of "big", whose replacement
// fits on no other node: the rollout halts, the other node in its turn finishes, and nothing
// starts until a node with room is added. Then the rollout resumes and releases every node, each
// once, after its reboot, Ready again.
func testRolloutRebooted(t *testing.T, pool *nodePool, nodes []string, watch *poolWatch, checker *invariants.Checker, ns string) {
	start := time.Now()
	daemon := startRebootDaemon(t)
	const name = "rollout"
	createPoolRollout(t, name, nodemaintv1alpha1.RolloutSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)), Release: nodemaintv1alpha1.ReleaseRebooted,
	})

	// The first two nodes by name start; big's replacement cannot be scheduled: the rollout
	// halts. The other node in its turn finishes; only the first is left in its turn.
	expectRollout(t, name, timeout, "halted on big's replacement, only "+nodes[0]+" in its turn", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		return halted(nm, nodemaintv1alpha1.ReasonReplacementsUnschedulable) && slices.Equal(inTurn(r), nodes[:1]) && r.NodesDone >= 1
	})
	expectWarning(t, "RolloutHalted", "NodeMaintenance", name)
	consistentlyRollout(t, name, 3*time.Second, "no node starts while halted", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		return halted(nm, nodemaintv1alpha1.ReasonReplacementsUnschedulable) && slices.Equal(inTurn(r), nodes[:1])
	})

	// Capacity appears: a node big may run on, outside the pool.
	pool.add(t, 1, map[string]string{bigLabel: "true"})
	expectEvent(t, corev1.EventTypeNormal, "RolloutResumed", "NodeMaintenance", name)
	expectRollout(t, name, rolloutTimeout, "every node released", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
		return nm.Status.Phase == nodemaintv1alpha1.PhaseMaintenanceComplete && r.NodesDone == poolSize && len(r.InTurn) == 0 &&
			r.NodesWaiting == 0 && c != nil && c.Status == metav1.ConditionFalse && c.Reason == nodemaintv1alpha1.ReasonRolloutComplete
	})
	expectEvent(t, corev1.EventTypeNormal, nodemaintv1alpha1.ReasonRolloutComplete, "NodeMaintenance", name)
	for _, n := range nodes {
		expectReleased(t, n, name+"="+string(nodemaintv1alpha1.PhaseReleased))
	}

	// Each node was cordoned once and released once: after its reboot, Ready again. The first two
	// by name went first.
	rebooted := daemon.stop()
	changes := watch.changesSince(start)
	var cordons []cordonChange
	for _, c := range changes {
		cordons = append(cordons, c[0])
	}
	slices.SortFunc(cordons, func(a, b cordonChange) int { return a.at.Compare(b.at) })
	if len(cordons) < 2 {
		t.Errorf("cordoned %v, want at least %v (by name) first", cordons, nodes[:2])
	} else if !slices.Contains(nodes[:2], cordons[0].node) || !slices.Contains(nodes[:2], cordons[1].node) {
		t.Errorf("first cordoned %v, want %v (by name)", cordons[:2], nodes[:2])
	}
	for _, n := range nodes {
		c := changes[n]
		if len(c) != 2 || !c[0].cordoned || c[1].cordoned {
			t.Errorf("node %s: cordoned and uncordoned %v, want once each", n, c)
			continue
		}
		if !c[1].ready {
			t.Errorf("node %s released not Ready", n)
		}
		if c[1].bootID == c[0].bootID {
			t.Errorf("node %s released not after a reboot: boot ID %q when cordoned and when released", n, c[0].bootID)
		}
		if rebooted[n] != 1 {
			t.Errorf("node %s rebooted %d times, want once", n, rebooted[n])
		}
	}
	expectBudgetKept(t, watch)
	expectNoViolation(t, checker)

	deleteNM(t, name)
	expectGone(t, name)
	testutil.Eventually(t, timeout, "nothing of nodemaint's left", func(ctx context.Context) (bool, string, error) {
		err := checker.CheckClean(ctx, ns)
		return err == nil, fmt.Sprint(err), nil
	})
}

// testRolloutWindow: release Manual, and a window that closes while two nodes are in their turn.
// They stay in their turn and finish (completed by hand after the window closed); no other node
// starts until the window opens again.
func testRolloutWindow(t *testing.T, nodes []string, watch *poolWatch, checker *invariants.Checker, ns string) {
	start := time.Now()
	closes := start.Add(20 * time.Second).Truncate(time.Second)
	const name = "rollout-window"
	createPoolRollout(t, name, nodemaintv1alpha1.RolloutSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)), Release: nodemaintv1alpha1.ReleaseManual,
		Window: windowClosingAt(closes),
	})
	var first []string
	expectRollout(t, name, timeout, "two nodes in their turn", func(_ *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		first = inTurn(r)
		return len(first) == maxUnavailable
	})
	if time.Now().After(closes) {
		t.Fatalf("the nodes started after the window closed at %s: the machine is too slow for this test", closes.Format(time.RFC3339))
	}
	// The responder moves their pods; the admin waits for Drained before doing the work.
	for _, n := range first {
		testutil.Eventually(t, timeout, "node "+n+" Drained", func(ctx context.Context) (bool, string, error) {
			node := &corev1.Node{}
			err := framework.Client().Get(ctx, client.ObjectKey{Name: n}, node)
			return hasNodeCondition(node, corev1.NodeDrained), fmt.Sprint(node.Status.Conditions), err
		})
	}

	// The window closes: the rollout halts (a Normal Event: it is planned), the nodes in their
	// turn stay in it.
	expectRollout(t, name, time.Until(closes)+timeout, "halted outside the window", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		return halted(nm, nodemaintv1alpha1.ReasonOutsideWindow) && slices.Equal(inTurn(r), first)
	})
	nm := getRollout(t, name)
	if c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted); c.LastTransitionTime.Time.Before(closes) {
		t.Errorf("halted at %s, before the window closed at %s", c.LastTransitionTime.UTC().Format(time.RFC3339), closes.UTC().Format(time.RFC3339))
	}
	expectEvent(t, corev1.EventTypeNormal, "RolloutHalted", "NodeMaintenance", name)

	// Completed after the window closed, they are released; nothing starts in their place.
	for _, n := range first {
		completeTurn(t, n, name)
	}
	expectRollout(t, name, timeout, "the two nodes released, none in its turn", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		return halted(nm, nodemaintv1alpha1.ReasonOutsideWindow) && len(r.InTurn) == 0 && r.NodesDone == maxUnavailable &&
			r.NodesWaiting == poolSize-maxUnavailable
	})
	for _, n := range first {
		expectReleased(t, n, name+"="+string(nodemaintv1alpha1.PhaseReleased))
	}
	consistentlyRollout(t, name, 3*time.Second, "no node starts outside the window", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		return halted(nm, nodemaintv1alpha1.ReasonOutsideWindow) && len(r.InTurn) == 0
	})
	for n, c := range watch.changesSince(start) {
		for _, ch := range c {
			if ch.cordoned && (!slices.Contains(first, n) || ch.at.After(closes)) {
				t.Errorf("node %s cordoned at %s, window closed at %s, first nodes %v", n, ch.at.UTC().Format(time.RFC3339Nano), closes.UTC().Format(time.RFC3339), first)
			}
		}
	}

	// The window opens again (a schedule open at every minute): the rollout resumes.
	patch := []byte(`{"spec":{"rollout":{"window":{"schedule":"* * * * *","duration":"1m"}}}}`)
	if err := framework.Client().Patch(t.Context(), &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	expectRollout(t, name, timeout, "two more nodes in their turn", func(nm *nodemaintv1alpha1.NodeMaintenance, r *nodemaintv1alpha1.RolloutStatus) bool {
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
		turns := inTurn(r)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == nodemaintv1alpha1.ReasonRolling &&
			len(turns) == maxUnavailable && !slices.Contains(turns, first[0]) && !slices.Contains(turns, first[1])
	})
	expectEvent(t, corev1.EventTypeNormal, "RolloutResumed", "NodeMaintenance", name)

	// Deleting the maintenance mid-rollout restores every node.
	deleteNM(t, name)
	expectGone(t, name)
	for _, n := range nodes {
		expectReleased(t, n, "")
	}
	expectBudgetKept(t, watch)
	expectNoViolation(t, checker)
	// nodemaint.dev/complete is the admin's (kubectl maintenance complete writes it); CheckClean
	// counts every nodemaint.dev/ annotation as nodemaint's: the admin removes theirs first.
	for _, n := range first {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, nodemaintv1alpha1.CompleteAnnotation)
		if err := framework.Client().Patch(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, timeout, "nothing of nodemaint's left", func(ctx context.Context) (bool, string, error) {
		err := checker.CheckClean(ctx, ns)
		return err == nil, fmt.Sprint(err), nil
	})
}

// windowClosingAt returns a maintenance window that is open now and closes at closes (less than
// a minute from now, on a whole second): it opened at the last minute at least a minute before
// (a window lasts a minute at least) and opens next a year later.
func windowClosingAt(closes time.Time) *nodemaintv1alpha1.MaintenanceWindow {
	closes = closes.UTC()
	opened := closes.Add(-time.Minute).Truncate(time.Minute)
	return &nodemaintv1alpha1.MaintenanceWindow{
		Schedule: fmt.Sprintf("%d %d %d %d *", opened.Minute(), opened.Hour(), opened.Day(), int(opened.Month())),
		Duration: nodemaintv1alpha1.Duration{Duration: closes.Sub(opened)},
	}
}

// nodePool adds nodes for a test and deletes them when it ends. Its cleanup is registered before
// the test's namespace's, so it runs after it: the pods are gone while kwok still plays their
// kubelet (the pods of a deleted node wait for the pod garbage collector's 40s quarantine).
type nodePool struct {
	mu    sync.Mutex
	added []string
}

func newNodePool(t *testing.T) *nodePool {
	p := &nodePool{}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, n := range p.added {
			if err := framework.Cluster().DeleteNode(context.Background(), n); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting node %s: %v", n, err)
			}
		}
	})
	return p
}

// add adds n Ready nodes with the labels and returns their names.
func (p *nodePool) add(t *testing.T, n int, labels map[string]string) []string {
	t.Helper()
	names, err := framework.Cluster().AddNodes(t.Context(), n, localcluster.WithLabels(labels))
	if err != nil {
		t.Fatalf("adding %d nodes: %v", n, err)
	}
	p.mu.Lock()
	p.added = append(p.added, names...)
	p.mu.Unlock()
	return names
}

func labelNode(t *testing.T, node, key, value string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, key, value)
	if err := framework.Client().Patch(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// expectPoolAlone fails the test when another test's NodeMaintenance selects a node of the pool.
func expectPoolAlone(t *testing.T, pool []string) {
	t.Helper()
	var nms nodemaintv1alpha1.NodeMaintenanceList
	if err := framework.Client().List(t.Context(), &nms); err != nil {
		t.Fatal(err)
	}
	for i := range nms.Items {
		sel := maintenance.NewSelector(&nms.Items[i])
		for _, n := range pool {
			node := &corev1.Node{}
			if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: n}, node); err != nil {
				t.Fatal(err)
			}
			if sel.Matches(node) {
				t.Fatalf("NodeMaintenance %s of another test selects node %s of the pool", nms.Items[i].Name, n)
			}
		}
	}
}

// poolDeployment is a surge-capable Deployment (the API server's default RollingUpdate, maxSurge
// 25%) on the nodes with the labels, spread over them.
func poolDeployment(namespace, name string, replicas int32, nodeSelector map[string]string) *appsv1.Deployment {
	d := framework.NewDeployment(namespace, name, replicas)
	d.Spec.Template.Spec.NodeSelector = nodeSelector
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: d.Spec.Selector,
	}}
	return d
}

// createPoolRollout creates a NodeMaintenance that cordons and drains the pool with the rollout,
// and deletes it when the test ends.
func createPoolRollout(t *testing.T, name string, rollout nodemaintv1alpha1.RolloutSpec) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: poolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{poolValue}}},
			}}},
			Cordon: true, Drain: true, Reason: "kernel upgrade", Rollout: &rollout,
		},
	}
	if err := framework.Client().Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The controller still runs (it was started before): it restores the nodes.
		ctx := context.Background()
		if err := framework.Client().Delete(ctx, nm); err != nil {
			return
		}
		_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), nm)
			return apierrors.IsNotFound(err), nil
		})
	})
}

func getRollout(t *testing.T, name string) *nodemaintv1alpha1.NodeMaintenance {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: name}, nm); err != nil {
		t.Fatal(err)
	}
	return nm
}

// expectRollout waits until cond holds of the maintenance and its rollout status.
func expectRollout(t *testing.T, name string, within time.Duration, what string, cond func(*nodemaintv1alpha1.NodeMaintenance, *nodemaintv1alpha1.RolloutStatus) bool) {
	t.Helper()
	testutil.Eventually(t, within, what, func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
			return false, "", err
		}
		if nm.Status.Rollout == nil {
			return false, "no rollout status", nil
		}
		return cond(nm, nm.Status.Rollout), describeRollout(nm), nil
	})
}

// consistentlyRollout fails the test when cond does not hold of the maintenance at any poll for d.
func consistentlyRollout(t *testing.T, name string, d time.Duration, what string, cond func(*nodemaintv1alpha1.NodeMaintenance, *nodemaintv1alpha1.RolloutStatus) bool) {
	t.Helper()
	var broken *nodemaintv1alpha1.NodeMaintenance
	_ = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		nm := getRollout(t, name)
		if nm.Status.Rollout == nil || !cond(nm, nm.Status.Rollout) {
			broken = nm
		}
		return broken != nil, nil
	})
	if broken != nil {
		t.Fatalf("%s: no longer: %s", what, describeRollout(broken))
	}
}

func describeRollout(nm *nodemaintv1alpha1.NodeMaintenance) string {
	r := nm.Status.Rollout
	if r == nil {
		return fmt.Sprintf("phase %s, no rollout status", nm.Status.Phase)
	}
	h := "none"
	if c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted); c != nil {
		h = fmt.Sprintf("%s/%s (%s)", c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("phase %s, done %d, in turn %v, waiting %d, RolloutHalted %s", nm.Status.Phase, r.NodesDone, inTurn(r), r.NodesWaiting, h)
}

func inTurn(r *nodemaintv1alpha1.RolloutStatus) []string {
	names := []string{}
	for _, t := range r.InTurn {
		names = append(names, t.Name)
	}
	return names
}

func halted(nm *nodemaintv1alpha1.NodeMaintenance, reason string) bool {
	c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}

func hasNodeCondition(node *corev1.Node, t corev1.NodeConditionType) bool {
	return slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == t && c.Status == corev1.ConditionTrue })
}

// expectReleased waits until nodemaint restored the node: uncordoned, without its taint, its
// conditions (nodemaint's and KEP-5683's) or the record of its cordon, and the node's
// maintenances annotation as want ("name=Released" until the maintenance is deleted).
func expectReleased(t *testing.T, name, want string) {
	t.Helper()
	testutil.Eventually(t, timeout, "node "+name+" released", func(ctx context.Context) (bool, string, error) {
		node := &corev1.Node{}
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return false, "", err
		}
		var left []string
		if node.Spec.Unschedulable {
			left = append(left, "cordoned")
		}
		for _, taint := range node.Spec.Taints {
			if strings.HasPrefix(taint.Key, "nodemaint.dev/") {
				left = append(left, "taint "+taint.Key)
			}
		}
		for _, c := range node.Status.Conditions {
			if c.Type == nodemaintv1alpha1.NodeConditionUnderMaintenance || slices.Contains(nodedecide.LifecycleConditionTypes, c.Type) {
				left = append(left, fmt.Sprintf("condition %s=%s (%s)", c.Type, c.Status, c.Reason))
			}
		}
		if node.Annotations[nodemaintv1alpha1.CordonedAnnotation] != "" {
			left = append(left, "annotation "+nodemaintv1alpha1.CordonedAnnotation)
		}
		if got := node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation]; got != want {
			left = append(left, fmt.Sprintf("maintenances %q", got))
		}
		return len(left) == 0, strings.Join(left, ", "), nil
	})
}

// completeTurn completes the node's turn in the maintenance, as `kubectl maintenance complete`
// does: the node annotation nodemaint.dev/complete.
func completeTurn(t *testing.T, node, nm string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, nodemaintv1alpha1.CompleteAnnotation, nm)
	if err := framework.Client().Patch(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func expectBudgetKept(t *testing.T, watch *poolWatch) {
	t.Helper()
	peak, over := watch.peak()
	for _, o := range over {
		t.Errorf("more than %d pool nodes unschedulable at once: %s", maxUnavailable, o)
	}
	if peak != maxUnavailable {
		t.Errorf("at most %d pool nodes unschedulable at once, want %d (the budget, used)", peak, maxUnavailable)
	}
}

// startChecker starts the invariant checker on the pods of the namespaces until the test ends,
// when it logs what it judged.
func startChecker(t *testing.T, namespaces ...string) *invariants.Checker {
	t.Helper()
	checker, err := invariants.Start(context.Background(), framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{
		Namespaces:  namespaces,
		OnViolation: func(v invariants.Violation) { t.Logf("VIOLATION %s", v) },
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = checker.Stop()
		lines, bad, size, judged := checker.AuditStats()
		t.Logf("invariant checker: %d acts of nodemaint's judged from %d audit log lines (%d bad), %d bytes", judged, lines, bad, size)
	})
	return checker
}

func expectNoViolation(t *testing.T, checker *invariants.Checker) {
	t.Helper()
	for _, v := range checker.Violations() {
		t.Errorf("violation: %s", v)
	}
}

// watchNodes calls handle on every event of the pool's nodes (an informer: every version the
// watch delivers, in order), from one goroutine, until the returned stop is called. It returns
// once the informer listed the nodes.
func watchNodes(t *testing.T, handle func(node *corev1.Node, deleted bool)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lw := toolscache.NewFilteredListWatchFromClient(framework.Cluster().Client().CoreV1().RESTClient(), "nodes", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = poolLabel + "=" + poolValue })
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, toolscache.Indexers{})
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { handle(obj.(*corev1.Node), false) },
		UpdateFunc: func(_, obj any) { handle(obj.(*corev1.Node), false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if node, ok := obj.(*corev1.Node); ok {
				handle(node, true)
			}
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	if !toolscache.WaitForCacheSync(t.Context().Done(), reg.HasSynced) {
		cancel()
		t.Fatal("the pool's nodes not listed")
	}
	return func() { cancel(); <-done }
}

// poolWatch follows the pool's nodes on every watch event: how many are unschedulable at once,
// and when each is cordoned and uncordoned, with its boot ID and readiness at that moment.
type poolWatch struct {
	mu            sync.Mutex
	unschedulable map[string]bool
	most          int
	over          []string
	changes       []cordonChange
}

type cordonChange struct {
	node     string
	at       time.Time
	cordoned bool
	bootID   string
	ready    bool
}

func (c cordonChange) String() string {
	what := "uncordoned"
	if c.cordoned {
		what = "cordoned"
	}
	return fmt.Sprintf("%s %s at %s (boot %q, Ready %v)", c.node, what, c.at.UTC().Format("15:04:05.000"), c.bootID, c.ready)
}

func watchPool(t *testing.T) *poolWatch {
	t.Helper()
	w := &poolWatch{unschedulable: map[string]bool{}}
	t.Cleanup(watchNodes(t, w.observe))
	return w
}

func (w *poolWatch) observe(node *corev1.Node, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	is := !deleted && node.Spec.Unschedulable
	if is != w.unschedulable[node.Name] {
		w.changes = append(w.changes, cordonChange{node: node.Name, at: now, cordoned: is, bootID: node.Status.NodeInfo.BootID, ready: localcluster.IsNodeReady(node)})
	}
	w.unschedulable[node.Name] = is
	var names []string
	for n, u := range w.unschedulable {
		if u {
			names = append(names, n)
		}
	}
	w.most = max(w.most, len(names))
	if len(names) > maxUnavailable {
		slices.Sort(names)
		w.over = append(w.over, fmt.Sprintf("%v at %s", names, now.UTC().Format(time.RFC3339Nano)))
	}
}

// peak returns the most pool nodes seen unschedulable at once, and every moment more than the
// budget were.
func (w *poolWatch) peak() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.most, slices.Clone(w.over)
}

// changesSince returns the cordons and uncordons since a moment, by node, in order.
func (w *poolWatch) changesSince(since time.Time) map[string][]cordonChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]cordonChange{}
	for _, c := range w.changes {
		if !c.at.Before(since) {
			out[c.node] = append(out[c.node], c)
		}
	}
	return out
}

// rebootDaemon simulates what kured or system-upgrade-controller does with nodemaint: it waits
// for the KEP-5683 condition Drained=True on a pool node and reboots it once. A reboot stops the
// node's kubelet (kwok stops playing it, so nothing sets the node Ready behind the daemon's back),
// marks the node NotReady with a new boot ID, as the node coming back up reports it, and once
// the cluster saw it so (the node lifecycle controller's not-ready taint) starts the kubelet
// again: kwok's node-initialize stage marks it Ready, keeping the boot ID.
type rebootDaemon struct {
	t        *testing.T
	mu       sync.Mutex
	rebooted map[string]int
	running  sync.WaitGroup
	stopInf  func()
}

func startRebootDaemon(t *testing.T) *rebootDaemon {
	t.Helper()
	d := &rebootDaemon{t: t, rebooted: map[string]int{}}
	d.stopInf = watchNodes(t, d.observe)
	t.Cleanup(func() { d.stop() })
	return d
}

func (d *rebootDaemon) observe(node *corev1.Node, deleted bool) {
	if deleted || !hasNodeCondition(node, corev1.NodeDrained) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rebooted[node.Name] > 0 {
		return
	}
	d.rebooted[node.Name]++
	if !node.Spec.Unschedulable {
		d.t.Errorf("node %s Drained but schedulable", node.Name)
	}
	d.running.Go(func() {
		if err := reboot(node.Name); err != nil {
			d.t.Errorf("rebooting node %s: %v", node.Name, err)
		}
	})
}

// stop stops the daemon, waits for the reboots under way and returns how often each node was
// rebooted.
func (d *rebootDaemon) stop() map[string]int {
	d.stopInf()
	d.running.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.rebooted)
}

func reboot(node string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := framework.Cluster()
	if err := c.HoldNodeStatus(ctx, node); err != nil {
		return err
	}
	bootID := string(uuid.NewUUID())
	if err := c.MarkNodeNotReady(ctx, node, bootID); err != nil {
		return err
	}
	// The reboot lasts until the cluster saw the node NotReady: kube-controller-manager's node
	// lifecycle controller taints it not-ready.
	n := &corev1.Node{}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, nil
		}
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }), nil
	})
	if err != nil {
		return fmt.Errorf("node %s not tainted %s during its reboot: %w", node, corev1.TaintNodeNotReady, err)
	}
	// The reboot is what the test says it is: nobody made the node Ready meanwhile.
	if err := framework.Client().Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return err
	}
	if localcluster.IsNodeReady(n) || n.Status.NodeInfo.BootID != bootID {
		return fmt.Errorf("node Ready %v, boot ID %q during its reboot (want NotReady, %q): kwok still wrote its status",
			localcluster.IsNodeReady(n), n.Status.NodeInfo.BootID, bootID)
	}
	return c.ReleaseNodeStatus(ctx, node)
}
