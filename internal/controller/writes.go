package controller

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// stale reports whether a write failed because it was decided from a stale view of the object:
// a resourceVersion or UID precondition that no longer holds (a conflict, or 422 on a pod's
// metadata.uid written in a patch: evacuation.Stale), or the object gone.
// Both reconcilers treat such a write one way: dropped, not an error, never retried blind. The
// change that made it stale brings the next reconcile: a pod's deletion or its namesake's
// creation is a watch event of its node. A conflict on the object being reconciled (a node, a
// NodeMaintenance) is looked at again shortly (staleRequeue), since the change behind it may be
// one its predicate filters out (a heartbeat).
func stale(err error) bool {
	return evacuation.Stale(err)
}

// staleRequeue is how soon an object is looked at again after a stale write.
const staleRequeue = 100 * time.Millisecond

// settle ends a reconcile whose write to the reconciled object failed: a stale write (see stale)
// is looked at again shortly, any other error is the work queue's to retry.
func settle(err error) (reconcile.Result, error) {
	if stale(err) {
		return reconcile.Result{RequeueAfter: staleRequeue}, nil
	}
	return reconcile.Result{}, err
}

// sooner is when to look again (next; zero: not by itself) after pod writes of which some were
// refused as stale (refused): within staleRequeue then, since the change that made them stale
// may be one no watch of the node's reconciler lets through (a kubelet's status report).
func sooner(next time.Duration, refused bool) time.Duration {
	if refused && (next == 0 || next > staleRequeue) {
		return staleRequeue
	}
	return next
}
