package main

import (
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestIdealTimes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ws             []Workload
		empty, settled time.Duration
	}{{
		// 10 replicas, maxSurge 25% = 3: 4 waves of 1s+5s, then the last old pod's 2s.
		name:  "deployment surges in waves of maxSurge",
		ws:    []Workload{{Kind: KindDeployment, Replicas: 10, ReadyDelay: 5 * sec, DeleteDelay: 2 * sec}},
		empty: 4*6*sec + 2*sec, settled: 4*6*sec + 2*sec,
	}, {
		name:  "a single replica surges one",
		ws:    []Workload{{Kind: KindDeployment, Replicas: 1, PDBMinAvailable: 1, ReadyDelay: 3 * sec, DeleteDelay: sec}},
		empty: 4*sec + sec, settled: 5 * sec,
	}, {
		// 3 pods one at a time: stop 5s, start 11s; empty after the third stop.
		name:  "statefulset paced by its budget",
		ws:    []Workload{{Kind: KindStatefulSet, Replicas: 3, PDBMaxUnavailable: 1, ReadyDelay: 10 * sec, DeleteDelay: 5 * sec}},
		empty: 2*16*sec + 5*sec, settled: 3 * 16 * sec,
	}, {
		name:  "statefulset without a budget goes at once",
		ws:    []Workload{{Kind: KindStatefulSet, Replicas: 4, ReadyDelay: 2 * sec, DeleteDelay: 3 * sec}},
		empty: 3 * sec, settled: 6 * sec,
	}, {
		name:  "shutdown is bounded by the grace period",
		ws:    []Workload{{Kind: KindStatefulSet, Replicas: 1, ReadyDelay: 0, DeleteDelay: time.Hour}},
		empty: terminationGracePeriod, settled: terminationGracePeriod + createDelay,
	}, {
		name: "the slowest workload counts, the blocker not",
		ws: []Workload{
			{Kind: KindDeployment, Replicas: 1, ReadyDelay: 3 * sec, DeleteDelay: sec},
			{Kind: KindStatefulSet, Replicas: 2, PDBMinAvailable: 1, ReadyDelay: 4 * sec, DeleteDelay: 2 * sec},
			{Kind: KindStatefulSet, Replicas: 1, PDBNever: true, Blocker: true, ReadyDelay: time.Hour},
		},
		empty: 7*sec + 2*sec, settled: 14 * sec,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			empty, settled := idealTimes(tc.ws)
			if empty != tc.empty {
				t.Errorf("idealTimes: empty %v, want %v", empty, tc.empty)
			}
			if settled != tc.settled {
				t.Errorf("idealTimes: settled %v, want %v", settled, tc.settled)
			}
		})
	}
}

func TestScenarioSizes(t *testing.T) {
	for name, want := range map[string]int{"S": 30, "B": 100, "M": 1000, "L": 10000, "P": 200} {
		s := scenarios()[name]
		if got := s.pods(); got != want {
			t.Errorf("scenario %s has %d pods, want %d", name, got, want)
		}
		if s.Targets >= s.Nodes && s.Rollout == nil {
			t.Errorf("scenario %s drains %d of %d nodes: no room for the replacements", name, s.Targets, s.Nodes)
		}
	}
}

