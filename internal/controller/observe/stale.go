package observe

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Stale reports whether a write failed because it was decided from a stale view of the object:
// a resourceVersion or UID precondition that no longer holds (a conflict, or 422 on a pod's
// metadata.uid written in a patch: evacuation.Stale), or the object gone.
// Both reconcilers treat such a write one way: dropped, not an error, never retried blind. The
// change that made it stale brings the next reconcile: a pod's deletion or its namesake's
// creation is a watch event of its node. A conflict on the object being reconciled (a node, a
// NodeMaintenance) is looked at again shortly (StaleRequeue), since the change behind it may be
// one its predicate filters out (a heartbeat).
func Stale(err error) bool {
	return evacuation.Stale(err)
}

// StaleRequeue is how soon an object is looked at again after a stale write.
const StaleRequeue = 100 * time.Millisecond

// Settle ends a reconcile whose write to the reconciled object failed: a stale write (see Stale)
// is looked at again shortly, any other error is the work queue's to retry.
func Settle(err error) (reconcile.Result, error) {
	if Stale(err) {
		return reconcile.Result{RequeueAfter: StaleRequeue}, nil
	}
	return reconcile.Result{}, err
}
