package main

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// StatusFigures is what a watch on a rollout's NodeMaintenance saw of its status: whether it
// stayed within its bounds (status.nodes at most MaxStatusNodes nodes and MaxStatusNodesBytes of
// JSON) and whether it was written as the turns went (status.rollout.inTurn).
type StatusFigures struct {
	// Updates counts the versions of the object whose status differed from the one before.
	Updates int `json:"updates"`
	// MaxObjectBytes is the largest object seen, in bytes of JSON (metadata and spec included);
	// MaxNodes and MaxNodesBytes the most nodes status.nodes listed and its largest JSON.
	MaxObjectBytes int `json:"maxObjectBytes"`
	MaxNodes       int `json:"maxNodes"`
	MaxNodesBytes  int `json:"maxNodesBytes"`
	// MaxNodesNotListed is the most nodes status.nodesNotListed counted: the nodes with something
	// to report that the bounds left out of status.nodes.
	MaxNodesNotListed int `json:"maxNodesNotListed"`
	// MaxInTurn is the most nodes status.rollout.inTurn listed at once.
	MaxInTurn int `json:"maxInTurn"`
	// InTurnChanges counts the updates whose inTurn named other nodes than the one before,
	// InTurnSets the distinct sets of nodes inTurn named.
	InTurnChanges int `json:"inTurnChanges"`
	InTurnSets    int `json:"inTurnSets"`
	// NodesSeenInTurn counts the nodes some update listed in inTurn: every node of the pool when
	// each turn was written; Turns is how many rounds the pool takes at maxUnavailable (the
	// least number of inTurn sets a rollout can go through).
	NodesSeenInTurn int `json:"nodesSeenInTurn"`
	Turns           int `json:"turns"`
	// MaxNodesLimit and MaxNodesBytesLimit are the bounds (the API's).
	MaxNodesLimit      int `json:"maxNodesLimit"`
	MaxNodesBytesLimit int `json:"maxNodesBytesLimit"`
}

// statusTracker is fed every version of a NodeMaintenance from a watch, and keeps the figures
// of its status. Like tracker, it does no I/O, so it is tested with synthetic objects.
type statusTracker struct {
	mu         sync.Mutex
	f          StatusFigures
	observed   bool
	lastStatus uint64
	lastInTurn string
	sets       map[uint64]bool
	seen       map[string]bool
}

func newStatusTracker(pool, atOnce int) *statusTracker {
	return &statusTracker{
		f: StatusFigures{Turns: ceilDiv(pool, max(atOnce, 1)), MaxNodesLimit: nodemaintv1alpha1.MaxStatusNodes,
			MaxNodesBytesLimit: nodemaintv1alpha1.MaxStatusNodesBytes},
		sets: map[uint64]bool{}, seen: map[string]bool{},
	}
}

// observe records one version of the NodeMaintenance.
func (t *statusTracker) observe(nm *nodemaintv1alpha1.NodeMaintenance) {
	obj, err := json.Marshal(nm)
	if err != nil {
		return
	}
	status, _ := json.Marshal(nm.Status)
	nodes, _ := json.Marshal(nm.Status.Nodes)
	var inTurn []string
	if r := nm.Status.Rollout; r != nil {
		for _, turn := range r.InTurn {
			inTurn = append(inTurn, turn.Name)
		}
	}
	slices.Sort(inTurn)
	key := strings.Join(inTurn, ",")

	t.mu.Lock()
	defer t.mu.Unlock()
	f := &t.f
	if h := hash(status); h != t.lastStatus || !t.observed {
		if t.observed {
			f.Updates++
		}
		t.lastStatus, t.observed = h, true
	}
	f.MaxObjectBytes = max(f.MaxObjectBytes, len(obj))
	f.MaxNodes = max(f.MaxNodes, len(nm.Status.Nodes))
	f.MaxNodesNotListed = max(f.MaxNodesNotListed, int(nm.Status.NodesNotListed))
	if len(nm.Status.Nodes) > 0 {
		f.MaxNodesBytes = max(f.MaxNodesBytes, len(nodes))
	}
	f.MaxInTurn = max(f.MaxInTurn, len(inTurn))
	if key != t.lastInTurn {
		t.lastInTurn = key
		f.InTurnChanges++
	}
	if len(inTurn) > 0 {
		t.sets[hash([]byte(key))] = true
	}
	for _, n := range inTurn {
		t.seen[n] = true
	}
	f.InTurnSets, f.NodesSeenInTurn = len(t.sets), len(t.seen)
}

func (t *statusTracker) figures() *StatusFigures {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.f
	return &f
}

func hash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}
