package machine

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/eventsink"
	"github.com/nodemaint/nodemaint/internal/controller/machine/machinedecide"
)

const (
	// DefaultPoll is how often a Machine whose node is draining is looked at again: a workload
	// cluster's NodeMaintenance is read, not watched. Cluster API's own drain looks every 20s.
	DefaultPoll = 5 * time.Second
	// refusedRetry is how often a Machine nodemaint refused is looked at again (a kubeconfig
	// Secret may appear, a node get its providerID).
	refusedRetry = time.Minute
)

// Reconciler drains the nodes of the Cluster API Machines being deleted that carry nodemaint's
// pre-drain hook (see the package comment). Its rights in the cluster of the Machines are
// config/cluster-api's ClusterRoles; in a workload cluster, those of its kubeconfig.
type Reconciler struct {
	// Client reads Machines and Clusters (cached) and patches Machines.
	Client   client.Client
	Recorder events.EventRecorder
	// Workloads reaches the Machines' workload clusters.
	Workloads *Workloads
	// Poll: see DefaultPoll; zero: DefaultPoll.
	Poll time.Duration

	// gone remembers the Cluster of each Machine deleted, until its reconcile ran: the
	// NodeMaintenance of a Machine gone is in that Cluster's workload cluster.
	gone goneMachines
	// self is this cluster's identity once read (selfUID).
	self struct {
		sync.Mutex
		uid types.UID
	}
}

// selfUID is this cluster's identity, the UID of its kube-system namespace: what the
// NodeMaintenances created for its Machines say (nodemaintv1alpha1.MachineClusterAnnotation),
// so that a nodemaint deletes only its own. It is read once: a namespace's UID does not change.
func (r *Reconciler) selfUID(ctx context.Context) (types.UID, error) {
	r.self.Lock()
	defer r.self.Unlock()
	if r.self.uid != "" {
		return r.self.uid, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("reading namespace %s, this cluster's identity: %w", metav1.NamespaceSystem, err)
	}
	r.self.uid = ns.UID
	return ns.UID, nil
}

// Reconcile implements reconcile.Reconciler for Machines.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obs, wl, err := r.observe(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := machinedecide.Decide(obs)
	if err := r.apply(ctx, obs, wl, d); err != nil {
		return reconcile.Result{}, err
	}
	if obs.Machine == nil {
		r.gone.forget(req.NamespacedName)
	}
	switch {
	case d.Refused != "":
		return reconcile.Result{RequeueAfter: refusedRetry}, nil
	case d.Wait:
		if r.Poll > 0 {
			return reconcile.Result{RequeueAfter: r.Poll}, nil
		}
		return reconcile.Result{RequeueAfter: DefaultPoll}, nil
	}
	return reconcile.Result{}, nil
}

// observe reads the Machine and its Cluster and, for a Machine whose node nodemaint may drain,
// its node and NodeMaintenance in its workload cluster. A NodeMaintenance of that name that is
// another Machine's or nobody's is not the Machine's.
func (r *Reconciler) observe(ctx context.Context, key types.NamespacedName) (machinedecide.Observation, Workload, error) {
	self, err := r.selfUID(ctx)
	if err != nil {
		return machinedecide.Observation{Key: key}, Workload{}, err
	}
	obs := machinedecide.Observation{Key: key, Self: self}
	m := &clusterv1.Machine{}
	switch err := r.Client.Get(ctx, key, m); {
	case apierrors.IsNotFound(err):
		return r.observeGone(ctx, obs)
	case err != nil:
		return obs, Workload{}, err
	}
	obs.Machine = m
	c := &clusterv1.Cluster{}
	switch err := r.Client.Get(ctx, clusterOf(m), c); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return obs, Workload{}, err
	default:
		obs.Cluster = c
	}
	if m.DeletionTimestamp == nil || !machinedecide.Hooked(m) || !machinedecide.Applies(m, obs.Cluster) || m.Status.NodeRef.Name == "" {
		return obs, Workload{}, nil
	}
	wl, err := r.Workloads.Get(ctx, clusterOf(m))
	if why := Unreachable(err); why != "" {
		obs.Unreachable = why
		return obs, wl, nil
	}
	if err != nil {
		return obs, wl, err
	}
	node := &corev1.Node{}
	switch err := wl.Client.Get(ctx, types.NamespacedName{Name: m.Status.NodeRef.Name}, node); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return obs, wl, fmt.Errorf("reading node %s of Cluster %s: %w", m.Status.NodeRef.Name, clusterOf(m), err)
	default:
		obs.Node = node
	}
	obs.Maintenance, err = maintenanceOf(ctx, wl.Client, key)
	return obs, wl, err
}

