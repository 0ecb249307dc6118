// Package evictionbacklog paces the drain's EvictionRequests to the Eviction controller that
// answers them in the same process: a request waits for that controller's first look (which
// creates the pod's Eviction and makes its first responder Active), and its response timeout runs
// meanwhile. A drain that created its requests faster than the controller looks at them queued
// them all at once (10,000 in scenario L, answered minutes later, past their timeout, so that the
// drain evicted the pods through their budgets while their owners were never asked); paced, each
// request is created when the controller has room for it, and its timeout measures the
// controller's look, not the queue ahead of it. Room is handed out in batches: a node refused
// room is woken once the backlog is down to half its limit, so that the node's next look creates
// many requests. Woken at each single room, every request cost a look at its node (observing its
// pods, deciding), and those looks, not the Eviction controller, paced a large drain: 7 requests a
// second in scenario L, each Deployment's surge growing by one pod at a time.
package evictionbacklog

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Backlog is the set of target pods (namespace/name) of EvictionRequests that the Eviction
// controller has not looked at since their request was created, with a limit on the drain's
// creations, and the nodes whose requests found no room, woken in turn as room comes. It is
// memory only, rebuilt from the controller's watch after a restart (Arrived); a nil Backlog
// admits every request (no Eviction controller in this process to pace to).
type Backlog struct {
	limit   int
	mu      sync.Mutex
	waiting map[types.NamespacedName]struct{}
	// queued are the nodes refused room, in the order they asked; each is in inQueue.
	queued  []string
	inQueue map[string]bool
	wake    chan event.GenericEvent
}

// wakeBuffer is how many nodes woken the channel holds before its reader takes them; beyond, a
// node stays queued until the next room.
const wakeBuffer = 1024

// New is a Backlog that admits new requests while fewer than limit targets wait; nil when limit
// is not positive.
func New(limit int) *Backlog {
	if limit <= 0 {
		return nil
	}
	return &Backlog{limit: limit, waiting: map[types.NamespacedName]struct{}{}, inQueue: map[string]bool{},
		wake: make(chan event.GenericEvent, wakeBuffer)}
}

// Admit admits the targets of the node's new requests in order while there is room, each
// counted as waiting from now, and returns how many it admitted: the caller creates the requests
// of the first n. A node refused room for some is queued: it is woken (Wake) when room comes,
// after the nodes queued before it; one admitted for all leaves the queue. A target waiting
// already takes no more room.
func (b *Backlog) Admit(node string, targets []types.NamespacedName) (n int) {
	if b == nil {
		return len(targets)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range targets {
		if _, ok := b.waiting[t]; !ok {
			if len(b.waiting) >= b.limit {
				break
			}
			b.waiting[t] = struct{}{}
		}
		n++
	}
	switch {
	case n < len(targets) && !b.inQueue[node]:
		b.queued = append(b.queued, node)
		b.inQueue[node] = true
	case n == len(targets) && b.inQueue[node]:
		// Room came before its wake: nothing left to wake it for.
		b.queued = slices.DeleteFunc(b.queued, func(q string) bool { return q == node })
		delete(b.inQueue, node)
	}
	return n
}

// Queued reports whether the node waits to be woken for room.
func (b *Backlog) Queued(node string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inQueue[node]
}

// Wake is the nodes to look at again, one each time room comes for a node refused it (a source
// of the node controller's events).
func (b *Backlog) Wake() <-chan event.GenericEvent {
	return b.wake
}

// Arrived counts a target as waiting when the Eviction controller's watch brings a request's
// creation (admitted or not: another requester's, or one created before a restart, queues a look
// too).
func (b *Backlog) Arrived(t types.NamespacedName) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting[t] = struct{}{}
}

// Done ends a target's wait: the Eviction controller looked at it, whatever the look decided or
// whether it failed (a controller that fails its looks is not paced to: the drain's timeouts
// decide, as with no controller), or the request's creation failed. Once no more than half the
// limit wait, each look wakes the first node queued, which then has room for half the limit at
// least.
func (b *Backlog) Done(t types.NamespacedName) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiting, t)
	if len(b.waiting) > b.limit/2 || len(b.queued) == 0 {
		return
	}
	// One node woken for the room.
	node := b.queued[0]
	select {
	case b.wake <- event.GenericEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}}:
		b.queued = slices.Delete(b.queued, 0, 1)
		delete(b.inQueue, node)
	default:
		// The reader is behind: the node stays first, for the next room.
	}
}

// Len is how many targets wait.
func (b *Backlog) Len() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}