// Scenario P's pods stay in its pool, the nodes it rolls through: they come back to the
// rebooted nodes whatever the size of the cluster the other scenarios need.
func TestRolloutScenarioPool(t *testing.T) {
	p := scenarios()["P"]
	if p.Rollout == nil {
		t.Fatalf("scenario P: no rollout; want maxUnavailable 2")
	}
	if got := p.Rollout.atOnce(MethodNodemaint, p.Targets); got != 2 {
		t.Fatalf("scenario P: %d nodes at once by nodemaint, want maxUnavailable 2", got)
	}
	if got := p.Rollout.atOnce(MethodClassic, p.Targets); got != 1 {
		t.Fatalf("scenario P: %d nodes at once by the classic drain, want 1", got)
	}
	if p.Targets != 20 {
		t.Fatalf("scenario P: %d targets, want 20 nodes", p.Targets)
	}
	pool := strings.Join(p.targetNodes(), ",")
	for _, w := range p.Workloads {
		obj, pdb := w.objects("ns")
		if pdb == nil {
			t.Errorf("%s has no PodDisruptionBudget", w.Name)
		}
		var tmpl corev1.PodTemplateSpec
		switch o := obj.(type) {
		case *appsv1.Deployment:
			tmpl = o.Spec.Template
		case *appsv1.StatefulSet:
			tmpl = o.Spec.Template
		}
		a := tmpl.Spec.Affinity
		if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			t.Fatalf("%s is not confined to the pool: %+v", w.Name, a)
		}
		req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
		if req.Key != corev1.LabelHostname {
			t.Errorf("%s's pods select by %s, want %s", w.Name, req.Key, corev1.LabelHostname)
		}
		if req.Operator != corev1.NodeSelectorOpIn {
			t.Errorf("%s's pods select with %s, want %s", w.Name, req.Operator, corev1.NodeSelectorOpIn)
		}
		if got := strings.Join(req.Values, ","); got != pool {
			t.Errorf("%s's pods select %s, want the pool %s", w.Name, got, pool)
		}
	}
}

func TestIdealRollout(t *testing.T) {
	p := scenarios()["P"]
	// At 2 nodes at once each round moves a tenth of every workload: web 8 pods (one wave of
	// maxSurge 20: 6s start, 2s stop), api 6 (9s, 3s), worker 4 (4s, 5s), cache 2 (6s, 2s),
	// db 1 (5s stop, 11s start): drained after 12s, rebooted 10s later; 10 rounds.
	if got, want := idealRollout(p.Workloads, p.Targets, 2, p.Rollout.Reboot), 10*22*sec; got != want {
		t.Errorf("ideal at 2 nodes at once = %v, want %v", got, want)
	}
	// One node at a time: half the pods a round, api's single wave still 12s; 20 rounds.
	if got, want := idealRollout(p.Workloads, p.Targets, 1, p.Rollout.Reboot), 20*22*sec; got != want {
		t.Errorf("ideal one node at a time = %v, want %v", got, want)
	}
	// A StatefulSet whose last replacement starts after the last reboot: 2 rounds of its one
	// pod (stop 5s, reboot 1s), then its replacement's start (1s+20s) after the last stop.
	db := []Workload{{Kind: KindStatefulSet, Replicas: 2, PDBMaxUnavailable: 1, ReadyDelay: 20 * sec, DeleteDelay: 5 * sec}}
	if got, want := idealRollout(db, 2, 1, sec), 6*sec+26*sec; got != want {
		t.Errorf("ideal of a slow StatefulSet = %v, want %v", got, want)
	}
	if got := idealRollout(db, 0, 1, sec); got != 0 {
		t.Errorf("ideal of no nodes = %v, want 0", got)
	}
}

