package controller

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// writes is how a batch of writes ended: how many were done, and whether any was decided from
// a stale cache.
type writes struct {
	done  int
	stale bool
}

func (w *writes) add(o writes) {
	w.done += o.done
	w.stale = w.stale || o.stale
}

// stale reports whether a write failed because it was decided from a stale view of the object:
// a resourceVersion or UID precondition that no longer holds (a conflict), or the object gone.
// Both reconcilers treat such a write one way: dropped, not an error, and the object looked at
// again shortly (staleRequeue) from the cache, which by then has caught up.
func stale(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}

// staleRequeue is how soon an object is looked at again after a stale write.
const staleRequeue = 100 * time.Millisecond

// result asks to look again after next, or sooner after a stale write.
func result(next time.Duration, stale bool) reconcile.Result {
	if stale && (next == 0 || staleRequeue < next) {
		next = staleRequeue
	}
	return reconcile.Result{RequeueAfter: next}
}
