// Package ownwrites remembers the controller's own writes of objects until its informer cache
// shows them, so that a decision taken in between starts from what was written, not from the
// version before it.
//
// The controllers decide from the cache (level-based), and a reconcile often follows a write of
// the same controller by milliseconds: a pod event of one pod of a node wakes the node's
// reconcile while the cache has not yet seen the requests written to the node's other pods in
// the same batch. Decided from that cache, the requests are written again: a second write of the
// same content, which the API server serves and sends to every watcher of pods. Controllers of
// kube-controller-manager solve the same with expectations (counts of creations and deletions
// to see) and client-go with a mutation cache (comparing resourceVersions as integers, which
// the API conventions ask clients not to); this is the first without counts and the second
// without ordering: a cached object is stale exactly when its resourceVersion is one the
// controller itself wrote over.
package ownwrites

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// forget is how long a write is remembered at most: the cache shows a write within
// milliseconds to seconds; a write it never shows (the object was deleted) goes after this.
const forget = time.Minute

// Writes remembers the writes of objects of one kind, by UID. The zero value is not usable;
// a nil *Writes remembers nothing (Fresh returns what it is given).
type Writes[T client.Object] struct {
	mu      sync.Mutex
	entries map[types.UID]entry[T]
	now     func() time.Time
	// keep trims a written object to what the cache keeps of it (see New).
	keep func(T)
}

type entry[T client.Object] struct {
	// overwritten are the resourceVersions the controller wrote over: a cached object at one
	// of them does not show the last write yet.
	overwritten map[string]bool
	// written is the object as the API server returned it from the last write.
	written T
	at      time.Time
}

// New returns an empty record of writes. keep trims each written object to what the informer
// cache keeps of it (the cache's transform, e.g. cachetrim.Pod), so that what Fresh returns is
// what the cache would: nil keeps the whole object.
func New[T client.Object](keep func(T)) *Writes[T] {
	return &Writes[T]{entries: map[types.UID]entry[T]{}, now: time.Now, keep: keep}
}

// Wrote records a write: before is the resourceVersion the write was computed from (the
// cached object's), written the object the API server returned, which Wrote trims (see New)
// and which must not be used afterwards.
func (w *Writes[T]) Wrote(before string, written T) {
	if w == nil || before == "" || written.GetResourceVersion() == before {
		return
	}
	if w.keep != nil {
		w.keep(written)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	w.expire(now)
	e, ok := w.entries[written.GetUID()]
	if !ok || e.written.GetResourceVersion() != before {
		// The write was not computed from the last one recorded: those versions are history.
		e = entry[T]{overwritten: map[string]bool{}}
	}
	e.overwritten[before] = true
	e.written, e.at = written, now
	w.entries[written.GetUID()] = e
}

// Fresh returns the object as last written by the controller when cached is a version it
// wrote over (the cache has not shown the write yet), else cached, and then forgets the write.
func (w *Writes[T]) Fresh(cached T) T {
	if w == nil {
		return cached
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.entries[cached.GetUID()]
	switch {
	case !ok:
		return cached
	case e.overwritten[cached.GetResourceVersion()] && w.now().Sub(e.at) < forget:
		return e.written
	}
	delete(w.entries, cached.GetUID())
	return cached
}

// Forget drops what is remembered of the object (it was deleted).
func (w *Writes[T]) Forget(uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.entries, uid)
}

// Len is the number of writes not yet seen in the cache.
func (w *Writes[T]) Len() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

func (w *Writes[T]) expire(now time.Time) {
	for uid, e := range w.entries {
		if now.Sub(e.at) >= forget {
			delete(w.entries, uid)
		}
	}
}

// Recent remembers writes that a cache shows late, by UID (an object deleted, or one created for a
// pod), for as long as the cache may not show them yet (at most a minute), so that a decision
// taken from a cache that has not seen a deletion or a creation yet does not send it again. The
// zero value is not usable; a nil *Recent remembers nothing.
type Recent struct {
	mu      sync.Mutex
	entries map[types.UID]time.Time
	now     func() time.Time
}

// NewRecent returns an empty record.
func NewRecent() *Recent {
	return &Recent{entries: map[types.UID]time.Time{}, now: time.Now}
}

// Sent records that the write of uid was sent and accepted (or found done already).
func (d *Recent) Sent(uid types.UID) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for u, at := range d.entries {
		if now.Sub(at) >= forget {
			delete(d.entries, u)
		}
	}
	d.entries[uid] = now
}

// Forget drops what is remembered of uid (a creation undone by a deletion).
func (d *Recent) Forget(uid types.UID) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.entries, uid)
}

// Recently reports whether the write of uid was sent within the last minute.
func (d *Recent) Recently(uid types.UID) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.entries[uid]
	return ok && d.now().Sub(at) < forget
}

// Conflicts remembers, by UID, the version of each object at which a write of the controller
// was refused as stale (409 Conflict on its resourceVersion precondition): the API server has
// a later version, and while the cache still shows this one, every write decided from it is
// refused the same way. A loaded API server's watch can show a pod's changes a minute or more
// late (10,000 pods on 2 cores); a node looked at again meanwhile would send each refused
// write again at every look. The zero value is not usable; a nil *Conflicts remembers nothing.
type Conflicts struct {
	mu      sync.Mutex
	entries map[types.UID]conflict
	now     func() time.Time
}

type conflict struct {
	version string
	at      time.Time
}

// NewConflicts returns an empty record.
func NewConflicts() *Conflicts {
	return &Conflicts{entries: map[types.UID]conflict{}, now: time.Now}
}

// Met records that a write decided from obj, as the cache showed it, was refused as stale.
func (c *Conflicts) Met(obj client.Object) {
	if c == nil || obj.GetResourceVersion() == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for uid, e := range c.entries {
		if now.Sub(e.at) >= forget {
			delete(c.entries, uid)
		}
	}
	c.entries[obj.GetUID()] = conflict{version: obj.GetResourceVersion(), at: now}
}

// Behind reports whether cached is the version of the object a write was refused at (within
// forget): the cache has not shown the API server's later one yet, and a write decided from it
// would be refused again. Any other version ends the record.
func (c *Conflicts) Behind(cached client.Object) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[cached.GetUID()]
	switch {
	case !ok:
		return false
	case e.version == cached.GetResourceVersion() && c.now().Sub(e.at) < forget:
		return true
	}
	delete(c.entries, cached.GetUID())
	return false
}

// Len is the number of objects remembered behind.
func (c *Conflicts) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
