package controller

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
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

// policyFor returns the drain policy for the pod, its response timeout counted from its
// evacuation request or from when this replica became active, whichever is later.
func (a *activeSince) policyFor(pod *corev1.Pod, policy drain.Policy) drain.Policy {
	since := a.nanos.Load()
	if since == 0 {
		return policy
	}
	req := evacuation.Condition(pod, evacuation.Request)
	if req == nil {
		return policy
	}
	if gap := time.Unix(0, since).Sub(req.LastTransitionTime.Time); gap > 0 {
		policy.ResponseTimeout += gap
	}
	return policy
}
