package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// Scenario F at full size is 1,000 nodes and 10,000 pods rolled through 100 nodes at a time by
// both methods; -fleet-nodes 100 scales it to 100 nodes, 1,000 pods, 10 at a time.
func TestFleetScenario(t *testing.T) {
	for _, tc := range []struct{ nodes, pods, atOnce int }{{1000, 10000, 100}, {100, 1000, 10}, {200, 2000, 20}} {
		f := fleet(tc.nodes)
		if f.Targets != tc.nodes {
			t.Errorf("fleet(%d): %d targets, want %d", tc.nodes, f.Targets, tc.nodes)
		}
		if f.Nodes != tc.nodes {
			t.Errorf("fleet(%d): %d nodes, want %d", tc.nodes, f.Nodes, tc.nodes)
		}
		if got := f.pods(); got != tc.pods {
			t.Errorf("fleet(%d): %d pods, want %d", tc.nodes, got, tc.pods)
		}
		r := f.Rollout
		if r == nil {
			t.Fatalf("fleet(%d): no rollout, want 10%%, %d nodes at once for both methods", tc.nodes, tc.atOnce)
		}
		if got := r.MaxUnavailable.String(); got != "10%" {
			t.Errorf("fleet(%d) rollout maxUnavailable %s, want 10%%", tc.nodes, got)
		}
		if got := r.atOnce(MethodNodemaint, f.Targets); got != tc.atOnce {
			t.Errorf("fleet(%d) rollout: %d nodes at once by nodemaint, want %d", tc.nodes, got, tc.atOnce)
		}
		if got := r.atOnce(MethodClassic, f.Targets); got != tc.atOnce {
			t.Errorf("fleet(%d) rollout: %d nodes at once by the classic drain, want %d", tc.nodes, got, tc.atOnce)
		}
		if r.Reboot != 10*sec {
			t.Errorf("fleet(%d) reboot %v, want 10s", tc.nodes, r.Reboot)
		}
	}
	if got := scenarios()["F"]; got.Targets != fleetNodes {
		t.Errorf("scenario F has %d nodes, want %d", got.Targets, fleetNodes)
	}
	d := fleet(1000).Description
	if !strings.Contains(d, "1,000 nodes and 10,000 pods") {
		t.Errorf("description %q, want 1,000 nodes and 10,000 pods", d)
	}
	if !strings.Contains(d, "concurrency of 100") {
		t.Errorf("description %q, want a concurrency of 100", d)
	}
}

// Every workload of the fleet stays in its pool, through the pool's label; a realistic mix:
// Deployments with budgets of one pod and of a percentage, some without, and StatefulSets.
func TestFleetWorkloads(t *testing.T) {
	f := fleet(1000)
	if !f.LabelPool {
		t.Fatal("the fleet's pool is not labelled")
	}
	req := f.poolRequirement()
	if req.Key != poolLabel {
		t.Errorf("the maintenance selects by %s, want the pool's label %s", req.Key, poolLabel)
	}
	if req.Operator != corev1.NodeSelectorOpIn {
		t.Errorf("the maintenance selects with %s, want %s", req.Operator, corev1.NodeSelectorOpIn)
	}
	if len(req.Values) != 1 || req.Values[0] != "F" {
		t.Errorf("the maintenance selects %v, want the pool F", req.Values)
	}
	kinds, budgets := map[string]int{}, map[string]int{}
	for _, w := range f.Workloads {
		obj, pdb := w.objects("ns")
		var tmpl corev1.PodTemplateSpec
		switch o := obj.(type) {
		case *appsv1.Deployment:
			tmpl = o.Spec.Template
		case *appsv1.StatefulSet:
			tmpl = o.Spec.Template
		}
		if tmpl.Spec.NodeSelector[poolLabel] != "F" {
			t.Errorf("%s is not confined to the pool by its label: %v", w.Name, tmpl.Spec.NodeSelector)
		}
		if tmpl.Spec.Affinity != nil {
			t.Errorf("%s has an affinity %+v, want the pool's label alone", w.Name, tmpl.Spec.Affinity)
		}
		kinds[w.Kind]++
		switch p, _ := pdb.(*policyv1.PodDisruptionBudget); {
		case p == nil:
			budgets["none"]++
		case p.Spec.MaxUnavailable != nil:
			budgets[p.Spec.MaxUnavailable.String()]++
		}
	}
	if kinds[KindStatefulSet] != 2 {
		t.Errorf("workloads by kind %v, want 2 StatefulSets", kinds)
	}
	if kinds[KindDeployment] != 180 {
		t.Errorf("workloads by kind %v, want 180 Deployments", kinds)
	}
	if budgets["10%"] != 22 {
		t.Errorf("budgets %v, want 22 of 10%%", budgets)
	}
	if budgets["1"] != 111 {
		t.Errorf("budgets %v, want 111 of 1", budgets)
	}
	if budgets["none"] != 49 {
		t.Errorf("budgets %v, want 49 none", budgets)
	}
}

