package testutil

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// NodeView is what nodemaint may change on a node. The zero value is a node nodemaint left alone.
type NodeView struct {
	Unschedulable bool
	PlannedTaint  bool
	Maintenances  string // the nodemaint.dev/maintenances annotation
	CordonedByUs  bool
	Condition     string // "Status/Reason" of UnderMaintenance, "" when absent
}

// ViewNode reads the node's NodeView.
func ViewNode(ctx context.Context, c client.Reader, name string) (NodeView, error) {
	node := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		return NodeView{}, err
	}
	v := NodeView{
		Unschedulable: node.Spec.Unschedulable,
		Maintenances:  node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation],
		CordonedByUs:  node.Annotations[nodemaintv1alpha1.CordonedAnnotation] != "",
	}
	for _, t := range node.Spec.Taints {
		if t.Key == nodemaintv1alpha1.PlannedMaintenanceTaint && t.Effect == corev1.TaintEffectPreferNoSchedule {
			v.PlannedTaint = true
		}
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == nodemaintv1alpha1.NodeConditionUnderMaintenance {
			v.Condition = string(cond.Status) + "/" + cond.Reason
		}
	}
	return v, nil
}

// Request renders a pod's EvacuationRequest condition as "Status/Reason/Message", "" when absent.
func Request(pod *corev1.Pod) string {
	c := evacuation.Condition(pod, evacuation.Request)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason + "/" + c.Message
}

// StatusView is a NodeMaintenance's status in brief, with one node's counts.
type StatusView struct {
	Phase                         nodemaintv1alpha1.Phase
	Selected, Pending, Evacuating int32
	NodePending, NodeEvacuating   int32
	Drained                       string // status of the Drained condition
	UpToDate                      bool   // observedGeneration is the generation
}

// ViewStatus reads the NodeMaintenance's StatusView, with the counts of the given node.
func ViewStatus(ctx context.Context, c client.Reader, name, node string) (StatusView, error) {
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, nm); err != nil {
		return StatusView{}, err
	}
	v := StatusView{
		Phase: nm.Status.Phase, Selected: nm.Status.SelectedNodes,
		Pending: nm.Status.PodsPendingEvacuation, Evacuating: nm.Status.PodsEvacuating,
		NodePending: nm.Status.Nodes[node].PodsPendingEvacuation, NodeEvacuating: nm.Status.Nodes[node].PodsEvacuating,
		UpToDate: nm.Status.ObservedGeneration == nm.Generation,
	}
	if cond := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained); cond != nil {
		v.Drained = string(cond.Status)
	}
	return v, nil
}

// NodeSelectorFor selects the named nodes by metadata.name, in one term, as kubectl maintenance
// writes it.
func NodeSelectorFor(nodes ...string) corev1.NodeSelector {
	return corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: nodes}},
	}}}
}
