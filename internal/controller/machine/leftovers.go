package machine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/machine/machinedecide"
)

// leftovers finds, for each Cluster it sees created (so every Cluster when the manager starts),
// the NodeMaintenances in the Cluster's workload cluster of this cluster's Machines that are
// gone, and hands each Machine to the Machine controller with its Cluster, which deletes the
// NodeMaintenance as for any Machine seen going. The Cluster of a Machine gone is remembered
// only in memory (Reconciler.gone): a Machine that went while no nodemaint ran would otherwise
// leave its NodeMaintenance, and the node cordoned, until its node went.
type leftovers struct {
	r *Reconciler
	// found sends each Machine gone, as its NodeMaintenance, to the Machine controller.
	found chan<- event.GenericEvent
}

// setupLeftovers adds the leftovers controller, sending to found.
func (r *Reconciler) setupLeftovers(mgr manager.Manager, found chan<- event.GenericEvent) error {
	return builder.ControllerManagedBy(mgr).
		Named("machine-leftovers").
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(&leftovers{r: r, found: found})
}

// Reconcile implements reconcile.Reconciler for Clusters: observe the Cluster's workload
// cluster's NodeMaintenances of Machines of its namespace and those Machines, decide which
// Machines are gone (Leftovers), hand them over.
func (l *leftovers) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &clusterv1.Cluster{}
	if err := l.r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	self, err := l.r.selfUID(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	wl, err := l.r.Workloads.Get(ctx, req.NamespacedName)
	if Unreachable(err) != "" {
		// Looked at again: a kubeconfig Secret may appear, a workload cluster come back.
		return reconcile.Result{RequeueAfter: refusedRetry}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	var nms nodemaintv1alpha1.NodeMaintenanceList
	if err := wl.Client.List(ctx, &nms, client.MatchingLabels{nodemaintv1alpha1.MachineNamespaceLabel: c.Namespace}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the NodeMaintenances of Machines of namespace %s in the workload cluster of Cluster %s: %w", c.Namespace, req.NamespacedName, err)
	}
	var machines clusterv1.MachineList
	if err := l.r.Client.List(ctx, &machines, client.InNamespace(c.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	exists := make(map[types.NamespacedName]bool, len(machines.Items))
	for i := range machines.Items {
		exists[client.ObjectKeyFromObject(&machines.Items[i])] = true
	}
	for _, nm := range machinedecide.Leftovers(nms.Items, c.Namespace, self, exists) {
		key, _ := machinedecide.MachineOf(nm)
		l.r.gone.remember(key, req.NamespacedName)
		select {
		case l.found <- event.GenericEvent{Object: nm}:
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		}
	}
	return reconcile.Result{}, nil
}