// The percentage is resolved as the CRD validates it and the controller reads it: rounded down,
// at least one node.
func TestResolveMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		v      intstr.IntOrString
		pool   int
		want   int
		hasErr bool
	}{
		{v: intstr.FromString("10%"), pool: 1000, want: 100},
		{v: intstr.FromString("10%"), pool: 100, want: 10},
		{v: intstr.FromString("10%"), pool: 15, want: 1},
		{v: intstr.FromString("10%"), pool: 5, want: 1},
		{v: intstr.FromString("25%"), pool: 10, want: 2},
		{v: intstr.FromString("100%"), pool: 7, want: 7},
		{v: intstr.FromInt32(2), pool: 20, want: 2},
		{v: intstr.FromInt32(50), pool: 20, want: 50},
		{v: intstr.FromString("0%"), pool: 10, hasErr: true},
		{v: intstr.FromString("101%"), pool: 10, hasErr: true},
		{v: intstr.FromString("10"), pool: 10, hasErr: true},
		{v: intstr.FromString("ten%"), pool: 10, hasErr: true},
		{v: intstr.FromInt32(0), pool: 10, hasErr: true},
	} {
		got, err := resolveMaxUnavailable(tc.v, tc.pool)
		if tc.hasErr {
			if err == nil {
				t.Errorf("resolveMaxUnavailable(%s, %d) = %d, want an error", tc.v.String(), tc.pool, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolveMaxUnavailable(%s, %d) = %d, %v; want %d", tc.v.String(), tc.pool, got, err, tc.want)
		}
		if budget := rollout.Budget(&tc.v, tc.pool); budget != got {
			t.Errorf("%s of %d: the bench takes %d nodes at once, the controller %d", tc.v.String(), tc.pool, got, budget)
		}
	}
}

// The fleet's ideal at 100 nodes at once: each of the 10 rounds moves a tenth of every workload,
// one surge wave each; the slowest is app-19 (start 1s+7s, stop 4s): drained after 12s, rebooted
// 10s later. The scaled-down fleet has the same rounds.
func TestIdealFleet(t *testing.T) {
	f := fleet(1000)
	if got, want := idealRollout(f.Workloads, f.Targets, 100, f.Rollout.Reboot), 10*22*sec; got != want {
		t.Errorf("ideal at 100 at once = %v, want %v", got, want)
	}
	if got, want := idealRollout(f.Workloads, f.Targets, 1, f.Rollout.Reboot), 1000*22*sec; got != want {
		t.Errorf("ideal one node at a time = %v, want %v", got, want)
	}
	small := fleet(100)
	if got, want := idealRollout(small.Workloads, small.Targets, 10, small.Rollout.Reboot), 10*22*sec; got != want {
		t.Errorf("ideal of the 100-node fleet at 10 at once = %v, want %v", got, want)
	}
	// A budget of 10% of 200 lets 20 go at once; of 5, one (rounded up).
	if got := (Workload{Replicas: 200, PDBMaxUnavailablePercent: 10}).disruptionsAllowed(); got != 20 {
		t.Errorf("10%% of 200 allows %d, want 20", got)
	}
	if got := (Workload{Replicas: 5, PDBMaxUnavailablePercent: 10}).disruptionsAllowed(); got != 1 {
		t.Errorf("10%% of 5 allows %d, want 1", got)
	}
	res := rolloutResult(f)
	if res.MaxUnavailable != 100 {
		t.Errorf("rollout result %+v, want maxUnavailable 100", res)
	}
	if res.MaxUnavailableSpec != "10%" {
		t.Errorf("rollout result %+v, want maxUnavailable spelled 10%%", res)
	}
	if res.ClassicAtOnce != 100 {
		t.Errorf("rollout result %+v, want 100 at once by the classic drain", res)
	}
	if res.IdealSeconds != 220 {
		t.Errorf("rollout result %+v, want ideally 220s", res)
	}
	if res.IdealClassicSeconds != 220 {
		t.Errorf("rollout result %+v, want ideally 220s by the classic drain", res)
	}
}

// The most nodes out at once, counted as the events come, is what counting every node at every
// event gives: random events on 50 nodes.
func TestNodeTrackerMaxOut(t *testing.T) {
	var pool []string
	for i := range 50 {
		pool = append(pool, fmt.Sprintf("n%d", i))
	}
	t0 := time.Unix(1000, 0)
	nt := newNodeTracker(pool)
	for _, n := range pool {
		nt.observe(t0, n, "boot", true, false, false)
	}
	nt.begin(t0)
	rng := rand.New(rand.NewPCG(1, 2))
	state := map[string][2]bool{} // ready, unschedulable
	for _, n := range pool {
		state[n] = [2]bool{true, false}
	}
	want, wantCordoned := 0, 0
	for range 5000 {
		n := pool[rng.IntN(len(pool))]
		// Mostly in service, so that the count goes up and down.
		st := [2]bool{rng.IntN(4) > 0, rng.IntN(3) == 0}
		state[n] = st
		nt.observe(t0, n, "boot", st[0], st[1], false)
		out, cordoned := 0, 0
		for _, s := range state {
			if !s[0] || s[1] {
				out++
			}
			if s[1] {
				cordoned++
			}
		}
		want, wantCordoned = max(want, out), max(wantCordoned, cordoned)
		if nt.out != out {
			t.Fatalf("%d nodes out counted, want %d", nt.out, out)
		}
		if nt.cordoned != cordoned {
			t.Fatalf("%d nodes cordoned counted, want %d", nt.cordoned, cordoned)
		}
	}
	o := nt.outcome()
	if o.maxOut != want {
		t.Errorf("max out %d, want %d", o.maxOut, want)
	}
	if want == 0 {
		t.Errorf("the random events took no node out: nothing tested")
	}
	if o.maxCordoned != wantCordoned {
		t.Errorf("max cordoned %d, want %d", o.maxCordoned, wantCordoned)
	}
	if wantCordoned == 0 {
		t.Errorf("the random events cordoned no node: nothing tested")
	}
	if o.maxCordoned > o.maxOut {
		t.Errorf("max cordoned %d above max out %d: a cordoned node is out", o.maxCordoned, o.maxOut)
	}
	// Nodes outside the pool do not count.
	nt.observe(t0, "other", "boot", false, true, false)
	if got := nt.outcome().maxOut; got != want {
		t.Errorf("max out %d after a node outside the pool, want %d", got, want)
	}
}

// A node that goes not Ready uncordoned lost its heartbeats; a node is cordoned before its reboot.
func TestNodeTrackerLostReady(t *testing.T) {
	t0 := time.Unix(1000, 0)
	nt := newNodeTracker([]string{"n1", "n2", "n3"})
	for _, n := range []string{"n1", "n2", "n3"} {
		nt.observe(t0, n, "boot-"+n, true, false, false)
	}
	nt.begin(t0)
	nt.observe(t0, "n1", "boot-n1", true, true, true)   // cordoned, drained
	nt.observe(t0, "n1", "boot-n1", false, true, true)  // rebooting
	nt.observe(t0, "n1", "boot-n1b", false, true, true) // booted
	nt.observe(t0, "n1", "boot-n1b", true, false, false)
	nt.observe(t0, "n2", "boot-n2", false, false, false) // heartbeats missed
	nt.observe(t0, "n2", "boot-n2", true, false, false)
	o := nt.outcome()
	if o.lostReady != 1 {
		t.Errorf("%d nodes lost Ready, want 1", o.lostReady)
	}
	if o.maxCordoned != 1 {
		t.Errorf("%d cordoned at most, want 1", o.maxCordoned)
	}
	if o.maxOut != 1 {
		t.Errorf("%d out at most, want 1", o.maxOut)
	}
}

// testMaintenance is a rollout's NodeMaintenance with inTurn and status.nodes.
func testMaintenance(inTurn []string, nodes map[string]int32) *nodemaintv1alpha1.NodeMaintenance {
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}
	nm.Status.Rollout = &nodemaintv1alpha1.RolloutStatus{NodesInTurn: int32(len(inTurn))}
	for _, n := range inTurn {
		nm.Status.Rollout.InTurn = append(nm.Status.Rollout.InTurn, nodemaintv1alpha1.NodeTurn{Name: n})
	}
	if len(nodes) > 0 {
		nm.Status.Nodes = map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus{}
		for n, pending := range nodes {
			nm.Status.Nodes[n] = nodemaintv1alpha1.NodeMaintenanceNodeStatus{PodsPendingEvacuation: pending}
		}
	}
	return nm
}

