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

func idealWorkload(w Workload) (empty, settled time.Duration) { return idealMove(w, int(w.Replicas)) }

// idealMove is the ideal time until n of the workload's pods are gone from the drained nodes
// and until their replacements are all Ready.
func idealMove(w Workload, n int) (empty, settled time.Duration) {
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
	case w.PDBMaxUnavailablePercent > 0:
		// Rounded up, as the disruption controller resolves a budget's maxUnavailable.
		return max(1, ceilDiv(int(w.Replicas)*w.PDBMaxUnavailablePercent, 100))
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

// idealRollout returns the ideal time of a rolling maintenance of a pool of targets nodes,
// atOnce of them at a time: ceil(targets/atOnce) rounds, each the ideal drain of one round's
// share of every workload's pods, then the reboot; a node is back in service as soon as it is
// up, and the next round starts at once. The share is what an even spread puts on atOnce nodes,
// as at the start: it holds when the pods a round evacuates land on nodes already done, which
// in the first rounds they cannot, so this is a lower bound. Every workload is back at its
// replicas once the last round's replacements are Ready, which for a StatefulSet (stop, then
// start) may come after the last reboot.
func idealRollout(ws []Workload, targets, atOnce int, reboot time.Duration) time.Duration {
	if targets <= 0 || atOnce <= 0 {
		return 0
	}
	atOnce = min(atOnce, targets)
	var drain, settled time.Duration
	for _, w := range ws {
		if w.Blocker {
			continue
		}
		n := min(int(w.Replicas), ceilDiv(int(w.Replicas)*atOnce, targets))
		e, s := idealMove(w, n)
		drain, settled = max(drain, e), max(settled, s)
	}
	round := drain + reboot
	return time.Duration(ceilDiv(targets, atOnce)-1)*round + max(round, settled)
}
