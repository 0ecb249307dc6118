package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodemaint/nodemaint/internal/drain"
)

// NodeOfPod exposes the node controller's pod event mapping to the integration tests.
var NodeOfPod = nodeOfPod

// EvictPods exposes the node controller's evictions, with the pods read again first, to the
// integration tests.
func (r *NodeReconciler) EvictPods(ctx context.Context, pods []drain.Classified, now time.Time) (time.Duration, error) {
	wait, _, err := r.evictPods(ctx, pods, true, now)
	return wait, err
}

// PatchPods exposes the node controller's writes of evacuation requests (reason not nil) and
// their withdrawals (nil) to the integration tests, which drive them with stale pods.
func (r *NodeReconciler) PatchPods(ctx context.Context, pods []*corev1.Pod, reason *string, now time.Time) (bool, error) {
	return r.patchPods(ctx, pods, reason, now)
}

// PreflightCounts says how many snapshots of the cluster the preflights made, and how many
// preflights they computed.
func (r *NodeMaintenanceReconciler) PreflightCounts() (made, ran int) {
	r.preflights.mu.Lock()
	defer r.preflights.mu.Unlock()
	return r.preflights.made, r.preflights.ran
}