// The status watch counts the updates, the sets of nodes in their turn and the nodes they named,
// and keeps the largest status.nodes and object: a pool of 4 nodes, 2 at a time.
func TestStatusTracker(t *testing.T) {
	st := newStatusTracker(4, 2)
	st.observe(testMaintenance(nil, nil))
	st.observe(testMaintenance(nil, nil)) // the same status again: a metadata change
	st.observe(testMaintenance([]string{"n1", "n0"}, map[string]int32{"n0": 3, "n1": 2}))
	st.observe(testMaintenance([]string{"n0", "n1"}, map[string]int32{"n0": 1})) // same set, other order
	big := testMaintenance([]string{"n1", "n2"}, map[string]int32{"n1": 1, "n2": 9})
	big.Status.NodesNotListed = 3
	st.observe(big)
	st.observe(testMaintenance([]string{"n2", "n3"}, nil))
	st.observe(testMaintenance([]string{"n0", "n1"}, nil)) // a set seen before
	st.observe(testMaintenance(nil, nil))
	f := st.figures()
	nodes, _ := json.Marshal(big.Status.Nodes)
	want := StatusFigures{
		Updates: 6, MaxNodes: 2, MaxNodesBytes: len(nodes), MaxNodesNotListed: 3, MaxInTurn: 2, InTurnChanges: 5, InTurnSets: 3,
		NodesSeenInTurn: 4, Turns: 2, MaxNodesLimit: 100, MaxNodesBytesLimit: 128 << 10, MaxObjectBytes: f.MaxObjectBytes,
	}
	if *f != want {
		t.Errorf("figures\n%+v, want\n%+v", *f, want)
	}
	obj, _ := json.Marshal(big)
	if f.MaxObjectBytes < len(obj) {
		t.Errorf("largest object %d bytes, smaller than %d", f.MaxObjectBytes, len(obj))
	}
}

