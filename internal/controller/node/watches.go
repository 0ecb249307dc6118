package node

import (
	"context"
	"time"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/controller/protocol"
	"github.com/nodemaint/nodemaint/internal/fairqueue"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// nodeOfPod maps a pod event to the pod's node when the node has to do with a maintenance: a
// NodeMaintenance selects it, it still carries something nodemaint set, or the pod has
// nodemaint's evacuation request. The pods of every other node come and go without a reconcile:
// while a large maintenance moves thousands of pods onto the rest of the cluster, their events
// would queue every node of the cluster ahead of the nodes being drained. A node that becomes selected is reconciled through
// its own event or its NodeMaintenance's.
func nodeOfPod(ctx context.Context, o *observe.Observer, pod *corev1.Pod) []reconcile.Request {
	if pod.Spec.NodeName == "" {
		return nil
	}
	req := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pod.Spec.NodeName}}}
	if evacuation.RequestedBy(pod, evacuation.ReasonNodeMaintenance) {
		return req
	}
	node := &corev1.Node{}
	if err := o.Client.Get(ctx, req[0].NamespacedName, node, client.UnsafeDisableDeepCopy); err != nil { // read only
		// Not in the cache (yet): the reconcile finds out.
		return req
	}
	if carriesMaintenanceState(node) {
		return req
	}
	nms, err := o.MaintenancesSelecting(ctx, node)
	if err != nil || len(nms) > 0 {
		return req
	}
	return nil
}

// carriesMaintenanceState reports whether the node has anything the node reconciler set and
// would have to keep or remove.
func carriesMaintenanceState(node *corev1.Node) bool {
	for _, key := range []string{nodemaintv1alpha1.MaintenancesAnnotation, nodemaintv1alpha1.CordonedAnnotation, nodemaintv1alpha1.OutOfServiceAnnotation} {
		if node.Annotations[key] != "" {
			return true
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == nodemaintv1alpha1.PlannedMaintenanceTaint {
			return true
		}
	}
	return observe.MaintenanceCondition(node) != nil
}

// nodesUnderMaintenance maps to every node that advertises a maintenance: a DrainRule changes
// how they are drained.
func nodesUnderMaintenance(ctx context.Context, c client.Reader) []reconcile.Request {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		log.FromContext(ctx).Error(err, "listing nodes")
		return nil
	}
	var reqs []reconcile.Request
	for _, n := range nodes.Items {
		if n.Annotations[nodemaintv1alpha1.MaintenancesAnnotation] != "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
		}
	}
	return reqs
}

// nodesOfMaintenance maps a NodeMaintenance to the nodes it selects and the nodes that still
// advertise it (it may have stopped selecting them).
func nodesOfMaintenance(ctx context.Context, o *observe.Observer, nm *nodemaintv1alpha1.NodeMaintenance) []reconcile.Request {
	seen := map[string]bool{}
	var reqs []reconcile.Request
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	nodes, _, _ := o.SelectedNodes(nm)
	for _, n := range nodes {
		add(n.Name)
	}
	advertising, err := observe.NodesAdvertising(ctx, o.Client, nm.Name)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing nodes")
	}
	for _, n := range advertising {
		add(n.Name)
	}
	return reqs
}

// maintenanceIntentChanged passes NodeMaintenance events that change what its nodes should be: not
// its progress reports.
func maintenanceIntentChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*nodemaintv1alpha1.NodeMaintenance), e.ObjectNew.(*nodemaintv1alpha1.NodeMaintenance)
		return o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
			maintenance.Phase(o, false) != maintenance.Phase(n, false) ||
			!equality.Semantic.DeepEqual(turnsOf(o), turnsOf(n)) || verdictChanged(o, n)
	}}
}

// verdictChanged reports whether the maintenance's verdict on the control-plane nodes it selects
// changed (rollout.Refused): refused or not, said for its generation or not.
func verdictChanged(o, n *nodemaintv1alpha1.NodeMaintenance) bool {
	verdict := func(nm *nodemaintv1alpha1.NodeMaintenance) (bool, bool) {
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionNodesSelected)
		return c != nil && c.Reason == nodemaintv1alpha1.ReasonEtcdQuorumAtRisk, c != nil && c.ObservedGeneration == nm.Generation
	}
	or, os := verdict(o)
	nr, ns := verdict(n)
	return n.Spec.Rollout == nil && (or != nr || os != ns)
}

