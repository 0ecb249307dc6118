package observe

import (
	corev1 "k8s.io/api/core/v1"

	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/pkg/evacuation"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// The filters of the cache's events that may change a node's decision, which both controllers
// watch through.

// NodeChanged passes node events that may change what the node reconciler does: not the kubelet's
// heartbeats.
func NodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		// What a node's decision is made from (nodeBasis): a report decided from the old node
		// holds for the new one exactly when this passes nothing.
		return !basisOfNode(e.ObjectOld.(*corev1.Node)).equal(basisOfNode(e.ObjectNew.(*corev1.Node)))
	}}
}

// MaintenanceCondition is the node's UnderMaintenance condition, nil without one.
func MaintenanceCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == nodemaintv1alpha1.NodeConditionUnderMaintenance {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// PodChanged passes pod events that change the node's pods as the maintenance sees them.
func PodChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
		return o.Spec.NodeName != n.Spec.NodeName ||
			!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			maintenance.Targeted(o) != maintenance.Targeted(n) ||
			!o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
			!equality.Semantic.DeepEqual(evacuation.Condition(o, evacuation.Request), evacuation.Condition(n, evacuation.Request)) ||
			!equality.Semantic.DeepEqual(evacuation.Condition(o, evacuation.Initiated), evacuation.Condition(n, evacuation.Initiated))
	}}
}

// DelayedMapHandler enqueues the mapped requests after delay. The work queue keeps one entry per
// request, so every event within the delay is served by one reconcile.
func DelayedMapHandler(delay time.Duration, fn handler.MapFunc) handler.EventHandler {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range fn(ctx, o) {
			q.AddAfter(req, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}
