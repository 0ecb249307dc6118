// Package evictionbacklog paces the drain's EvictionRequests to the Eviction controller that
// answers them in the same process: a request waits for that controller's first look (which
// creates the pod's Eviction and makes its first responder Active), and its response timeout runs
// meanwhile. A drain that created its requests faster than the controller looks at them queued
// them all at once (10,000 in scenario L, answered minutes later, past their timeout, so that the
// drain evicted the pods through their budgets while their owners were never asked); paced, each
// request is created when the controller has room for it, and its timeout measures the
// controller's look, not the queue ahead of it.
package evictionbacklog

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Backlog is the set of target pods (namespace/name) of EvictionRequests that the Eviction
// controller has not looked at since their request was created, with a limit on the drain's
// creations. It is memory only, rebuilt from the controller's watch after a restart (Arrived); a
// nil Backlog admits every request (no Eviction controller in this process to pace to).
type Backlog struct {
	limit   int
	mu      sync.Mutex
	waiting map[types.NamespacedName]struct{}
}

// New is a Backlog that admits new requests while fewer than limit targets wait; nil when limit
// is not positive.
func New(limit int) *Backlog {
	if limit <= 0 {
		return nil
	}
	return &Backlog{limit: limit, waiting: map[types.NamespacedName]struct{}{}}
}

// Admit admits the targets of new requests in order while there is room, each counted as
// waiting from now, and returns how many it admitted: the caller creates the requests of the
// first n and leaves the others for a later look. A target waiting already takes no more room.
func (b *Backlog) Admit(targets []types.NamespacedName) (n int) {
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
	return n
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
// decide, as with no controller), or the request's creation failed.
func (b *Backlog) Done(t types.NamespacedName) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiting, t)
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
