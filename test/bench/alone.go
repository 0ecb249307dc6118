package main

import (
	"context"
	"log/slog"
	"time"
)

// MethodAlone is no drainer and no controller: the scenario's nodes and pods left alone for
// -alone-for, while the node tracker counts the nodes that go not Ready. kwok renews every node's
// Lease and kube-controller-manager's node lifecycle controller marks a node whose Lease it has
// not seen renewed for 40s not Ready; on a machine too small for the fleet, the control plane
// falls that far behind with no maintenance at all. Scenario F's size for this machine is the
// largest pool this method keeps every node Ready in (docs/benchmarks.md).
const MethodAlone = "alone"

// defaultAloneFor is how long MethodAlone leaves the cluster alone: longer than scenario F's goal
// (×1.5 of its ideal, 220s at every pool size: ten turns of a tenth of the pool).
const defaultAloneFor = 10 * time.Minute

// leaveAlone waits d, logging the nodes that went not Ready so far once a minute.
func leaveAlone(ctx context.Context, d time.Duration, nt *nodeTracker) error {
	slog.Info("Leaving the cluster alone", "for", d)
	end := time.After(d)
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end:
			return nil
		case <-tick.C:
			o := nt.outcome()
			slog.Info("Left alone", "nodesLostReady", o.lostReady, "mostOutAtOnce", o.maxOut)
		}
	}
}