// TestNodeTracker feeds the node accounting a rollout of two nodes, one at a time: n1 cordoned,
// drained, rebooted (NotReady, another boot ID), Ready, uncordoned; then n2.
func TestNodeTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	nt := newNodeTracker([]string{"n1", "n2"})
	nt.observe(at(-5), "n1", "boot-1", true, false, false)
	nt.observe(at(-5), "n2", "boot-2", true, false, false)
	nt.observe(at(-5), "other", "x", false, true, false) // not in the pool
	nt.begin(t0)
	s := nt.snapshot()
	if len(s.nodes) != 2 {
		t.Fatalf("initial snapshot %+v, want the 2 nodes of the pool", s.nodes)
	}
	if s.nodes["n1"].rebooted {
		t.Fatalf("initial snapshot %+v, want n1 not rebooted", s.nodes)
	}
	if s.nodes["n1"].out() {
		t.Fatalf("initial snapshot %+v, want n1 in service", s.nodes)
	}
	nt.observe(at(1), "n1", "boot-1", true, true, false)
	nt.observe(at(5), "n1", "boot-1", true, true, true)
	nt.observe(at(6), "n1", "boot-1b", false, true, true) // down, back with another boot ID
	n1 := nt.snapshot().nodes["n1"]
	if !n1.rebooted {
		t.Fatalf("n1 rebooting: %+v, want rebooted", n1)
	}
	if n1.back() {
		t.Fatalf("n1 rebooting: %+v, want not back", n1)
	}
	nt.observe(at(9), "n1", "boot-1b", true, true, true)
	nt.observe(at(10), "n1", "boot-1b", true, false, false)
	o := nt.outcome()
	if o.back != 1 {
		t.Fatalf("outcome after n1: %d back, want 1", o.back)
	}
	if o.allBack != nil {
		t.Fatalf("outcome after n1: all back at %v, want not all back", *o.allBack)
	}
	if o.maxOut != 1 {
		t.Fatalf("outcome after n1: at most %d out, want 1", o.maxOut)
	}
	nt.observe(at(10.5), "n2", "boot-2", true, true, false)
	nt.observe(at(12), "n2", "boot-2b", false, true, true)
	nt.observe(at(14), "n2", "boot-2b", true, false, false)
	nt.observe(at(15), "other", "y", false, true, false)
	o = nt.outcome()
	if o.back != 2 {
		t.Errorf("%d back, want 2", o.back)
	}
	if o.allBack == nil || *o.allBack != 14 {
		t.Errorf("all back at %v, want 14s", o.allBack)
	}
	if o.maxOut != 1 {
		t.Errorf("at most %d out, want 1", o.maxOut)
	}
	// A node that goes out again is not back until it returns.
	nt.observe(at(16), "n1", "boot-1b", true, true, false)
	nt.observe(at(17), "n2", "boot-2b", false, false, false)
	o = nt.outcome()
	if o.back != 0 {
		t.Errorf("with both out again: %d back, want none", o.back)
	}
	if o.allBack != nil {
		t.Errorf("with both out again: all back at %v, want not all back", *o.allBack)
	}
	if o.maxOut != 2 {
		t.Errorf("with both out again: at most %d out, want 2", o.maxOut)
	}
	nt.observe(at(18), "n1", "boot-1b", true, false, false)
	nt.observe(at(19), "n2", "boot-2b", true, false, false)
	if o := nt.outcome(); o.allBack == nil || *o.allBack != 19 {
		t.Errorf("all back again at %v, want 19", o.allBack)
	}
}

