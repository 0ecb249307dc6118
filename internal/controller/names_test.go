package controller_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// TestTwentyNamedNodes: one term naming 20 nodes (metadata.name In [20 names], more than the 16
// terms a selector may have) drains exactly those 20 nodes, and nothing of the node it does not
// name.
func TestTwentyNamedNodes(t *testing.T) {
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("named-%02d", i)
		names = append(names, name)
		createNode(t, name, nil, false)
		createPod(t, name+"-app", name)
	}
	createNode(t, "named-other", nil, false)
	createPod(t, "named-other-app", "named-other")

	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "named"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: names}},
			}}},
			Cordon: true, Drain: true, Reason: "twenty", EvictionPolicy: nodemaintv1alpha1.EvictionPolicySignalOnly,
		},
	}
	if err := k8s.Create(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })

	for _, name := range names {
		expectRequest(t, name+"-app", "True/NodeMaintenance/twenty")
	}
	eventually(t, "20 nodes cordoned, 20 selected", func(ctx context.Context) (bool, string, error) {
		cordoned := 0
		for _, name := range names {
			ok, err := nodeUnschedulable(ctx, name)
			if err != nil {
				return false, "", err
			}
			if ok {
				cordoned++
			}
		}
		got := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "named"}, got)
		return cordoned == 20 && got.Status.SelectedNodes == 20, fmt.Sprintf("%d cordoned, %d selected", cordoned, got.Status.SelectedNodes), err
	})
	for _, name := range names {
		deletePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-app"}})
	}
	eventually(t, "drained", func(ctx context.Context) (bool, string, error) {
		got := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "named"}, got)
		drained := false
		for _, c := range got.Status.Conditions {
			drained = drained || (c.Type == nodemaintv1alpha1.ConditionDrained && c.Status == metav1.ConditionTrue)
		}
		return drained && got.Status.ObservedGeneration == got.Generation, fmt.Sprintf("%+v", got.Status.Conditions), err
	})
	// The node it does not name was never touched.
	if ok, err := nodeUnschedulable(context.Background(), "named-other"); err != nil || ok {
		t.Errorf("named-other cordoned: %v (%v)", ok, err)
	}
	expectRequest(t, "named-other-app", "")
	deleteNMAndWait(t, "named")
}

func nodeUnschedulable(ctx context.Context, name string) (bool, error) {
	node := &corev1.Node{}
	err := k8s.Get(ctx, client.ObjectKey{Name: name}, node)
	return node.Spec.Unschedulable, err
}