// observeGone reads the NodeMaintenance of a Machine gone: in the workload cluster of the Cluster
// it had when its deletion was seen, else in this cluster (where it may be another cluster's
// Machine's: Decide deletes only this cluster's, Own).
func (r *Reconciler) observeGone(ctx context.Context, obs machinedecide.Observation) (machinedecide.Observation, Workload, error) {
	key := obs.Key
	wl := Workload{Client: r.Client, Local: true}
	if cluster, ok := r.gone.get(key); ok {
		w, err := r.Workloads.Get(ctx, cluster)
		switch {
		case Unreachable(err) != "":
			// Its Cluster went with it: so did the node the maintenance belonged to.
			return obs, wl, nil
		case err != nil:
			return obs, wl, err
		}
		wl = w
	}
	var err error
	obs.Maintenance, err = maintenanceOf(ctx, wl.Client, key)
	return obs, wl, err
}

// maintenanceOf reads the Machine's NodeMaintenance with c: nil when there is none, or it is
// not the Machine's.
func maintenanceOf(ctx context.Context, c client.Reader, key types.NamespacedName) (*nodemaintv1alpha1.NodeMaintenance, error) {
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	switch err := c.Get(ctx, types.NamespacedName{Name: machinedecide.MaintenanceName(key)}, nm); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading NodeMaintenance %s: %w", machinedecide.MaintenanceName(key), err)
	case nm.Annotations[nodemaintv1alpha1.MachineAnnotation] == key.String():
		return nm, nil
	}
	return nil, nil
}

// clusterOf is the key of the Machine's Cluster.
func clusterOf(m *clusterv1.Machine) types.NamespacedName {
	return types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName}
}

// apply writes the decision: the refusal said, the NodeMaintenance created in the workload
// cluster, the hook released (a patch that fails if the Machine changed since it was read), the
// NodeMaintenance deleted (if it is still the one read).
func (r *Reconciler) apply(ctx context.Context, obs machinedecide.Observation, wl Workload, d machinedecide.Decision) error {
	m := obs.Machine
	if d.Refused != "" {
		eventsink.Sink{EventRecorder: r.Recorder}.Warning(m, nil, d.Refused, "Drain", d.Why)
	}
	if d.Create != nil {
		where := ""
		if !wl.Local {
			where = " of the workload cluster of Cluster " + clusterOf(m).String()
		}
		if err := wl.Client.Create(ctx, d.Create); err != nil {
			if apierrors.IsAlreadyExists(err) {
				r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, "NodeMaintenanceNameTaken", "Drain",
					"NodeMaintenance %s%s exists and is not this Machine's: nodemaint cannot drain its node; the pre-drain hook stays until it is deleted", d.Create.Name, where)
				return nil
			}
			return fmt.Errorf("creating NodeMaintenance %s%s: %w", d.Create.Name, where, err)
		}
		var related runtime.Object
		if wl.Local {
			related = d.Create
		}
		r.Recorder.Eventf(m, related, corev1.EventTypeNormal, "NodeMaintenanceCreated", "Drain",
			"NodeMaintenance %s%s drains node %s; the pre-drain hook holds the deletion until it is drained", d.Create.Name, where, m.Status.NodeRef.Name)
		if d.Clamped {
			r.Recorder.Eventf(m, related, corev1.EventTypeNormal, "DrainTimeoutClamped", "Drain",
				"spec.deletion.nodeDrainTimeoutSeconds %d is beyond a NodeMaintenance's drainTimeout: NodeMaintenance %s reports DrainTimedOut after %v, then releases the hook",
				*m.Spec.Deletion.NodeDrainTimeoutSeconds, d.Create.Name, d.Create.Spec.DrainTimeout.Duration)
		}
	}
	if d.ReleaseHook {
		orig := m.DeepCopy()
		delete(m.Annotations, nodemaintv1alpha1.ClusterAPIPreDrainHook)
		if err := r.Client.Patch(ctx, m, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(err)
		}
		var related runtime.Object
		if obs.Maintenance != nil && wl.Local {
			related = obs.Maintenance
		}
		eventsink.Sink{EventRecorder: r.Recorder}.Normal(m, related, "PreDrainHookReleased", "Drain", "released nodemaint's pre-drain hook: "+d.Why)
	}
	if d.DeleteMaintenance {
		uid := obs.Maintenance.UID
		if err := wl.Client.Delete(ctx, obs.Maintenance, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting NodeMaintenance %s: %w", obs.Maintenance.Name, err)
		}
	}
	return nil
}

