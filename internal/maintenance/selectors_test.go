package maintenance

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// A remembered selector is the one of the NodeMaintenance's current generation.
func TestSelectorsFollowTheGeneration(t *testing.T) {
	selecting := func(generation int64, zone string) *nodemaintv1alpha1.NodeMaintenance {
		nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "nm", UID: "u1", Generation: generation}}
		nm.Spec.NodeSelector.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}},
		}}}
		return nm
	}
	node := func(zone string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-" + zone, Labels: map[string]string{"zone": zone}}}
	}
	s := NewSelectors(2)
	if !s.Of(selecting(1, "a")).Matches(node("a")) || s.Of(selecting(1, "a")).Matches(node("b")) {
		t.Fatal("generation 1 selects zone a only")
	}
	if s.Of(selecting(2, "b")).Matches(node("a")) || !s.Of(selecting(2, "b")).Matches(node("b")) {
		t.Error("generation 2 selects zone b only: the selector of generation 1 was kept")
	}
	// Without a generation (not from the API server) nothing is remembered.
	if s.Of(selecting(0, "c")).Matches(node("b")) || !s.Of(selecting(0, "c")).Matches(node("c")) {
		t.Error("a NodeMaintenance without a generation selects by its own selector")
	}
}
