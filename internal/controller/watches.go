package controller

import (
	"context"
	"time"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
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
	"github.com/nodemaint/nodemaint/internal/fairqueue"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/nodeaction"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// nodeOfPod maps a pod event to the pod's node when the node has to do with a maintenance: a
// NodeMaintenance selects it, it still carries something nodemaint set, or the pod has
// nodemaint's evacuation request. The pods of every other node come and go without a reconcile:
// while a large maintenance moves thousands of pods onto the rest of the cluster (scenario L of
// the benchmark: 10,000 replacements on 900 nodes), their events queued every node of the
// cluster ahead of the nodes being drained. A node that becomes selected is reconciled through
// its own event or its NodeMaintenance's.
func nodeOfPod(ctx context.Context, c client.Reader, pod *corev1.Pod) []reconcile.Request {
	if pod.Spec.NodeName == "" {
		return nil
	}
	req := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pod.Spec.NodeName}}}
	if evacuation.RequestedBy(pod, evacuation.ReasonNodeMaintenance) {
		return req
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, req[0].NamespacedName, node, client.UnsafeDisableDeepCopy); err != nil { // read only
		// Not in the cache (yet): the reconcile finds out.
		return req
	}
	if carriesMaintenanceState(node) {
		return req
	}
	nms, err := maintenancesSelecting(ctx, c, node)
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
	return maintenanceCondition(node) != nil
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
func nodesOfMaintenance(ctx context.Context, c client.Reader, all toolscache.Indexer, nm *nodemaintv1alpha1.NodeMaintenance) []reconcile.Request {
	seen := map[string]bool{}
	var reqs []reconcile.Request
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	nodes, _, _ := selectedNodes(all, nm)
	for _, n := range nodes {
		add(n.Name)
	}
	advertising, err := nodesAdvertising(ctx, c, nm.Name)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing nodes")
	}
	for _, n := range advertising {
		add(n.Name)
	}
	return reqs
}

// nodeChanged passes node events that may change what the node reconciler does: not the kubelet's
// heartbeats.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Annotations, n.Annotations) ||
			!equality.Semantic.DeepEqual(o.Spec, n.Spec) ||
			!equality.Semantic.DeepEqual(maintenanceCondition(o), maintenanceCondition(n)) ||
			nodeaction.NodeReady(o) != nodeaction.NodeReady(n) ||
			o.Status.NodeInfo.BootID != n.Status.NodeInfo.BootID ||
			!equality.Semantic.DeepEqual(o.Status.VolumesAttached, n.Status.VolumesAttached)
	}}
}

func maintenanceCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == nodemaintv1alpha1.NodeConditionUnderMaintenance {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// maintenanceIntentChanged passes NodeMaintenance events that change what its nodes should be: not
// its progress reports.
func maintenanceIntentChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*nodemaintv1alpha1.NodeMaintenance), e.ObjectNew.(*nodemaintv1alpha1.NodeMaintenance)
		return o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
			maintenance.Phase(o, false) != maintenance.Phase(n, false) ||
			!equality.Semantic.DeepEqual(turnsOf(o), turnsOf(n))
	}}
}

// maintenanceNodesHandler enqueues the nodes a NodeMaintenance event concerns: every node it
// selects or that advertises it, except when only its rollout's turns changed, then the nodes
// whose turn started, ended or failed (a rollout over thousands of nodes would otherwise queue
// every one of them at each turn).
func maintenanceNodesHandler(c client.Reader, nodes toolscache.Indexer) handler.EventHandler {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return nodesOfMaintenance(ctx, c, nodes, o.(*nodemaintv1alpha1.NodeMaintenance))
	})
	return handler.Funcs{
		CreateFunc:  all.Create,
		DeleteFunc:  all.Delete,
		GenericFunc: all.Generic,
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			o, n := e.ObjectOld.(*nodemaintv1alpha1.NodeMaintenance), e.ObjectNew.(*nodemaintv1alpha1.NodeMaintenance)
			if o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) || maintenance.Phase(o, false) != maintenance.Phase(n, false) {
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

// podChanged passes pod events that change the node's pods as the maintenance sees them.
func podChanged() predicate.Predicate {
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

// maintenancesOfNode maps a node to the NodeMaintenances that select it or that it advertises.
func maintenancesOfNode(ctx context.Context, c client.Reader, node *corev1.Node) []reconcile.Request {
	nms, err := maintenancesSelecting(ctx, c, node)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing NodeMaintenances")
	}
	seen := map[string]bool{}
	var reqs []reconcile.Request
	for _, nm := range nms {
		seen[nm.Name] = true
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nm.Name}})
	}
	for _, e := range maintenance.ParseEntries(node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation]) {
		if !seen[e.Name] {
			seen[e.Name] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: e.Name}})
		}
	}
	return reqs
}

// podEventBatch is how long the node reconciler gathers the events of a node's pods before it
// looks at the node. Each look observes and decides every pod of the node, and a drained node's
// pods change in bursts (requested, answered, terminating, gone: four events each, a hundred
// pods at once in scenario M of the benchmark): one look per event made the node reconciler's
// work grow with the square of the pods on the node. A fifth of a second is nothing next to
// what the pods' changes wait for (the owners' answers, shutdowns, the eviction back-off).
const podEventBatch = 200 * time.Millisecond

