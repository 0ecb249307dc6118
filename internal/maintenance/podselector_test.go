package maintenance

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// TestPodScope: a pod is in scope when a maintenance draining the node selects it (before any
// drains, one acting on it), its label ignored when one that selects it ignores it; a selector
// that does not parse selects no pod.
func TestPodScope(t *testing.T) {
	nm := func(drain bool, policy nodemaintv1alpha1.DrainLabelPolicy, sel *metav1.LabelSelector) *nodemaintv1alpha1.NodeMaintenance {
		return &nodemaintv1alpha1.NodeMaintenance{Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: drain, DrainLabelPolicy: policy, PodSelector: sel}}
	}
	app := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": v}}
	}
	broken := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"a"}}}}
	pod := func(v string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": v}}}
	}
	for _, tc := range []struct {
		name             string
		nms              []*nodemaintv1alpha1.NodeMaintenance
		pod              string
		selected, ignore bool
	}{
		{name: "no maintenance", pod: "a", selected: true},
		{name: "no selector", nms: []*nodemaintv1alpha1.NodeMaintenance{nm(true, "", nil)}, pod: "a", selected: true},
		{name: "selected", nms: []*nodemaintv1alpha1.NodeMaintenance{nm(true, "", app("a"))}, pod: "a", selected: true},
		{name: "not selected", nms: []*nodemaintv1alpha1.NodeMaintenance{nm(true, "", app("a"))}, pod: "b"},
		{name: "selected by the other", nms: []*nodemaintv1alpha1.NodeMaintenance{nm(true, "", app("a")), nm(true, "", app("b"))}, pod: "b", selected: true},
		{name: "only a maintenance that cordons selects it", nms: []*nodemaintv1alpha1.NodeMaintenance{nm(true, "", app("a")), nm(false, "", nil)}, pod: "b"},
		{name: "none drains yet", nms: []*nodemaintv1alpha1.NodeMaintenance{nm(false, "", app("a"))}, pod: "b"},
		{name: "ignored by the one selecting it",
			nms: []*nodemaintv1alpha1.NodeMaintenance{nm(true, nodemaintv1alpha1.DrainLabelPolicyIgnore, app("a")), nm(true, "", nil)}, pod: "a", selected: true, ignore: true},
		{name: "ignored by one not selecting it",
			nms: []*nodemaintv1alpha1.NodeMaintenance{nm(true, nodemaintv1alpha1.DrainLabelPolicyIgnore, app("a")), nm(true, "", nil)}, pod: "b", selected: true},
		{name: "a selector that does not parse", nms: []*nodemaintv1alpha1.NodeMaintenance{nm(true, "", broken)}, pod: "a"},
	} {
		selected, ignore := NewPodScope(tc.nms, func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase { return Phase(nm, false) }).Selects(pod(tc.pod))
		if selected != tc.selected {
			t.Errorf("%s: selected %v; want %v", tc.name, selected, tc.selected)
		}
		if ignore != tc.ignore {
			t.Errorf("%s: ignore label %v; want %v", tc.name, ignore, tc.ignore)
		}
	}
}
