package main

import (
	"math"
	"time"
)

// The ideal is the shortest drain that never takes a workload below its desired Ready
// replicas further than its PodDisruptionBudget allows, on a cluster that reacts instantly
// (no API, scheduling or controller latency), with every drained node worked on in parallel:
//
//   - a Deployment surges: its n pods on the drained nodes are replaced in ceil(n/s) waves of
//     s = maxSurge replacements, each wave taking a pod's start-up time; the last old pods then
//     take their shutdown time to go. It never drops below its replicas.
//   - a StatefulSet cannot surge: its pods go in batches of u = what its budget allows at once
//     (all of them without a budget); each batch takes a shutdown and then the start-up of the
//     replacement, which the budget waits for before the next batch.
//
// The nodes are empty once the slowest workload's last pod is gone; every workload is back
// at full availability once the slowest one's last replacement is Ready.

// idealTimes returns the ideal time until the nodes are empty and until every workload is
// back at its desired replicas.
func idealTimes(ws []Workload) (empty, settled time.Duration) {
	for _, w := range ws {
		if w.Blocker {
			continue
		}
		e, s := idealWorkload(w)
		empty, settled = max(empty, e), max(settled, s)
	}
	return empty, max(settled, empty)
}

func idealWorkload(w Workload) (empty, settled time.Duration) {
	n := int(w.Replicas)
	if n == 0 {
		return 0, 0
	}
	start, stop := w.startup(), w.shutdown()
	switch w.Kind {
	case KindDeployment:
		waves := ceilDiv(n, w.maxSurge())
		return time.Duration(waves)*start + stop, time.Duration(waves) * start
	default:
		batches := ceilDiv(n, w.disruptionsAllowed())
		return time.Duration(batches-1)*(stop+start) + stop, time.Duration(batches) * (stop + start)
	}
}

// maxSurge resolves the Deployment's maxSurge (a percentage, rounded up as the Deployment
// controller does) against its replicas; at least 1.
func (w Workload) maxSurge() int {
	pct := w.MaxSurgePercent
	if pct == 0 {
		pct = 25
	}
	return max(1, int(math.Ceil(float64(w.Replicas)*float64(pct)/100)))
}

// disruptionsAllowed is how many of the workload's pods its budget lets go at once, when all
// are Ready; all of them without a budget, at least 1.
func (w Workload) disruptionsAllowed() int {
	switch {
	case w.PDBMaxUnavailable > 0:
		return w.PDBMaxUnavailable
	case w.PDBMinAvailable > 0:
		return max(1, int(w.Replicas)-w.PDBMinAvailable)
	default:
		return max(1, int(w.Replicas))
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// ratio is a measured time over its ideal, nil when either is unknown or the ideal is 0.
func ratio(measured *float64, ideal time.Duration) *float64 {
	if measured == nil || ideal <= 0 {
		return nil
	}
	r := round(*measured / ideal.Seconds())
	return &r
}
