package nodemaintenance

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/alerts"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/controller/preflightworker"
	"github.com/nodemaint/nodemaint/internal/fairqueue"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// maintenancesOfNode maps a node to the NodeMaintenances that select it or that it advertises.
func maintenancesOfNode(ctx context.Context, o *observe.Observer, node *corev1.Node) []reconcile.Request {
	nms, err := o.MaintenancesSelecting(ctx, node)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing NodeMaintenances")
	}
	seen := map[string]bool{}
	var reqs []reconcile.Request
	for _, nm := range nms {
		seen[nm.Name] = true
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nm.Name}})
	}
	for _, e := range maintenance.NodeEntries(node) {
		if !seen[e.Name] {
			seen[e.Name] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: e.Name}})
		}
	}
	return reqs
}

// SetupWithManager registers the NodeMaintenance controller. Node changes reach it at once; the
// node controller's changed reports (what its pods' changes come to) are batched by
// StatusBatchDelay, and so are the changes of the pods the scheduler cannot place, which halt
// rollouts.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, concurrency int) error {
	if err := r.start(mgr); err != nil {
		return err
	}
	c := mgr.GetClient()
	statusMetrics.setSource(c, r.Observer.Active)
	return r.optionalWatches(builder.ControllerManagedBy(mgr), c).
		Named("nodemaintenance").
		For(&nodemaintv1alpha1.NodeMaintenance{}).
		Watches(&corev1.Node{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return maintenancesOfNode(ctx, r.Observer, o.(*corev1.Node))
			}),
			builder.WithPredicates(observe.NodeChanged())).
		// The node controller's reports, which the statuses are made of, changed: for its pods'
		// changes, their answers, and its maintenances'.
		WatchesRawSource(r.Observer.Reports.Source(r.StatusBatchDelay)).
		Watches(&corev1.Pod{},
			observe.DelayedMapHandler(r.StatusBatchDelay, func(ctx context.Context, _ client.Object) []reconcile.Request {
				return rollingMaintenances(ctx, c)
			}),
			builder.WithPredicates(placementChanged())).
		WithOptions(fairqueue.Options(concurrency)).
		Complete(r)
}

// start makes what the reconciler reads besides its cache and its Observer: the watchers of the
// protocol's answers, and the preflight worker when preflights are on.
func (r *Reconciler) start(mgr manager.Manager) error {
	var err error
	if err := watchAnswers(mgr); err != nil {
		return err
	}
	if r.Protocol == nodemaintv1alpha1.EvacuationProtocolEvictionRequest {
		if err := watchEvictionAnswers(mgr); err != nil {
			return err
		}
	}
	if r.Preflight {
		if r.preflights, err = preflightworker.New(context.Background(), mgr); err != nil {
			return err
		}
		if err := mgr.Add(r.preflights); err != nil {
			return err
		}
	}
	return nil
}

// optionalWatches adds the watches of what is configured: computed preflights, the permission
// to delete pods and the alert reader's answers.
func (r *Reconciler) optionalWatches(b *builder.Builder, c client.Client) *builder.Builder {
	if r.preflights != nil {
		// A preflight computed: its maintenance's status says it.
		b = b.WatchesRawSource(source.Channel(r.preflights.Ready(), &handler.EnqueueRequestForObject{}))
	}
	if r.Observer.PodDeletion != nil {
		// Granted or revoked, the permission to delete pods is in the status of each maintenance
		// with drainTimeoutAction Delete.
		b = b.WatchesRawSource(source.Channel(r.Observer.PodDeletion.Changes(), handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return deletingMaintenances(ctx, c)
		})))
	}
	if r.Alerts != nil {
		// The alert reader's answer changed: the rollouts that wait on alerts decide again.
		b = b.WatchesRawSource(source.Channel(r.Alerts.Changed(), handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ alerts.Answer) []reconcile.Request {
			return alertGatedMaintenances(ctx, c)
		})))
	}
	return b
}

// placementChanged passes the events of pods the scheduler cannot place: one became unschedulable,
// was placed at last, or went. They are on no node, so the node-based mapping never sees them, yet
// they halt rollouts, which must resume once they are gone even when nothing else changes (a rollout
// that only cordons has no drain whose status is refreshed).
func placementChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return awaitingPlacement(e.Object.(*corev1.Pod)) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return observe.Unschedulable(e.ObjectOld.(*corev1.Pod)) != observe.Unschedulable(e.ObjectNew.(*corev1.Pod))
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { return awaitingPlacement(e.Object.(*corev1.Pod)) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// awaitingPlacement: the pod is not bound and the scheduler found no node for it, deleted or not.
func awaitingPlacement(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// alertGatedMaintenances lists the NodeMaintenances whose rollout waits on alerts
// (spec.rollout.haltOnAlerts) and may still start a node.
func alertGatedMaintenances(ctx context.Context, c client.Reader) []reconcile.Request {
	return maintenancesWhere(ctx, c, func(nm *nodemaintv1alpha1.NodeMaintenance) bool {
		return rolling(nm) && nm.Spec.Rollout.HaltOnAlerts != nil
	})
}

// rollingMaintenances lists the NodeMaintenances whose rollout may start or halt on a pod the
// scheduler cannot place.
func rollingMaintenances(ctx context.Context, c client.Reader) []reconcile.Request {
	return maintenancesWhere(ctx, c, rolling)
}

// rolling: the maintenance has spec.rollout, cordons or drains and is not complete.
func rolling(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return nm.Spec.Rollout != nil && (nm.Spec.Cordon || nm.Spec.Drain) && nm.DeletionTimestamp.IsZero() &&
		nm.Status.Phase != nodemaintv1alpha1.PhaseMaintenanceComplete
}

// maintenancesWhere lists the NodeMaintenances the filter passes.
func maintenancesWhere(ctx context.Context, c client.Reader, filter func(*nodemaintv1alpha1.NodeMaintenance) bool) []reconcile.Request {
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := c.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeMaintenances")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if nm := &list.Items[i]; filter(nm) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nm.Name}})
		}
	}
	return reqs
}

// deletingMaintenances maps to every NodeMaintenance with drainTimeoutAction Delete.
func deletingMaintenances(ctx context.Context, c client.Reader) []reconcile.Request {
	var nms nodemaintv1alpha1.NodeMaintenanceList
	if err := c.List(ctx, &nms, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeMaintenances")
		return nil
	}
	var reqs []reconcile.Request
	for i := range nms.Items {
		if nms.Items[i].Spec.DrainTimeoutAction == nodemaintv1alpha1.DrainTimeoutActionDelete {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nms.Items[i])})
		}
	}
	return reqs
}
