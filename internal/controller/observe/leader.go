package observe

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ActiveSince is when this replica started reconciling: when it became the leader. While no
// replica leads, nodemaint's own Deployment responder (in the same process) cannot answer an
// evacuation request, so the time without a leader must not count against the owner's
// evacuationResponseTimeout: otherwise a controller restarted (or a leadership lost) often
// enough evicts pods of surge-capable Deployments, taking them below their replicas, instead of
// letting them surge. The zero value never extends a timeout.
type ActiveSince struct{ nanos atomic.Int64 }

// Start records the time, by clk, at which mgr starts the leader's runnables.
func (a *ActiveSince) Start(mgr manager.Manager, clk clock.PassiveClock) error {
	return mgr.Add(manager.RunnableFunc(func(context.Context) error {
		a.nanos.Store(clk.Now().UnixNano())
		return nil
	}))
}

// Since returns when this replica became active; zero before (see drain.Policy.CountFrom).
func (a *ActiveSince) Since() time.Time {
	if since := a.nanos.Load(); since != 0 {
		return time.Unix(0, since)
	}
	return time.Time{}
}
