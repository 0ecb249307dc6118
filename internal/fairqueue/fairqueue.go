// Package fairqueue holds the work queue options of nodemaint's controllers.
package fairqueue

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// Options returns the options of a controller that runs concurrency reconciles at once over a
// first-in, first-out queue, where every key waits its turn.
//
// controller-runtime's default priority queue puts the objects of its initial list, and their
// requeues, behind every object an event added since. The nodes being drained get events all the
// time (their pods change), so with the workers busy the other nodes of a large maintenance
// starve: most of its nodes would not be reconciled, not even cordoned, for minutes, and again
// after every restart of the controller in the middle of a maintenance.
func Options(concurrency int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: concurrency, UsePriorityQueue: ptr.To(false)}
}
