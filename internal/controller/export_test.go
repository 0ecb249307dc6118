package controller

import (
	"context"
	"time"

	"github.com/nodemaint/nodemaint/internal/drain"
)

// NodeOfPod exposes the node controller's pod event mapping to the integration tests.
var NodeOfPod = nodeOfPod

// EvictPods exposes the node controller's evictions, with the pods read again first, to the
// integration tests.
func (r *NodeReconciler) EvictPods(ctx context.Context, pods []drain.Classified, now time.Time) (time.Duration, error) {
	return r.evictPods(ctx, pods, true, now)
}