// SetupWithManager watches Machines that carry nodemaint's hook (and their deletion), the
// NodeMaintenances created for Machines in this cluster, and Clusters, whose workload clients
// are forgotten when they go.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(q queue, obj client.Object) {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	}
	machines := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			if m, ok := e.Object.(*clusterv1.Machine); ok && machinedecide.Hooked(m) {
				add(q, m)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			old, ok1 := e.ObjectOld.(*clusterv1.Machine)
			m, ok2 := e.ObjectNew.(*clusterv1.Machine)
			if ok1 && ok2 && (machinedecide.Hooked(old) || machinedecide.Hooked(m)) {
				add(q, m)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			if m, ok := e.Object.(*clusterv1.Machine); ok && m.Spec.ClusterName != "" {
				r.gone.remember(client.ObjectKeyFromObject(m), clusterOf(m))
			}
			add(q, e.Object)
		},
	}
	// A Cluster seen (created, unpaused) brings its hooked Machines, which may have been looked at
	// before it was; one going drops its workload client.
	clusters := handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			r.enqueueMachinesOf(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			if e.ObjectNew.GetDeletionTimestamp() != nil {
				r.Workloads.Forget(client.ObjectKeyFromObject(e.ObjectNew))
				return
			}
			r.enqueueMachinesOf(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ queue) {
			r.Workloads.Forget(client.ObjectKeyFromObject(e.Object))
		},
	}
	found := make(chan event.GenericEvent)
	if err := r.setupLeftovers(mgr, found); err != nil {
		return err
	}
	return builder.ControllerManagedBy(mgr).
		Named("machine").
		Watches(&clusterv1.Machine{}, machines).
		Watches(&clusterv1.Cluster{}, clusters).
		Watches(&nodemaintv1alpha1.NodeMaintenance{}, handler.EnqueueRequestsFromMapFunc(machineOf)).
		WatchesRawSource(source.Channel(found, handler.EnqueueRequestsFromMapFunc(machineOf))).
		Complete(r)
}

// enqueueMachinesOf adds the Machines of the Cluster that carry nodemaint's hook and are being
// deleted, from the cache.
func (r *Reconciler) enqueueMachinesOf(ctx context.Context, cluster client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	var list clusterv1.MachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(cluster.GetNamespace())); err != nil {
		return
	}
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.ClusterName == cluster.GetName() && m.DeletionTimestamp != nil && machinedecide.Hooked(m) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
		}
	}
}

// machineOf maps a NodeMaintenance created for a Machine to the Machine.
func machineOf(_ context.Context, obj client.Object) []reconcile.Request {
	key, ok := machinedecide.MachineOf(obj)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// goneMachines maps deleted Machines to their Clusters.
type goneMachines struct {
	mu sync.Mutex
	m  map[types.NamespacedName]types.NamespacedName
}

func (g *goneMachines) remember(machine, cluster types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[types.NamespacedName]types.NamespacedName{}
	}
	g.m[machine] = cluster
}

func (g *goneMachines) get(machine types.NamespacedName) (types.NamespacedName, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.m[machine]
	return c, ok
}

func (g *goneMachines) forget(machine types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, machine)
}