// TestTracker feeds the sampler's accounting a drain of one node: a Deployment of 2 that dips
// to 1, and a pod that no one may evict.
func TestTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := newTracker(map[string]int{"web": 2, "blocker": 1}, map[string]bool{"blocker": true}, []string{"n1"})
	// The initial state, before the clock starts.
	tr.observe(at(-5), "web-a", "web", "n1", true, false, false)
	tr.observe(at(-5), "web-b", "web", "n1", true, false, false)
	tr.observe(at(-5), "blocker-0", "blocker", "n1", true, false, false)
	tr.begin(t0)
	s := tr.snapshot()
	if s.left != 2 {
		t.Fatalf("initial snapshot %+v, want 2 pods left", s)
	}
	if !s.allDesired {
		t.Fatalf("initial snapshot %+v, want every workload at its desired count", s)
	}
	tr.observe(at(1), "web-a", "web", "n1", true, true, false) // evicted: terminating, no longer counts as Ready
	tr.observe(at(2), "web-c", "web", "", false, false, false) // replacement created
	tr.observe(at(2.5), "web-c", "web", "n2", false, false, false)
	tr.observe(at(3), "web-a", "web", "n1", true, true, true) // gone
	tr.observe(at(6), "web-c", "web", "n2", true, false, false)
	tr.observe(at(7), "web-d", "web", "n2", true, false, false) // a surge: above desired
	tr.observe(at(8), "web-b", "web", "n1", true, true, false)
	s = tr.snapshot()
	if s.left != 1 {
		t.Fatalf("snapshot at 8s %+v, want 1 pod left", s)
	}
	if !s.allDesired {
		t.Fatalf("snapshot at 8s %+v, want every workload at its desired count", s)
	}
	tr.observe(at(9), "web-b", "web", "n1", true, true, true)
	s = tr.snapshot()
	if s.left != 0 {
		t.Fatalf("final snapshot %+v, want no pod left", s)
	}
	if !s.allDesired {
		t.Fatalf("final snapshot %+v, want every workload at its desired count", s)
	}
	o := tr.outcome(10, map[string]string{"web": KindDeployment, "blocker": KindStatefulSet})
	if o.empty == nil || *o.empty != 9 {
		t.Errorf("empty = %v, want 9", o.empty)
	}
	// web came back to 2 Ready at 6s; the nodes were empty at 9s.
	if o.settled == nil || *o.settled != 9 {
		t.Errorf("settled = %v, want 9", o.settled)
	}
	if o.evacuated != 2 {
		t.Errorf("evacuated = %d, want 2", o.evacuated)
	}
	want := []WorkloadResult{
		{Name: "blocker", Kind: KindStatefulSet, Desired: 1, MinReady: 1},
		{Name: "web", Kind: KindDeployment, Desired: 2, MinReady: 1, SecondsBelow: 5},
	}
	if len(o.workloads) != 2 || o.workloads[0] != want[0] || o.workloads[1] != want[1] {
		t.Errorf("workloads = %+v, want %+v", o.workloads, want)
	}
	// Ready in all (the blocker aside): 2, 1 at 1s, 2 at 6s, 3 at 7s, 2 at 8s.
	wantTotal := []Point{{0, 2}, {1, 1}, {6, 2}, {7, 3}, {8, 2}}
	if len(o.total) != len(wantTotal) {
		t.Fatalf("total = %v, want %v", o.total, wantTotal)
	}
	for i := range wantTotal {
		if o.total[i] != wantTotal[i] {
			t.Fatalf("total = %v, want %v", o.total, wantTotal)
		}
	}
}

func TestTrackerNeverEmpty(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTracker(map[string]int{"db": 1}, nil, []string{"n1"})
	tr.observe(t0, "db-0", "db", "n1", true, false, false)
	tr.begin(t0)
	tr.observe(t0.Add(3*time.Second), "db-0", "db", "n1", false, false, false) // not Ready, stays
	o := tr.outcome(10, nil)
	if o.empty != nil {
		t.Errorf("empty = %v, want never", *o.empty)
	}
	if o.left != 1 {
		t.Errorf("left = %d, want 1", o.left)
	}
	if o.settled != nil {
		t.Errorf("settled = %v, want never (db is down)", *o.settled)
	}
	w := o.workloads[0]
	if w.MinReady != 0 {
		t.Errorf("db = %+v, want at least once none Ready", w)
	}
	if w.SecondsBelow != 7 {
		t.Errorf("db = %+v, want 7s below desired", w)
	}
	if w.SecondsAtZero != 7 {
		t.Errorf("db = %+v, want 7s at zero", w)
	}
}

func TestAvailability(t *testing.T) {
	series := []Point{{0, 3}, {2, 1}, {4, 0}, {5, 3}, {20, 3}}
	minReady, below, zero := availability(series, 3, 10)
	if minReady != 0 {
		t.Errorf("availability: min Ready %d, want 0", minReady)
	}
	if below != 3 {
		t.Errorf("availability: %v below desired, want 3", below)
	}
	if zero != 1 {
		t.Errorf("availability: %v at zero, want 1", zero)
	}
}

func TestSumCounter(t *testing.T) {
	const metrics = `# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",verb="GET",version="v1"} 12
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",subresource="eviction",verb="POST",version="v1"} 3
apiserver_request_total{code="429",component="apiserver",group="",resource="pods",subresource="eviction",verb="POST",version="v1"} 1.5e+01
apiserver_request_total_other{verb="GET"} 99
apiserver_request_duration_seconds_bucket{verb="GET",le="1"} 7
`
	got, err := sumCounter(strings.NewReader(metrics), "apiserver_request_total", "verb")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["GET"] != 12 || got["POST"] != 18 {
		t.Errorf("sumCounter = %v, want GET 12, POST 18", got)
	}
}

