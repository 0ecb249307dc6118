// Package recheck is when a reconciler looks again by itself: the soonest of the waits its
// decision found, a zero or negative wait being none (reconcile.Result's RequeueAfter: 0 is not
// by itself).
package recheck

import "time"

// Soonest is the shortest of the positive waits; 0 when none is positive.
func Soonest(waits ...time.Duration) time.Duration {
	var soonest time.Duration
	for _, w := range waits {
		if w > 0 && (soonest == 0 || w < soonest) {
			soonest = w
		}
	}
	return soonest
}