// delayedMapHandler enqueues the mapped requests after delay. The work queue keeps one entry per
// request, so every event within the delay is served by one reconcile.
func delayedMapHandler(delay time.Duration, fn handler.MapFunc) handler.EventHandler {
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

// SetupWithManager registers the node controller: nodes, the NodeMaintenances that select them,
// and their pods.
func (r *NodeReconciler) SetupWithManager(mgr manager.Manager, concurrency int) error {
	if err := r.active.start(mgr); err != nil {
		return err
	}
	var err error
	if r.pods, err = indexerOf(mgr, &corev1.Pod{}); err != nil {
		return err
	}
	nodes, err := indexerOf(mgr, &corev1.Node{})
	if err != nil {
		return err
	}
	c := mgr.GetClient()
	b := builder.ControllerManagedBy(mgr)
	if r.Protocol == nodemaintv1alpha1.EvacuationProtocolEvictionRequest {
		// Only under that protocol: the cache must not watch kinds the cluster may not serve.
		if err := indexEvictionRequests(context.Background(), mgr); err != nil {
			return err
		}
		b = b.Watches(&lifecyclev1alpha1.EvictionRequest{}, handler.EnqueueRequestsFromMapFunc(nodeOfRequest)).
			Watches(&lifecyclev1alpha1.Eviction{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return nodesOfEviction(ctx, c, o)
			}))
	}
	return b.
		Named("node").
		For(&corev1.Node{}, builder.WithPredicates(nodeChanged())).
		Watches(&nodemaintv1alpha1.NodeMaintenance{}, maintenanceNodesHandler(c, nodes), builder.WithPredicates(maintenanceIntentChanged())).
		Watches(&corev1.Pod{},
			delayedMapHandler(podEventBatch, func(ctx context.Context, o client.Object) []reconcile.Request {
				return nodeOfPod(ctx, c, o.(*corev1.Pod))
			}),
			builder.WithPredicates(podChanged())).
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

// SetupWithManager registers the NodeMaintenance controller. Node changes reach it at once; pod
// changes are batched by StatusBatchDelay, and so are the changes of the pods the scheduler cannot
// place, which halt rollouts.
func (r *NodeMaintenanceReconciler) SetupWithManager(mgr manager.Manager, concurrency int) error {
	if err := r.active.start(mgr); err != nil {
		return err
	}
	var err error
	if r.pods, err = indexerOf(mgr, &corev1.Pod{}); err != nil {
		return err
	}
	if r.nodes, err = indexerOf(mgr, &corev1.Node{}); err != nil {
		return err
	}
	if err := watchAnswers(mgr); err != nil {
		return err
	}
	c := mgr.GetClient()
	statusMetrics.setSource(c, &r.active)
	b := builder.ControllerManagedBy(mgr)
	if r.Preflight {
		if r.preflights, err = newPreflights(context.Background(), mgr); err != nil {
			return err
		}
		if err := mgr.Add(r.preflights); err != nil {
			return err
		}
		// A preflight computed: its maintenance's status says it.
		b = b.WatchesRawSource(source.Channel(r.preflights.ready, &handler.EnqueueRequestForObject{}))
	}
	if r.Protocol == nodemaintv1alpha1.EvacuationProtocolEvictionRequest {
		// An Eviction's progress (the active responder, its expected completion) is in the status.
		b = b.Watches(&lifecyclev1alpha1.Eviction{}, delayedMapHandler(r.StatusBatchDelay, func(ctx context.Context, o client.Object) []reconcile.Request {
			pod := podOfEviction(ctx, c, o)
			if pod == nil {
				return nil
			}
			node := &corev1.Node{}
			if err := c.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node, client.UnsafeDisableDeepCopy); err != nil {
				return nil
			}
			return maintenancesOfNode(ctx, c, node)
		}))
	}
	return b.
		Named("nodemaintenance").
		For(&nodemaintv1alpha1.NodeMaintenance{}).
		Watches(&corev1.Node{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return maintenancesOfNode(ctx, c, o.(*corev1.Node))
			}),
			builder.WithPredicates(nodeChanged())).
		Watches(&corev1.Pod{},
			delayedMapHandler(r.StatusBatchDelay, func(ctx context.Context, o client.Object) []reconcile.Request {
				pod := o.(*corev1.Pod)
				if pod.Spec.NodeName == "" {
					return nil
				}
				node := &corev1.Node{}
				if err := c.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node, client.UnsafeDisableDeepCopy); err != nil {
					return nil
				}
				return maintenancesOfNode(ctx, c, node)
			}),
			builder.WithPredicates(podChanged())).
		Watches(&corev1.Pod{},
			delayedMapHandler(r.StatusBatchDelay, func(ctx context.Context, _ client.Object) []reconcile.Request {
				return rollingMaintenances(ctx, c)
			}),
			builder.WithPredicates(placementChanged())).
		WithOptions(fairqueue.Options(concurrency)).
		Complete(r)
}

// placementChanged passes the events of pods the scheduler cannot place: one became unschedulable,
// was placed at last, or went. They are on no node, so the node-based mapping never sees them, yet
// they halt rollouts, which must resume once they are gone even when nothing else changes (a rollout
// that only cordons has no drain whose status is refreshed).
func placementChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return awaitingPlacement(e.Object.(*corev1.Pod)) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return unschedulable(e.ObjectOld.(*corev1.Pod)) != unschedulable(e.ObjectNew.(*corev1.Pod))
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

// rollingMaintenances lists the NodeMaintenances whose rollout may start or halt on a pod the
// scheduler cannot place: those with spec.rollout that cordon or drain and are not complete.
func rollingMaintenances(ctx context.Context, c client.Reader) []reconcile.Request {
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := c.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeMaintenances")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		nm := &list.Items[i]
		if nm.Spec.Rollout == nil || !(nm.Spec.Cordon || nm.Spec.Drain) || !nm.DeletionTimestamp.IsZero() ||
			nm.Status.Phase == nodemaintv1alpha1.PhaseMaintenanceComplete {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nm.Name}})
	}
	return reqs
}