func TestProcParsing(t *testing.T) {
	stat := "4242 (nodemaint ctl) S 1 4242 4242 0 -1 4194560 3075 0 0 0 150 37 0 0 20 0 12 0 1000 2000 3000"
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 1.87 {
		t.Errorf("parseStatCPU = %v, %v; want 1.87", cpu, err)
	}
	status := "Name:\tnodemaint\nVmHWM:\t   51234 kB\nVmRSS:\t   40000 kB\n"
	if hwm, err := statusKiB(status, "VmHWM"); err != nil || hwm != 51234 {
		t.Errorf("VmHWM = %v, %v", hwm, err)
	}
}

func testReport() *Report {
	empty, settled, ratio, patch := 9.0, 12.0, 1.5, 0.25
	return &Report{
		Time:    "2026-11-23T00:00:00Z",
		Machine: Machine{CPU: "test", Cores: 2, MemoryGiB: 4, GoVersion: "go1.26", KubernetesVersion: "v1.37.1"},
		Scenarios: []ScenarioResult{{
			Name: "S", Description: "test", Pods: 2, IdealEmptySeconds: 6, IdealSettledSeconds: 8,
			Runs: []RunResult{
				{Method: MethodClassic, Blocked: "timed out after 1m0s on n1", PodsLeft: 1, DurationSeconds: 60,
					Ready: []Point{{0, 2}, {1, 0}, {7, 2}}, Workloads: []WorkloadResult{{Name: "web", Desired: 2, SecondsBelow: 6, SecondsAtZero: 6}}},
				{Method: MethodNodemaint, EmptySeconds: &empty, SettledSeconds: &settled, EmptyRatio: &ratio, DurationSeconds: 12,
					Ready: []Point{{0, 2}, {5, 3}, {9, 2}}, APIRequestsPerPod: map[string]float64{"POST": 2, "GET": 1}, PodStatusPatchSeconds: &patch},
			},
		}},
	}
}

