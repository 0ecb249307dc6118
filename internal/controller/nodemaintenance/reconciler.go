// Package nodemaintenance holds the NodeMaintenance controller: it keeps each NodeMaintenance's
// finalizer, status and Events (Reconciler), its rollout's turns and the preflight of a Planning
// maintenance.
package nodemaintenance

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/alerts"
	"github.com/nodemaint/nodemaint/internal/controller/nodemaintenance/nodemaintenancedecide"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/controller/preflightworker"
)

// Reconciler keeps a NodeMaintenance's finalizer, status and Events: which nodes it
// selects, how many pods are pending and evacuating on each, its phase, and the Drained condition.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Observer reads each selected node as the node reconciler observes it: the one
	// setup.Controllers builds for both. Its clock is the reconciler's.
	Observer *observe.Observer
	// Preflight: the status of a Planning maintenance says what a drain of its nodes would
	// meet (status.preflight), computed from the cache (see preflightworker.Worker).
	Preflight bool
	// StatusBatchDelay is how long pod changes are gathered before the status is written again, so
	// that thousands of pods moving do not mean thousands of status writes. It is also the least
	// time between two status writes of one NodeMaintenance: node changes and the controller's own
	// writes reach it at once, and would otherwise write the status as fast as it changes.
	StatusBatchDelay time.Duration
	// Protocol is how owners are asked to move their pods: the status says which.
	Protocol nodemaintv1alpha1.EvacuationProtocol
	// Alerts tells the firing Prometheus alerts that halt rollouts (spec.rollout.haltOnAlerts):
	// the last answer of the alert reader, which reads in the background; the rollouts that wait
	// on alerts are reconciled when it changes. Nil: no --prometheus-url, and a rollout that asks
	// for alerts halts (AlertsUnknown).
	Alerts alerts.Source
	// statusWritten holds when this replica last wrote each NodeMaintenance's status
	// (types.NamespacedName → time.Time). Memory only: after a restart the first write just
	// happens.
	statusWritten sync.Map
	// preflights computes the preflights of Planning maintenances; SetupWithManager sets it
	// when Preflight.
	preflights *preflightworker.Worker
}

// +kubebuilder:rbac:groups=nodemaint.dev,resources=nodemaintenances,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=nodemaint.dev,resources=nodemaintenances/status,verbs=get;patch
// +kubebuilder:rbac:groups=nodemaint.dev,resources=nodemaintenances/finalizers,verbs=update

// Reconcile implements reconcile.Reconciler for NodeMaintenances.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	now := r.Observer.Now()
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	if err := r.Client.Get(ctx, req.NamespacedName, nm); err != nil {
		if apierrors.IsNotFound(err) && r.preflights != nil {
			r.preflights.Forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, nm)
	}
	if !controllerutil.ContainsFinalizer(nm, nodemaintv1alpha1.Finalizer) {
		orig := nm.DeepCopy()
		controllerutil.AddFinalizer(nm, nodemaintv1alpha1.Finalizer)
		if err := r.Client.Patch(ctx, nm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return observe.Settle(err)
		}
	}

	// The status is written at most once per StatusBatchDelay. A reconcile sooner after the last
	// write (the write's own event brings one at once) would observe and decide every selected
	// node for a status it may not write yet: it looks once the next write may happen.
	if wait := r.statusWriteWait(req.NamespacedName, now); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	o, err := r.observe(ctx, nm, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	return r.apply(ctx, nm, nodemaintenancedecide.Decide(o, r.Protocol, now), now)
}

// apply writes the decision: the status, when it changed, with its Events and metrics, and the
// Event of a preflight the controller does not compute.
func (r *Reconciler) apply(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance, d nodemaintenancedecide.Decision, now time.Time) (reconcile.Result, error) {
	if d.PreflightNotComputed > 0 {
		sinkOf(r.Recorder).preflightNotComputed(nm, d.PreflightNotComputed)
	}
	result := reconcile.Result{RequeueAfter: d.RecheckAfter}
	if equality.Semantic.DeepEqual(nm.Status, d.Status) {
		return result, nil
	}
	orig := nm.DeepCopy()
	nm.Status = d.Status
	// With an optimistic lock: the turns of a rollout are decided from the status read, and a
	// write from a stale read could drop a node in its turn.
	if err := r.Client.Status().Patch(ctx, nm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return observe.Settle(err)
	}
	r.statusWritten.Store(client.ObjectKeyFromObject(nm), r.Observer.Now())
	sinkOf(r.Recorder).statusWritten(orig, nm, now)
	observeNodeDrains(orig, nm, d.Nodes, now)
	return result, nil
}

// statusWriteWait is how long the status of key must wait before it is written again: at least
// StatusBatchDelay after the last write.
func (r *Reconciler) statusWriteWait(key types.NamespacedName, now time.Time) time.Duration {
	last, ok := r.statusWritten.Load(key)
	if !ok {
		return 0
	}
	return max(0, last.(time.Time).Add(r.StatusBatchDelay).Sub(now))
}

// finalize removes the finalizer once no node advertises the maintenance any more: the node
// reconciler has then restored the nodes and withdrawn the maintenance's evacuation requests.
func (r *Reconciler) finalize(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance) (reconcile.Result, error) {
	r.statusWritten.Delete(client.ObjectKeyFromObject(nm))
	if r.preflights != nil {
		r.preflights.Forget(nm.Name)
	}
	if !controllerutil.ContainsFinalizer(nm, nodemaintv1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	nodes, err := observe.NodesAdvertising(ctx, r.Client, nm.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(nodes) > 0 {
		log.FromContext(ctx).V(1).Info("waiting for nodes to be restored", "nodes", len(nodes))
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	orig := nm.DeepCopy()
	controllerutil.RemoveFinalizer(nm, nodemaintv1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, nm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return observe.Settle(err)
	}
	return reconcile.Result{}, nil
}
