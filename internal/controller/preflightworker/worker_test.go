package preflightworker

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drainpreflight"
)

// preflightsOfStores are preflights that read nodes and pods from stores of their own, as the
// cache's informers hold them; the other kinds are empty.
func preflightsOfStores(t *testing.T, objs ...any) (*Worker, toolscache.Indexer) {
	t.Helper()
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, o := range objs {
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	empty := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	synced := func() bool { return true }
	return newWorker([]source{{kind: "nodes and pods", indexer: store, synced: synced}, {kind: "the rest", indexer: empty, synced: synced}}), store
}

func preflightNode(name string) *corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: alloc}}
}

func barePod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func requestOf(name string, generation int64, targets ...string) request {
	return request{uid: types.UID("uid-" + name), name: name, generation: generation, spec: drainpreflight.Spec{Targets: targets}}
}

// drain runs the worker's steps until nothing is asked for, or it has to wait; it returns the
// wait.
func (p *Worker) drain(t *testing.T, now time.Time) time.Duration {
	t.Helper()
	for range 1000 {
		wait, err := p.step(now)
		if err != nil {
			t.Fatal(err)
		}
		if wait != 0 {
			return wait
		}
	}
	t.Fatal("the worker does not stop")
	return 0
}

// Fifty Planning maintenances asking at once are computed from one snapshot, made from the
// stores; asked again, nothing is computed while nothing changed; a change is taken in at most
// every floor for the snapshot, every Refresh for a maintenance's preflight,
// at once for a new spec, and never from a snapshot older than the change a maintenance was
// asked for after.
func TestPreflightsShareOneSnapshot(t *testing.T) {
	p, store := preflightsOfStores(t, preflightNode("a"), preflightNode("b"), barePod("lonely", "a"))
	now := time.Unix(1_800_000_000, 0)
	for i := range 50 {
		if got := p.result(requestOf(fmt.Sprint("nm-", i), 1, "a"), now); got != nil {
			t.Fatalf("a preflight before any was computed: %+v", got)
		}
	}
	if wait := p.drain(t, now); wait != -1 {
		t.Fatalf("50 maintenances: wait %v; want -1, nothing more asked for", wait)
	}
	wantCounts(t, "50 maintenances", p, 1, 50)
	if len(p.ready) != 50 {
		t.Fatalf("50 maintenances: %d reconciles asked for; want 50", len(p.ready))
	}
	got := p.result(requestOf("nm-7", 1, "a"), now)
	wantLosing(t, "preflight", got, 1)
	if got.Findings[0].Reason != drainpreflight.ReasonBarePod {
		t.Fatalf("preflight finding %s; want %s, the bare pod on a", got.Findings[0].Reason, drainpreflight.ReasonBarePod)
	}
	if got.Findings[0].Pods[0] != "default/lonely" {
		t.Fatalf("preflight finding of %v; want default/lonely first", got.Findings[0].Pods)
	}

	// Nothing changed: nothing is computed again, however old; with nothing to compute over
	// keep, the snapshot is dropped.
	later := now.Add(10 * Refresh)
	for i := range 50 {
		p.result(requestOf(fmt.Sprint("nm-", i), 1, "a"), later)
	}
	p.drain(t, later)
	wantCounts(t, "nothing changed", p, 1, 50)
	if p.snapshot != nil {
		t.Fatalf("nothing changed: snapshot kept; want it dropped")
	}

	// A pod comes: a maintenance's preflight younger than Refresh stays; a new
	// maintenance gets a snapshot that has the pod.
	now = later
	if err := store.Add(barePod("newcomer", "b")); err != nil {
		t.Fatal(err)
	}
	p.changes.Add(1)
	p.made, p.ran = 0, 0
	p.results["nm-0"].at = now // computed just now
	if p.result(requestOf("nm-0", 1, "a"), now.Add(Refresh/2)) == nil {
		t.Fatal("a young preflight dropped")
	}
	if p.result(requestOf("new", 1, "b"), now) != nil {
		t.Fatal("a new maintenance's preflight before it was computed")
	}
	p.drain(t, now)
	wantCounts(t, "a new maintenance", p, 1, 1)
	got = p.result(requestOf("new", 1, "b"), now)
	wantLosing(t, "new maintenance", got, 1)
	if got.Findings[0].Pods[0] != "default/newcomer" {
		t.Fatalf("new maintenance: finding of %v; want the newcomer first", got.Findings[0].Pods)
	}
	// Another comes a second later: the next new maintenance waits for a snapshot that has it,
	// made no sooner than floor after the last.
	if err := store.Add(barePod("late", "b")); err != nil {
		t.Fatal(err)
	}
	p.changes.Add(1)
	p.result(requestOf("newer", 1, "b"), now.Add(time.Second))
	if wait := p.drain(t, now.Add(time.Second)); wait != floor-time.Second {
		t.Fatalf("a second after the last snapshot: wait %v; want %v", wait, floor-time.Second)
	}
	if p.ran != 1 {
		t.Fatalf("a second after the last snapshot: %d preflights; want still 1", p.ran)
	}
	p.drain(t, now.Add(floor))
	wantCounts(t, "past floor", p, 2, 2)
	got = p.result(requestOf("newer", 1, "b"), now.Add(floor))
	if got == nil {
		t.Fatalf("newer maintenance: no preflight; want both pods of b")
	}
	if got.Findings[0].Count != 2 {
		t.Fatalf("newer maintenance: finding of %d pods; want both pods of b", got.Findings[0].Count)
	}
	// The others take the change in once their preflight is Refresh old: from the
	// snapshot just made, however many they are.
	for i := range 50 {
		p.result(requestOf(fmt.Sprint("nm-", i), 1, "a"), now.Add(Refresh))
	}
	p.drain(t, now.Add(Refresh))
	wantCounts(t, "refreshed", p, 2, 52)

	// A new spec is computed at once, from the snapshot as it is.
	if p.result(requestOf("nm-3", 2, "a", "b"), now.Add(Refresh)) != nil {
		t.Fatal("a new spec's preflight before it was computed")
	}
	p.drain(t, now.Add(Refresh))
	wantCounts(t, "new spec", p, 2, 53)
	wantLosing(t, "new spec", p.result(requestOf("nm-3", 2, "a", "b"), now.Add(Refresh)), 2)

	// Asked for nothing for keep, the snapshot is dropped.
	if p.drain(t, now.Add(Refresh+keep)); p.snapshot != nil {
		t.Error("the snapshot kept with no preflight asked for")
	}
	p.Forget("nm-3")
	if p.results["nm-3"] != nil {
		t.Error("a forgotten maintenance's preflight kept")
	}
}