func TestRenderTable(t *testing.T) {
	out := renderTable(testReport())
	for _, want := range []string{"never (1 pods left)", "9.0s ×1.50", "timed out after 1m0s on n1", "1 of 1 (longest 6.0s)", "3.0 (writes 2.0)", " 250ms "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// A rolling maintenance has a total time instead of "nodes empty", and ideals at both
// concurrencies.
func TestRenderRollout(t *testing.T) {
	total, totalRatio := 300.0, 1.36
	r := &Report{Scenarios: []ScenarioResult{{
		Name: "P", Description: "pool", Targets: 20, Pods: 200,
		Rollout: &RolloutResult{MaxUnavailable: 2, RebootSeconds: 10, IdealSeconds: 220, IdealSerialSeconds: 440},
		Runs: []RunResult{
			{Method: MethodClassic, NodesBack: 19, MaxNodesOut: 1, EvacuatedPods: 250, Blocked: "1 drains timed out after 30s and were run again (kwok-node-3)"},
			{Method: MethodNodemaint, TotalSeconds: &total, TotalRatio: &totalRatio, NodesBack: 20, MaxNodesOut: 2, EvacuatedPods: 210},
		},
	}}}
	out := renderTable(r)
	for _, want := range []string{"total time", "300.0s ×1.36", "220.0s at 2 nodes at once, 440.0s at 1", "19 of 20", "20 of 20", "nodes out at once (most)", "run again (kwok-node-3)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"nodes empty", "all workloads Ready", "never ("} {
		if strings.Contains(out, unwanted) {
			t.Errorf("table of a rollout has %q:\n%s", unwanted, out)
		}
	}
	if md := renderMarkdown(r, ""); !strings.Contains(md, "| total time | never | 300.0s ×1.36 | 220.0s at 2 nodes at once, 440.0s at 1 |") {
		t.Errorf("markdown without the total time row:\n%s", md)
	}
}

func TestRenderSVG(t *testing.T) {
	svg := renderSVG(testReport().Scenarios[0])
	var doc struct {
		Polylines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, svg)
	}
	if len(doc.Polylines) != 2 {
		t.Fatalf("%d polylines, want one per method", len(doc.Polylines))
	}
	// A step line: 3 points, 2 vertical steps, and the end of the run.
	if n := len(strings.Fields(doc.Polylines[0].Points)); n != 6 {
		t.Errorf("classic line has %d points, want 6: %s", n, doc.Polylines[0].Points)
	}
}

func TestSpliceDocs(t *testing.T) {
	doc := "intro\n" + docsBegin + "\nold\n" + docsEnd + "\nnotes\n"
	out, err := spliceDocs(doc, docsBegin, docsEnd, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + docsBegin + "\nnew\n" + docsEnd + "\nnotes\n"; out != want {
		t.Errorf("spliceDocs = %q, want %q", out, want)
	}
	if _, err := spliceDocs("no markers", docsBegin, docsEnd, "x"); err == nil {
		t.Error("spliceDocs without markers: no error")
	}
}

// A run of the large scenario alone rewrites only the large part of the page, and a run of the
// others only theirs; a run of both rewrites both.
func TestWriteDocsParts(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "benchmarks.md")
	doc := "intro\n" + docsBegin + "\nold regular\n" + docsEnd + "\nmiddle\n" + docsLargeBegin + "\nold large\n" + docsLargeEnd + "\nend\n"
	if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	large := &Report{Time: "T1", Scenarios: []ScenarioResult{{Name: "L", Description: "the large one"}}, Idle: &IdleResult{Nodes: 5000, Pods: 50000, RSSMiB: 300}}
	if err := writeDocs(root, large); err != nil {
		t.Fatal(err)
	}
	got := read()
	if !strings.Contains(got, "\nold regular\n") {
		t.Errorf("a large run rewrote the regular part:\n%s", got)
	}
	if strings.Contains(got, "old large") {
		t.Errorf("a large run did not replace the large part:\n%s", got)
	}
	if !strings.Contains(got, "### Scenario L") {
		t.Errorf("a large run did not write scenario L:\n%s", got)
	}
	if !strings.Contains(got, "5000 nodes and 50000 pods") {
		t.Errorf("a large run did not write its size:\n%s", got)
	}
	regular := &Report{Time: "T2", Scenarios: []ScenarioResult{{Name: "M", Description: "the medium one"}}}
	if err := writeDocs(root, regular); err != nil {
		t.Fatal(err)
	}
	got = read()
	if strings.Contains(got, "old regular") {
		t.Errorf("a regular run did not replace the regular part:\n%s", got)
	}
	if !strings.Contains(got, "### Scenario M") {
		t.Errorf("a regular run did not write scenario M:\n%s", got)
	}
	if !strings.Contains(got, "### Scenario L") {
		t.Errorf("a regular run rewrote the large part:\n%s", got)
	}
	if i, j := strings.Index(got, "### Scenario M"), strings.Index(got, "middle"); i > j {
		t.Errorf("scenario M written after the regular part's end:\n%s", got)
	}
	// The fleet has a part of its own; a run of it and of M rewrites both.
	if err := os.WriteFile(page, []byte(got+docsFleetBegin+"\nold fleet\n"+docsFleetEnd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	both := &Report{Time: "T3", Scenarios: []ScenarioResult{{Name: "M", Description: "medium again"}, {Name: "F", Description: "the fleet"}}}
	if err := writeDocs(root, both); err != nil {
		t.Fatal(err)
	}
	got = read()
	if strings.Contains(got, "old fleet") {
		t.Errorf("a run of M and F did not replace the fleet part:\n%s", got)
	}
	if n := strings.Count(got, "### Scenario F"); n != 1 {
		t.Errorf("a run of M and F wrote scenario F %d times, want once:\n%s", n, got)
	}
	if !strings.Contains(got, "medium again") {
		t.Errorf("a run of M and F did not write the regular part:\n%s", got)
	}
	if i, j := strings.Index(got, "### Scenario F"), strings.Index(got, docsFleetBegin); i < j {
		t.Errorf("scenario F written outside the fleet part:\n%s", got)
	}
	if !strings.Contains(got, "### Scenario L") {
		t.Errorf("a run of M and F rewrote the large part:\n%s", got)
	}
}

// Scenario L and the idle measurement run apart make one report: L from the first file, the idle
// figures from the second with the time of their own run; a later run of a method replaces an
// earlier one and keeps its time, the other method's run stays.
func TestMergeReports(t *testing.T) {
	l := &Report{Time: "T1", Settings: Settings{ClusterNodes: 1000}, Scenarios: []ScenarioResult{{Name: "L", Description: "first",
		Runs: []RunResult{{Method: MethodClassic, DurationSeconds: 777}, {Method: MethodNodemaint, DurationSeconds: 1}}}}}
	idle := &Report{Time: "T2", Settings: Settings{ClusterNodes: 5000}, Idle: &IdleResult{Nodes: 5000, Pods: 50000, RSSMiB: 590, SettledRSSMiB: 420}}
	again := &Report{Time: "T3", Scenarios: []ScenarioResult{
		{Name: "L", Description: "again", Runs: []RunResult{{Method: MethodNodemaint, DurationSeconds: 300}}},
		{Name: "M", Description: "medium"}}}
	m := mergeReports([]*Report{l, idle, again})
	if m.Time != "T1" {
		t.Errorf("time %s: want the first report's, T1", m.Time)
	}
	if m.Settings.ClusterNodes != 1000 {
		t.Errorf("%d nodes: want the first report's, 1000", m.Settings.ClusterNodes)
	}
	if len(m.Scenarios) != 2 {
		t.Fatalf("scenarios %+v: want L (again) and M", m.Scenarios)
	}
	if m.Scenarios[0].Description != "again" {
		t.Fatalf("scenarios %+v: want L described by the later run (again)", m.Scenarios)
	}
	if m.Scenarios[1].Name != "M" {
		t.Fatalf("scenarios %+v: want M second", m.Scenarios)
	}
	runs := m.Scenarios[0].Runs
	if len(runs) != 2 {
		t.Errorf("runs of L %+v: want the classic one of T1 and the nodemaint one of T3", runs)
	} else {
		if runs[0].Method != MethodClassic {
			t.Errorf("runs of L %+v: want the classic one first", runs)
		}
		if runs[0].DurationSeconds != 777 {
			t.Errorf("runs of L %+v: want the classic one of T1, 777s", runs)
		}
		if runs[0].Time != "" {
			t.Errorf("runs of L %+v: want the classic one of the report's own time", runs)
		}
		if runs[1].Method != MethodNodemaint {
			t.Errorf("runs of L %+v: want the nodemaint one second", runs)
		}
		if runs[1].DurationSeconds != 300 {
			t.Errorf("runs of L %+v: want the nodemaint one of T3, 300s", runs)
		}
		if runs[1].Time != "T3" {
			t.Errorf("runs of L %+v: want the nodemaint one with its time T3", runs)
		}
	}
	if m.Idle == nil {
		t.Fatalf("no idle figures: want 590 MiB measured at T2")
	}
	if m.Idle.RSSMiB != 590 {
		t.Fatalf("idle %+v: want 590 MiB", m.Idle)
	}
	if m.Idle.Time != "T2" {
		t.Fatalf("idle %+v: want measured at T2", m.Idle)
	}
	if l.Scenarios[0].Description != "first" {
		t.Error("merging changed its inputs: the first report's description")
	}
	if l.Scenarios[0].Runs[1].DurationSeconds != 1 {
		t.Error("merging changed its inputs: the first report's run")
	}
	if idle.Idle.Time != "" {
		t.Error("merging changed its inputs: the idle report's time")
	}
	if again.Scenarios[0].Runs[0].Time != "" {
		t.Error("merging changed its inputs: the later report's run")
	}
	md := renderMarkdown(m, "")
	for _, want := range []string{"Run T1 ", "Controller idle (run T2) with 5000 nodes", "590 MiB (peak 0 MiB), 420 MiB 1m30s later,", "nodemaint was run apart: run T3"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown without %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "kubectl-drain was run apart") {
		t.Errorf("the first report's run named apart:\n%s", md)
	}
	if md := renderMarkdown(mergeReports([]*Report{idle}), ""); strings.Contains(md, "(run ") {
		t.Errorf("one report names its idle run apart:\n%s", md)
	}
}

func TestClassicTimedOut(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New(`[error when evicting pods/"db-0" -n "ns" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget., global timeout reached: 30s]`), true},
		{errors.New(`[error when waiting for pod "web-1" in namespace "ns" to terminate: context deadline exceeded]`), true},
		{errors.New(`pods "web-1" is forbidden: User "x" cannot create resource "pods/eviction"`), false},
	} {
		if got := timedOut(tc.err); got != tc.want {
			t.Errorf("timedOut(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}

func TestDrainTimeouts(t *testing.T) {
	for _, tc := range []struct {
		timeouts []string
		want     string
	}{
		{nil, ""},
		{[]string{"n1", "n1", "n3"}, "3 drains timed out after 30s and were run again (n1, n3)"},
		{[]string{"n1", "n2", "n3", "n4", "n4"}, "5 drains timed out after 30s and were run again (4 of the 20 nodes)"},
	} {
		if got := drainTimeouts(tc.timeouts, 20, 30*time.Second); got != tc.want {
			t.Errorf("drainTimeouts(%v) = %q, want %q", tc.timeouts, got, tc.want)
		}
	}
}

// TestProtocolArgs: nodemaint-er asks through EvictionRequests; nodemaint through the pods'
// conditions, explicitly so where the cluster serves the API (auto would choose it there).
func TestProtocolArgs(t *testing.T) {
	for _, c := range []struct {
		method string
		api    bool
		want   []string
	}{
		{MethodNodemaint, false, nil},
		{MethodNodemaint, true, []string{"--evacuation-protocol=pod-conditions"}},
		{MethodNodemaintER, true, []string{"--evacuation-protocol=eviction-request"}},
	} {
		if got := protocolArgs(c.method, c.api); !slices.Equal(got, c.want) {
			t.Errorf("protocolArgs(%s, API served %v) = %v, want %v", c.method, c.api, got, c.want)
		}
	}
	if needsEvictionRequestAPI([]string{MethodClassic, MethodNodemaint}) {
		t.Error("needsEvictionRequestAPI: classic and nodemaint need the API, want the API for nodemaint-er only")
	}
	if !needsEvictionRequestAPI([]string{MethodNodemaint, MethodNodemaintER}) {
		t.Error("needsEvictionRequestAPI: nodemaint-er does not need the API, want the API for nodemaint-er")
	}
}

// The answer latency is read from the difference of two cumulative histograms: the quantiles are
// the upper bounds of the buckets they fall in.
func TestAnswerLatency(t *testing.T) {
	before := map[string]float64{"1": 5, "2": 5, "4": 5, "8": 5, "+Inf": 5}
	after := map[string]float64{"1": 60, "2": 100, "4": 104, "8": 105, "+Inf": 105}
	got := answerLatency(after, before)
	want := &AnswerLatency{Accepted: 100, MedianSeconds: 1, P99Seconds: 4, MaxSeconds: 8}
	if *got != *want {
		t.Errorf("got %+v, want %+v", *got, *want)
	}
	if answerLatency(before, before) != nil {
		t.Error("no acceptances between the reads: want nil")
	}
	text := `nodemaint_evacuation_answer_duration_seconds_bucket{answer="accepted",le="1"} 3
nodemaint_evacuation_answer_duration_seconds_bucket{answer="accepted",le="+Inf"} 4
nodemaint_evacuation_answer_duration_seconds_bucket{answer="declined",le="1"} 7
`
	m, err := sumCounter(strings.NewReader(text), "nodemaint_evacuation_answer_duration_seconds_bucket", "answer", "le")
	if err != nil || m["accepted 1"] != 3 || m["accepted +Inf"] != 4 || m["declined 1"] != 7 {
		t.Errorf("got %v, %v", m, err)
	}
}
