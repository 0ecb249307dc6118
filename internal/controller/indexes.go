package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

const (
	// podNodeNameIndex indexes pods by spec.nodeName.
	podNodeNameIndex = "spec.nodeName"
	// nodeMaintenanceIndex indexes nodes by the NodeMaintenances their annotation names.
	nodeMaintenanceIndex = "nodemaint.dev/maintenance"
	// podUnschedulableIndex indexes the pods the scheduler could not place ("true").
	podUnschedulableIndex = "nodemaint.dev/unschedulable"
)

// SetupIndexes registers the cache indexes the reconcilers use.
func SetupIndexes(ctx context.Context, mgr manager.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podNodeNameIndex, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podUnschedulableIndex, func(o client.Object) []string {
		if unschedulable(o.(*corev1.Pod)) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &corev1.Node{}, nodeMaintenanceIndex, func(o client.Object) []string {
		entries := maintenance.ParseEntries(o.GetAnnotations()[nodemaintv1alpha1.MaintenancesAnnotation])
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name)
		}
		return names
	})
}

// podsOnNode lists the pods bound to a node, from the cache, without copying them: the pods share
// their maps and slices with the cache and are read only. Observations are read only (FuzzDecide
// checks that a decision does not change its observation) and apply copies a pod before it
// changes it (patchPods). Deep copies of every pod of a node, at each reconcile of the node and of
// each maintenance selecting it, were a quarter of the controller's CPU in scenario M.
func podsOnNode(ctx context.Context, c client.Reader, node string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingFields{podNodeNameIndex: node}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// unschedulable reports whether the scheduler could not place the pod: not bound, and its
// PodScheduled condition False for reason Unschedulable.
func unschedulable(pod *corev1.Pod) bool {
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

// unschedulablePods lists the pods the scheduler could not place, from the cache.
func unschedulablePods(ctx context.Context, c client.Reader) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingFields{podUnschedulableIndex: "true"}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// nodesAdvertising lists the nodes whose annotation names the NodeMaintenance, from the cache.
func nodesAdvertising(ctx context.Context, c client.Reader, nm string) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingFields{nodeMaintenanceIndex: nm}); err != nil {
		return nil, err
	}
	return nodes.Items, nil
}

// selectors are the NodeMaintenances' parsed node selectors, which the watches and the
// observations of both reconcilers match nodes against.
var selectors = maintenance.NewSelectors(256)

// selectedNodes lists the nodes a NodeMaintenance selects, from the cache, and counts the nodes
// of the cluster. The nodes are the cache's: read only.
func selectedNodes(ctx context.Context, c client.Reader, nm *nodemaintv1alpha1.NodeMaintenance) ([]*corev1.Node, maintenance.Selector, int, error) {
	sel := selectors.Of(nm)
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, sel, 0, err
	}
	var out []*corev1.Node
	for i := range nodes.Items {
		if sel.Matches(&nodes.Items[i]) {
			out = append(out, &nodes.Items[i])
		}
	}
	return out, sel, len(nodes.Items), nil
}

// maintenancesSelecting lists the NodeMaintenances whose nodeSelector selects the node, from the
// cache; they are the cache's, read only: the watches map every pod event through here.
func maintenancesSelecting(ctx context.Context, c client.Reader, node *corev1.Node) ([]*nodemaintv1alpha1.NodeMaintenance, error) {
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []*nodemaintv1alpha1.NodeMaintenance
	for i := range list.Items {
		if selectors.Of(&list.Items[i]).Matches(node) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}
