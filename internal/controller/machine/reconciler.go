package machine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/few"
)

// Reconciler drains the nodes of the Cluster API Machines being deleted that carry nodemaint's
// pre-drain hook (see the package comment). Its rights are config/cluster-api's ClusterRole
// nodemaint-cluster-api, granted only where it runs.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// Reconcile implements reconcile.Reconciler for Machines.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obs, err := r.observe(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.apply(ctx, obs, Decide(obs))
}

// observe reads the Machine and its NodeMaintenance. A NodeMaintenance of that name that another
// Machine's or nobody's is not the Machine's.
func (r *Reconciler) observe(ctx context.Context, key types.NamespacedName) (Observation, error) {
	obs := Observation{Key: key}
	m := &clusterv1.Machine{}
	switch err := r.Client.Get(ctx, key, m); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return obs, err
	default:
		obs.Machine = m
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: MaintenanceName(key)}, nm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return obs, err
	case nm.Annotations[nodemaintv1alpha1.MachineAnnotation] == key.String():
		obs.Maintenance = nm
	}
	return obs, nil
}

// apply writes the decision: the NodeMaintenance created, the hook released (a patch that fails
// if the Machine changed since it was read), the NodeMaintenance deleted (if it is still the one
// read).
func (r *Reconciler) apply(ctx context.Context, obs Observation, d Decision) error {
	if d.Create != nil {
		if err := r.Client.Create(ctx, d.Create); err != nil {
			if apierrors.IsAlreadyExists(err) {
				r.Recorder.Eventf(obs.Machine, nil, corev1.EventTypeWarning, "NodeMaintenanceNameTaken", "Drain",
					"NodeMaintenance %s exists and is not this Machine's: nodemaint cannot drain its node; the pre-drain hook stays until it is deleted", d.Create.Name)
				return nil
			}
			return fmt.Errorf("creating NodeMaintenance %s: %w", d.Create.Name, err)
		}
		r.Recorder.Eventf(obs.Machine, d.Create, corev1.EventTypeNormal, "NodeMaintenanceCreated", "Drain",
			"NodeMaintenance %s drains node %s; the pre-drain hook holds the deletion until it is drained", d.Create.Name, obs.Machine.Status.NodeRef.Name)
	}
	if d.ReleaseHook {
		orig := obs.Machine.DeepCopy()
		delete(obs.Machine.Annotations, nodemaintv1alpha1.ClusterAPIPreDrainHook)
		if err := r.Client.Patch(ctx, obs.Machine, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(err)
		}
		var related runtime.Object
		if obs.Maintenance != nil {
			related = obs.Maintenance
		}
		r.Recorder.Eventf(obs.Machine, related, corev1.EventTypeNormal, "PreDrainHookReleased", "Drain", "%s",
			few.Cut("released nodemaint's pre-drain hook: "+d.Why, few.MaxEventNote))
	}
	if d.DeleteMaintenance {
		uid := obs.Maintenance.UID
		if err := r.Client.Delete(ctx, obs.Maintenance, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting NodeMaintenance %s: %w", obs.Maintenance.Name, err)
		}
	}
	return nil
}

// SetupWithManager watches Machines that carry nodemaint's hook (and their deletion), and the
// NodeMaintenances created for Machines.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	hooked := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return Hooked(e.Object.(*clusterv1.Machine)) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return Hooked(e.ObjectOld.(*clusterv1.Machine)) || Hooked(e.ObjectNew.(*clusterv1.Machine))
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return builder.ControllerManagedBy(mgr).
		Named("machine").
		For(&clusterv1.Machine{}, builder.WithPredicates(hooked)).
		Watches(&nodemaintv1alpha1.NodeMaintenance{}, handler.EnqueueRequestsFromMapFunc(machineOf)).
		Complete(r)
}

// machineOf maps a NodeMaintenance created for a Machine to the Machine.
func machineOf(_ context.Context, obj client.Object) []reconcile.Request {
	v := obj.GetAnnotations()[nodemaintv1alpha1.MachineAnnotation]
	if v == "" {
		return nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}