// wantCounts fails unless the worker made the snapshots and computed the preflights counted.
func wantCounts(t *testing.T, what string, p *Worker, made, ran int) {
	t.Helper()
	if p.made != made {
		t.Fatalf("%s: %d snapshots made; want %d", what, p.made, made)
	}
	if p.ran != ran {
		t.Fatalf("%s: %d preflights computed; want %d", what, p.ran, ran)
	}
}

// wantLosing fails unless there is a preflight, with findings, that loses the nodes counted.
func wantLosing(t *testing.T, what string, got *nodemaintv1alpha1.PreflightStatus, nodes int32) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no preflight; want one", what)
	}
	if got.NodesLosing != nodes {
		t.Fatalf("%s: %d nodes losing; want %d (%+v)", what, got.NodesLosing, nodes, got)
	}
	if len(got.Findings) == 0 {
		t.Fatalf("%s: no findings; want some (%+v)", what, got)
	}
}

// A maintenance that selects more nodes than MaxNodes gets no preflight, and is news once per
// spec (the NodeMaintenance controller's Event).
func TestPreflightTooManyNodes(t *testing.T) {
	p, _ := preflightsOfStores(t)
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "all", UID: "u", Generation: 1}}
	targets := make([]string, MaxNodes+1)
	for i := range targets {
		targets[i] = fmt.Sprint("n", i)
	}
	news := 0
	for range 3 {
		got, planning, tooMany := p.Status(nm, targets, time.Now())
		if got != nil {
			t.Fatalf("preflight %+v; want none", got)
		}
		if planning {
			t.Fatalf("looking again; want not")
		}
		if tooMany {
			news++
		}
	}
	if news != 1 {
		t.Errorf("too many nodes told %d times; want once", news)
	}
	if len(p.pending) != 0 {
		t.Errorf("%d preflights asked for; want nothing asked", len(p.pending))
	}
	nm.Generation = 2
	if _, _, tooMany := p.Status(nm, targets, time.Now()); !tooMany {
		t.Error("not told again after a new spec")
	}
}