// Scenario F's table has the goals, both concurrencies and the status figures.
func TestRenderFleet(t *testing.T) {
	total, ratio, rss := 330.0, 1.5, 250.0
	r := &Report{Scenarios: []ScenarioResult{{
		Name: "F", Description: "fleet", Targets: 1000, Pods: 10000, Goals: &Goals{TotalRatio: 1.5, PeakRSSMiB: 300},
		Rollout: &RolloutResult{MaxUnavailable: 100, MaxUnavailableSpec: "10%", ClassicAtOnce: 100, RebootSeconds: 10,
			IdealSeconds: 220, IdealSerialSeconds: 22000, IdealClassicSeconds: 220},
		Runs: []RunResult{
			{Method: MethodNodemaint, TotalSeconds: &total, TotalRatio: &ratio, NodesBack: 1000, MaxNodesOut: 100, ControllerPeakRSSMiB: &rss,
				Status: &StatusFigures{Updates: 2500, InTurnChanges: 1100, InTurnSets: 1050, NodesSeenInTurn: 1000, MaxInTurn: 100,
					MaxNodes: 100, MaxNodesBytes: 20480, MaxNodesNotListed: 7, MaxObjectBytes: 51200, Turns: 10}},
			{Method: MethodClassic, NodesBack: 1000, MaxNodesOut: 100},
		},
	}}}
	out := renderTable(r)
	for _, want := range []string{
		"220.0s at 100 nodes at once (both methods); goal for nodemaint: ×1.5", "330.0s ×1.50", "at most 100 ", "1000 of 1000",
		"2500 / 1100 / 1050", "10 turns of 100 nodes at least", "1000 / 100", "100 / 20.0 KiB; 7", "at most 100 / 128.0 KiB", "50.0 KiB",
		"goal: at most 300 MiB", "250 MiB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
