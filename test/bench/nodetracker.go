package main

import (
	"maps"
	"sync"
	"time"
)

// nodeState is what the node tracker keeps of one node of the pool.
type nodeState struct {
	bootID                        string
	ready, unschedulable, drained bool
	// rebooted: the node has another boot ID than when the run started.
	rebooted bool
}

// out reports whether the node is out of service: cordoned or not Ready.
func (s nodeState) out() bool { return s.unschedulable || !s.ready }

// back reports whether the node was rebooted and is back in service.
func (s nodeState) back() bool { return s.rebooted && !s.out() }

// nodeTracker follows the pool of a rolling maintenance from every event of its nodes (a watch,
// no polling gaps): which node was rebooted (another boot ID than at the start) and is back in
// service (Ready and uncordoned), since when, and how many nodes were out of service at once.
// Like tracker, it does no I/O, so it is tested with synthetic events.
type nodeTracker struct {
	mu      sync.Mutex
	changed chan struct{} // closed at every change

	start  time.Time // zero until begin
	nodes  map[string]nodeState
	boot   map[string]string  // node -> boot ID at begin
	backT  map[string]float64 // node -> last time it came back in service
	out    int                // nodes out of service now
	maxOut int                // the most nodes out of service at once since begin
	// cordoned and maxCordoned are the same of the nodes cordoned (unschedulable) alone: what
	// the drainer decides.
	cordoned, maxCordoned int
	// lostReady are the nodes that went from Ready to not Ready while uncordoned since begin:
	// not for a reboot (every node is drained, so cordoned, first), the node lifecycle
	// controller missed their heartbeats.
	lostReady map[string]bool
}

func newNodeTracker(pool []string) *nodeTracker {
	t := &nodeTracker{changed: make(chan struct{}), nodes: map[string]nodeState{}, boot: map[string]string{}, backT: map[string]float64{},
		lostReady: map[string]bool{}}
	for _, n := range pool {
		t.nodes[n] = nodeState{}
	}
	// A node not seen yet counts as out (not Ready) until its first event.
	t.out = len(pool)
	return t
}

// begin starts the clock: the boot IDs observed until now are the ones before the reboots.
func (t *nodeTracker) begin(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = now
	for name, s := range t.nodes {
		t.boot[name] = s.bootID
	}
	t.maxOut, t.maxCordoned = t.out, t.cordoned
	t.notifyLocked()
}

// observe records one event of a node at now; nodes outside the pool are ignored.
func (t *nodeTracker) observe(now time.Time, name, bootID string, ready, unschedulable, drained bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.nodes[name]
	if !ok {
		return
	}
	cur := nodeState{bootID: bootID, ready: ready, unschedulable: unschedulable, drained: drained}
	if !t.start.IsZero() {
		cur.rebooted = bootID != t.boot[name]
	}
	t.nodes[name] = cur
	switch {
	case cur.out() && !old.out():
		t.out++
	case !cur.out() && old.out():
		t.out--
	}
	switch {
	case cur.unschedulable && !old.unschedulable:
		t.cordoned++
	case !cur.unschedulable && old.unschedulable:
		t.cordoned--
	}
	if t.start.IsZero() {
		return
	}
	t.maxOut, t.maxCordoned = max(t.maxOut, t.out), max(t.maxCordoned, t.cordoned)
	if old.ready && !cur.ready && !cur.unschedulable {
		t.lostReady[name] = true
	}
	switch {
	case cur.back() && !old.back():
		t.backT[name] = max(now.Sub(t.start).Seconds(), 0)
	case !cur.back():
		delete(t.backT, name)
	}
	t.notifyLocked()
}

func (t *nodeTracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// nodeSnapshot is the pool at one moment.
type nodeSnapshot struct {
	nodes   map[string]nodeState
	changed <-chan struct{}
}

func (t *nodeTracker) snapshot() nodeSnapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return nodeSnapshot{nodes: maps.Clone(t.nodes), changed: t.changed}
}

// node is one node of the pool at one moment, and a channel closed at the next change of the
// pool: where a wait is on one node, without the copy of every node a snapshot makes.
func (t *nodeTracker) node(name string) (nodeState, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodes[name], t.changed
}

// drainedNodes returns the nodes of the pool with the condition Drained=True now, and a channel
// closed at the next change.
func (t *nodeTracker) drainedNodes() ([]string, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name, s := range t.nodes {
		if s.drained {
			out = append(out, name)
		}
	}
	return out, t.changed
}

// nodeOutcome is what the node tracker measured of a run.
type nodeOutcome struct {
	back    int      // nodes rebooted and back in service at the end
	allBack *float64 // when the last of them came back, once all are
	maxOut  int
	// maxCordoned is the most nodes cordoned at once; lostReady counts the nodes that went not
	// Ready while uncordoned.
	maxCordoned, lostReady int
}

func (t *nodeTracker) outcome() nodeOutcome {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := nodeOutcome{back: len(t.backT), maxOut: t.maxOut, maxCordoned: t.maxCordoned, lostReady: len(t.lostReady)}
	if len(t.backT) == len(t.nodes) {
		last := 0.0
		for _, s := range t.backT {
			last = max(last, s)
		}
		o.allBack = &last
	}
	return o
}