// A rollout with spec.rollout.preflight Block that has not started has its forecast computed
// though it cordons and drains (Gates); started, or with Warn, it has none.
func TestGatedRolloutsForecast(t *testing.T) {
	block := &nodemaintv1alpha1.RolloutSpec{Preflight: nodemaintv1alpha1.PreflightBlock}
	turn := []nodemaintv1alpha1.NodeTurn{{Name: "a"}}
	for _, tc := range []struct {
		name    string
		rollout *nodemaintv1alpha1.RolloutSpec
		status  *nodemaintv1alpha1.RolloutStatus
		gates   bool
	}{
		{name: "no rollout"},
		{name: "warn", rollout: &nodemaintv1alpha1.RolloutSpec{Preflight: nodemaintv1alpha1.PreflightWarn}},
		{name: "block, not started", rollout: block, gates: true},
		{name: "block, no node in turn yet", rollout: block, status: &nodemaintv1alpha1.RolloutStatus{NodesWaiting: 1}, gates: true},
		{name: "block, a node in its turn", rollout: block, status: &nodemaintv1alpha1.RolloutStatus{InTurn: turn}},
		{name: "block, a node done", rollout: block, status: &nodemaintv1alpha1.RolloutStatus{NodesDone: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "uid-m", Generation: 1},
				Spec:   nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true, Rollout: tc.rollout},
				Status: nodemaintv1alpha1.NodeMaintenanceStatus{Rollout: tc.status}}
			if got := Gates(nm); got != tc.gates {
				t.Fatalf("Gates %v, want %v", got, tc.gates)
			}
			p, _ := preflightsOfStores(t, preflightNode("a"), barePod("lonely", "a"))
			now := time.Now()
			_, again, _ := p.Status(nm, []string{"a"}, now)
			p.drain(t, now)
			status, _, _ := p.Status(nm, []string{"a"}, now)
			if again != tc.gates {
				t.Errorf("asked to look again %v; want %v (for a gated rollout only)", again, tc.gates)
			}
			if (status != nil) != tc.gates {
				t.Errorf("preflight %+v; want one %v (for a gated rollout only)", status, tc.gates)
			}
		})
	}
}

// statusOf counts the deadlocks, and lists the forecast's findings first among those that block.
func TestStatusOfDeadlocksFirst(t *testing.T) {
	r := drainpreflight.Report{Deadlocks: 1, Nodes: []drainpreflight.NodeReport{
		{Name: "a", Verdict: drainpreflight.Blocks, Findings: []drainpreflight.Finding{{Severity: drainpreflight.Blocks, Reason: drainpreflight.ReasonNoRoom, Message: "x", Pods: []string{"p/1"}}}},
		{Name: "b", Verdict: drainpreflight.Blocks, Findings: []drainpreflight.Finding{
			{Severity: drainpreflight.Blocks, Reason: drainpreflight.ReasonBudgetBlocked, Object: "PodDisruptionBudget p/db", Message: "never", Pods: []string{"p/2"}},
			{Severity: drainpreflight.Loses, Reason: drainpreflight.ReasonCannotSurge, Message: "down", Pods: []string{"p/3"}},
		}},
		{Name: "c", Verdict: drainpreflight.Blocks, Findings: []drainpreflight.Finding{{Severity: drainpreflight.Blocks, Reason: drainpreflight.ReasonControlPlaneTogether, Object: "nodes c, d", Message: "together"}}},
	}}
	s := statusOf(r, time.Now())
	var got []string
	for _, f := range s.Findings {
		got = append(got, fmt.Sprintf("%s %s %s %d", f.Node, f.Severity, f.Reason, f.Count))
	}
	want := "[b Blocks BudgetBlocked 1 c Blocks ControlPlaneTogether 0 a Blocks NoRoom 1 b Loses CannotSurge 1]"
	if fmt.Sprint(got) != want {
		t.Errorf("findings %v; want %s", got, want)
	}
	if s.Deadlocks != 1 {
		t.Errorf("deadlocks %d; want 1", s.Deadlocks)
	}
	if s.NodesBlocked != 3 {
		t.Errorf("nodes blocked %d; want 3", s.NodesBlocked)
	}
}