// maintenanceNodesHandler enqueues the nodes a NodeMaintenance event concerns: every node it
// selects or that advertises it, except when only its rollout's turns changed, then the nodes
// whose turn started, ended or failed (a rollout over thousands of nodes would otherwise queue
// every one of them at each turn).
func maintenanceNodesHandler(obs *observe.Observer) handler.EventHandler {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return nodesOfMaintenance(ctx, obs, o.(*nodemaintv1alpha1.NodeMaintenance))
	})
	return handler.Funcs{
		CreateFunc:  all.Create,
		DeleteFunc:  all.Delete,
		GenericFunc: all.Generic,
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			o, n := e.ObjectOld.(*nodemaintv1alpha1.NodeMaintenance), e.ObjectNew.(*nodemaintv1alpha1.NodeMaintenance)
			if o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) || maintenance.Phase(o, false) != maintenance.Phase(n, false) || verdictChanged(o, n) {
				all.Update(ctx, e, q)
				return
			}
			for _, name := range changedTurns(turnsOf(o), turnsOf(n)) {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			}
		},
	}
}

// changedTurns names the nodes whose turn differs between two lists of turns.
func changedTurns(old, cur []nodemaintv1alpha1.NodeTurn) []string {
	was := map[string]nodemaintv1alpha1.NodeTurn{}
	for _, t := range old {
		was[t.Name] = t
	}
	var out []string
	for _, t := range cur {
		if w, ok := was[t.Name]; !ok || !equality.Semantic.DeepEqual(w, t) {
			out = append(out, t.Name)
		}
		delete(was, t.Name)
	}
	for name := range was {
		out = append(out, name)
	}
	return out
}

// turnsOf are the nodes in their turn in a rollout, which the node reconciler acts on.
func turnsOf(nm *nodemaintv1alpha1.NodeMaintenance) []nodemaintv1alpha1.NodeTurn {
	if nm.Status.Rollout == nil {
		return nil
	}
	return nm.Status.Rollout.InTurn
}

// podEventBatch is how long the node reconciler gathers the events of a node's pods before it
// looks at the node. Each look observes and decides every pod of the node, and a drained node's
// pods change in bursts (requested, answered, terminating, gone: four events each, for every pod
// of the node at once): one look per event would make the node reconciler's work grow with the
// square of the pods on the node. A fifth of a second is nothing next to
// what the pods' changes wait for (the owners' answers, shutdowns, the eviction back-off).
const podEventBatch = 200 * time.Millisecond

// SetupWithManager registers the node controller: nodes, the NodeMaintenances that select them,
// and their pods.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, concurrency int) error {
	c := mgr.GetClient()
	b := builder.ControllerManagedBy(mgr)
	if r.Observer.Protocol.EvictionRequests != nil {
		// Only under that protocol: the cache must not watch kinds the cluster may not serve.
		// Gathered as the pods' events are: a node's requests and Evictions change in the same
		// bursts as its pods (created, answered, ended, for many pods at once).
		b = b.Watches(&lifecyclev1alpha1.EvictionRequest{}, observe.DelayedMapHandler(podEventBatch, protocol.NodeOfRequest)).
			Watches(&lifecyclev1alpha1.Eviction{}, observe.DelayedMapHandler(podEventBatch, func(ctx context.Context, o client.Object) []reconcile.Request {
				return protocol.NodesOfEviction(ctx, c, o)
			}), builder.WithPredicates(protocol.EvictionAnswerChanged()))
	}
	if r.Observer.PodDeletion != nil {
		// Granted or revoked, the permission to delete pods changes what a drain past its
		// drainTimeout does (drainTimeoutAction Delete).
		b = b.WatchesRawSource(source.Channel(r.Observer.PodDeletion.Changes(), handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return nodesUnderMaintenance(ctx, c)
		})))
	}
	if r.Backlog != nil {
		// A node whose requests found no room is looked at again as room comes.
		b = b.WatchesRawSource(source.Channel(r.Backlog.Wake(), &handler.EnqueueRequestForObject{}))
	}
	return b.
		Named("node").
		For(&corev1.Node{}, builder.WithPredicates(observe.NodeChanged())).
		Watches(&nodemaintv1alpha1.NodeMaintenance{}, maintenanceNodesHandler(r.Observer), builder.WithPredicates(maintenanceIntentChanged())).
		Watches(&corev1.Pod{},
			observe.DelayedMapHandler(podEventBatch, func(ctx context.Context, o client.Object) []reconcile.Request {
				return nodeOfPod(ctx, r.Observer, o.(*corev1.Pod))
			}),
			builder.WithPredicates(observe.PodChanged())).
		Watches(&storagev1.VolumeAttachment{},
			handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*storagev1.VolumeAttachment).Spec.NodeName}}}
			})).
		Watches(&nodemaintv1alpha1.DrainRule{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
				return nodesUnderMaintenance(ctx, c)
			})).
		WithOptions(fairqueue.Options(concurrency)).
		Complete(r)
}
