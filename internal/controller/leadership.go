package controller

import (
	"context"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// activeSince is when this replica started reconciling: when it became the leader. While no
// replica leads, nodemaint's own Deployment responder (in the same process) cannot answer an
// evacuation request, so the time without a leader must not count against the owner's
// evacuationResponseTimeout: otherwise a controller restarted (or a leadership lost) often
// enough evicts pods of surge-capable Deployments, taking them below their replicas, instead of
// letting them surge. The zero value never extends a timeout.
type activeSince struct{ nanos atomic.Int64 }

// start records the time at which mgr starts the leader's runnables.
func (a *activeSince) start(mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(func(context.Context) error {
		a.nanos.Store(time.Now().UnixNano())
		return nil
	}))
}

// since returns when this replica became active; zero before (see drain.Policy.CountFrom).
func (a *activeSince) since() time.Time {
	if since := a.nanos.Load(); since != 0 {
		return time.Unix(0, since)
	}
	return time.Time{}
}
