package controller

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// stale reports whether a write failed because it was decided from a stale view of the object:
// a resourceVersion or UID precondition that no longer holds (a conflict), or the object gone.
// Both reconcilers treat such a write one way: dropped, not an error, never retried blind. The
// change that made it stale brings the next reconcile: a pod's deletion or its namesake's
// creation is a watch event of its node. A conflict on the object being reconciled (a node, a
// NodeMaintenance) is looked at again shortly (staleRequeue), since the change behind it may be
// one its predicate filters out (a heartbeat).
func stale(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
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
