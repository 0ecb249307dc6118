package main

import (
	"sort"
	"sync"
	"time"
)

// Point is a value at a time, in seconds since the drain was requested.
type Point struct {
	T float64 `json:"t"`
	V int     `json:"v"`
}

// podState is what the tracker keeps of one pod.
type podState struct {
	app, node          string
	ready, terminating bool
}

// tracker is the accounting of the watch-based sampler: it is fed every pod event of a run's
// namespace (observe) and keeps, with no gap between samples, the Ready pods of every workload
// over time and the pods left on the drained nodes. It does no I/O, so it is tested with
// synthetic events.
type tracker struct {
	mu      sync.Mutex
	changed chan struct{} // closed at every change

	desired map[string]int  // workload -> desired Ready replicas
	ignored map[string]bool // workloads left out of "empty" and "settled" (a pod no one may evict)
	targets map[string]bool // the drained nodes

	start  time.Time // zero until begin
	pods   map[string]podState
	ready  map[string]int      // workload -> Ready pods that are not terminating
	series map[string][]Point  // workload -> Ready over time, from begin
	total  []Point             // Ready pods of every tracked workload, from begin
	left   int                 // pods of tracked workloads on target nodes, terminating ones included
	gone   map[string]bool     // pods on target nodes deleted or terminating since begin
	events int                 // events observed since begin
	emptyT *float64            // last time left dropped to 0
	upT    map[string]*float64 // workload -> last time it came back to desired
}

func newTracker(desired map[string]int, ignored map[string]bool, targets []string) *tracker {
	t := &tracker{
		changed: make(chan struct{}), desired: desired, ignored: ignored, targets: map[string]bool{},
		pods: map[string]podState{}, ready: map[string]int{}, series: map[string][]Point{},
		gone: map[string]bool{}, upT: map[string]*float64{},
	}
	for _, n := range targets {
		t.targets[n] = true
	}
	return t
}

// begin starts the clock: what was observed before is the initial state, at t=0.
func (t *tracker) begin(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = now
	for app := range t.desired {
		t.series[app] = []Point{{0, t.ready[app]}}
	}
	t.total = []Point{{0, t.totalReadyLocked()}}
	t.notifyLocked()
}

// observe records one pod event at now; deleted means the pod is gone from the API.
func (t *tracker) observe(now time.Time, key, app, node string, ready, terminating, deleted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.desired[app]; !ok {
		return
	}
	old, existed := t.pods[key]
	if existed {
		t.count(old, -1)
	}
	cur := podState{app: app, node: node, ready: ready, terminating: terminating}
	if deleted {
		delete(t.pods, key)
	} else {
		t.pods[key] = cur
		t.count(cur, +1)
	}
	if t.start.IsZero() {
		return
	}
	t.events++
	s := max(now.Sub(t.start).Seconds(), 0)
	if (deleted || terminating) && t.targets[node] {
		t.gone[key] = true
	}
	if r, series := t.ready[app], t.series[app]; series[len(series)-1].V != r {
		t.series[app] = appendPoint(series, s, r)
		if r >= t.desired[app] && series[len(series)-1].V < t.desired[app] {
			t.upT[app] = &s
		}
		t.total = appendPoint(t.total, s, t.totalReadyLocked())
	}
	if t.left == 0 && (existed && t.onTarget(old)) {
		t.emptyT = &s
	}
	if t.left > 0 {
		t.emptyT = nil
	}
	t.notifyLocked()
}

// appendPoint appends (s, v), replacing the last point when it is at the same time.
func appendPoint(series []Point, s float64, v int) []Point {
	if n := len(series); n > 0 && series[n-1].T == s {
		series[n-1].V = v
		return series
	}
	return append(series, Point{s, v})
}

func (t *tracker) onTarget(p podState) bool { return t.targets[p.node] && !t.ignored[p.app] }

func (t *tracker) count(p podState, d int) {
	if p.ready && !p.terminating {
		t.ready[p.app] += d
	}
	if t.onTarget(p) {
		t.left += d
	}
}

func (t *tracker) totalReadyLocked() int {
	n := 0
	for app, r := range t.ready {
		if !t.ignored[app] {
			n += r
		}
	}
	return n
}

func (t *tracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// snapshot is the tracker's state at one moment.
type snapshot struct {
	left       int  // pods of tracked workloads on target nodes
	allDesired bool // every tracked workload has its desired Ready replicas
	changed    <-chan struct{}
}

func (t *tracker) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := snapshot{left: t.left, allDesired: true, changed: t.changed}
	for app, d := range t.desired {
		if !t.ignored[app] && t.ready[app] < d {
			s.allDesired = false
		}
	}
	return s
}

// WorkloadResult is the availability of one workload during a run.
type WorkloadResult struct {
	Name          string  `json:"name"`
	Kind          string  `json:"kind"`
	Desired       int     `json:"desired"`
	MinReady      int     `json:"minReady"`
	SecondsBelow  float64 `json:"secondsBelowDesired"`
	SecondsAtZero float64 `json:"secondsAtZero"`
}

// availability integrates a step series of Ready replicas over [0, end].
func availability(series []Point, desired int, end float64) (minReady int, below, zero float64) {
	minReady = desired
	for i, p := range series {
		if p.T > end {
			break
		}
		next := end
		if i+1 < len(series) {
			next = min(series[i+1].T, end)
		}
		minReady = min(minReady, p.V)
		if p.V < desired {
			below += next - p.T
		}
		if p.V == 0 {
			zero += next - p.T
		}
	}
	return minReady, below, zero
}

// outcome is what the tracker measured of a run that ended at end (seconds).
type outcome struct {
	empty     *float64 // when the target nodes were left with no pod of a tracked workload
	settled   *float64 // when, after that, every tracked workload was back at its desired replicas
	left      int
	evacuated int
	events    int
	workloads []WorkloadResult
	total     []Point
}

func (t *tracker) outcome(end float64, kinds map[string]string) outcome {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := outcome{left: t.left, evacuated: len(t.gone), events: t.events, total: append([]Point(nil), t.total...)}
	if t.left == 0 {
		e := 0.0
		if t.emptyT != nil {
			e = *t.emptyT
		}
		o.empty = &e
	}
	apps := make([]string, 0, len(t.desired))
	for app := range t.desired {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	settled, allUp := 0.0, true
	if o.empty != nil {
		settled = *o.empty
	}
	for _, app := range apps {
		d := t.desired[app]
		series := t.series[app]
		w := WorkloadResult{Name: app, Kind: kinds[app], Desired: d}
		w.MinReady, w.SecondsBelow, w.SecondsAtZero = availability(series, d, end)
		w.SecondsBelow, w.SecondsAtZero = round(w.SecondsBelow), round(w.SecondsAtZero)
		o.workloads = append(o.workloads, w)
		if t.ignored[app] {
			continue
		}
		if series[len(series)-1].V < d {
			allUp = false
		} else if up := t.upT[app]; up != nil {
			settled = max(settled, *up)
		}
	}
	if allUp {
		o.settled = &settled
	}
	return o
}

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
