package observe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/protocol"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

const (
	// podNodeIndex indexes the pod informer's store by spec.nodeName (PodsOnNode).
	podNodeIndex = "nodemaint.dev/node"
	// nodeMaintenanceIndex indexes nodes by the NodeMaintenances their annotation names.
	nodeMaintenanceIndex = "nodemaint.dev/maintenance"
	// podUnschedulableIndex indexes the pods the scheduler could not place ("true").
	podUnschedulableIndex = "nodemaint.dev/unschedulable"
)

// SetupIndexes registers the cache indexes the observer and the controllers' watches read.
//
// The pods' index by node is the pod informer's own, not a field index of the manager's
// (IndexField): a field index keeps two entries a pod, its value in the pod's namespace and in
// all namespaces, where PodsOnNode asks in all namespaces only (at 50,000 pods the second entry
// was 3 MB of heap), and reading it takes client.List's reflection copy of each pod into a list.
func SetupIndexes(ctx context.Context, mgr manager.Manager) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if err := informer.AddIndexers(toolscache.Indexers{podNodeIndex: podNode}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podUnschedulableIndex, func(o client.Object) []string {
		if Unschedulable(o.(*corev1.Pod)) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &corev1.Node{}, nodeMaintenanceIndex, func(o client.Object) []string {
		entries := maintenance.NodeEntries(o)
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name)
		}
		return names
	})
}

// podNode is the value of a pod in podNodeIndex: its node, if bound.
func podNode(obj any) ([]string, error) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}, nil
	}
	return nil, nil
}

// SharedInformer returns the cache's informer of obj's kind as a SharedIndexInformer, whose
// store the controllers read by pointer (PodsOnNode, the selected nodes, the preflight snapshot).
func SharedInformer(ctx context.Context, mgr manager.Manager, obj client.Object) (toolscache.SharedIndexInformer, error) {
	informer, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	i, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the cache's informer of %T (%T) has no indexer", obj, informer)
	}
	return i, nil
}

// IndexerOf returns the indexer of the cache's informer of obj's kind; the pods' holds
// podNodeIndex (SetupIndexes).
func IndexerOf(mgr manager.Manager, obj client.Object) (toolscache.Indexer, error) {
	i, err := SharedInformer(context.Background(), mgr, obj)
	if err != nil {
		return nil, err
	}
	return i.GetIndexer(), nil
}

// ProtocolStores returns the stores of the cache's informers of EvictionRequests and Evictions,
// whose indexes protocol.SetupIndexes registers: only under that protocol, since the cache must
// not watch kinds the cluster may not serve.
func ProtocolStores(mgr manager.Manager) (protocol.Stores, error) {
	requests, err := IndexerOf(mgr, &lifecyclev1alpha1.EvictionRequest{})
	if err != nil {
		return protocol.Stores{}, err
	}
	evictions, err := IndexerOf(mgr, &lifecyclev1alpha1.Eviction{})
	if err != nil {
		return protocol.Stores{}, err
	}
	return protocol.Stores{Requests: requests, Evictions: evictions}, nil
}

// PodsOnNode lists the pods bound to a node, from the cache's indexer, without copying them: the
// pods are the cache's own and read only. Observations are read only (FuzzDecide checks that a
// decision does not change its observation) and apply copies a pod before it changes it
// (the node controller's pod writes). Deep copies of every pod of a node, at each reconcile of
// the node and of each maintenance selecting it, would be a large part of the controller's CPU
// and of what it allocates: a Pod struct is over a kilobyte.
func PodsOnNode(pods toolscache.Indexer, node string) ([]*corev1.Pod, error) {
	objs, err := pods.ByIndex(podNodeIndex, node)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out, nil
}

// Unschedulable reports whether the scheduler could not place the pod: not bound, and its
// PodScheduled condition False for reason Unschedulable.
func Unschedulable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// UnschedulablePods lists the pods the scheduler could not place, from the cache.
func UnschedulablePods(ctx context.Context, c client.Reader) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingFields{podUnschedulableIndex: "true"}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// NodesAdvertising lists the nodes whose annotation names the NodeMaintenance, from the cache.
func NodesAdvertising(ctx context.Context, c client.Reader, nm string) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingFields{nodeMaintenanceIndex: nm}); err != nil {
		return nil, err
	}
	return nodes.Items, nil
}

// SelectedNodes lists the nodes a NodeMaintenance selects, from the node informer's store
// (IndexerOf), and counts the nodes of the cluster. The nodes are the cache's, not copies: read
// only. Through client.List, each look copied every node of the cluster (784 bytes a node, 3.9
// MB at 5,000 nodes) to keep the few selected: fifty Planning maintenances of 100 nodes each,
// looked at on every write of their nodes, kept tens of megabytes of such copies in flight.
func (o *Observer) SelectedNodes(nm *nodemaintv1alpha1.NodeMaintenance) ([]*corev1.Node, maintenance.Selector, int) {
	sel := o.selectorOf(nm)
	all := o.Nodes.List()
	var out []*corev1.Node
	for _, o := range all {
		if node, ok := o.(*corev1.Node); ok && sel.Matches(node) {
			out = append(out, node)
		}
	}
	return out, sel, len(all)
}

// MaintenancesSelecting lists the NodeMaintenances whose nodeSelector selects the node, from the
// cache; they are the cache's, read only: the watches map every pod event through here.
func (o *Observer) MaintenancesSelecting(ctx context.Context, node *corev1.Node) ([]*nodemaintv1alpha1.NodeMaintenance, error) {
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := o.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []*nodemaintv1alpha1.NodeMaintenance
	for i := range list.Items {
		if o.selectorOf(&list.Items[i]).Matches(node) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}
