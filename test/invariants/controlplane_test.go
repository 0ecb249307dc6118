package invariants

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// TestControlPlaneTogether: a controller that cordons a second control-plane node for a
// maintenance while the first is still cordoned for it fails the check; one that releases the
// first before it takes the second, takes a worker beside it, or whose two control-plane nodes
// are cordoned by two maintenances, passes.
func TestControlPlaneTogether(t *testing.T) {
	node := func(name string, controlPlane, cordoned bool, maintenances string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{},
			Annotations: map[string]string{nodemaintv1alpha1.MaintenancesAnnotation: maintenances}}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
		if controlPlane {
			n.Labels[nodemaintv1alpha1.ControlPlaneLabel] = ""
		}
		return n
	}
	for _, tc := range []struct {
		name   string
		events []*corev1.Node
		want   []string
	}{
		{"defective: two at once", []*corev1.Node{
			node("cp1", true, true, "m=Drain"), node("w1", false, true, "m=Drain"), node("cp2", true, true, "m=Cordon"),
		}, []string{KindControlPlaneTogether}},
		{"defective: a refused maintenance cordons both", []*corev1.Node{
			node("cp1", true, true, "m=Cordon"), node("cp2", true, true, "m=Cordon"), node("cp3", true, false, "m=Planning"),
		}, []string{KindControlPlaneTogether}},
		{"one at a time", []*corev1.Node{
			node("cp1", true, true, "m=Drain"), node("w1", false, true, "m=Drain"), node("cp1", true, false, "m=Released"),
			node("cp2", true, true, "m=Drain"), node("cp2", true, true, "m=DrainComplete"), node("cp3", true, false, "m=Planning"),
		}, nil},
		{"two maintenances", []*corev1.Node{
			node("cp1", true, true, "a=Drain"), node("cp2", true, true, "b=Drain"),
		}, nil},
		{"cordoned by someone else, waiting its turn", []*corev1.Node{
			node("cp1", true, true, "m=Drain"), node("cp2", true, true, "m=Planning"),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(nil)
			for i, n := range tc.events {
				s.controlPlane(n, false, at(float64(i)))
			}
			var got []string
			for _, v := range s.violations {
				got = append(got, v.Kind)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations %v, want %v", s.violations, tc.want)
			}
		})
	}
}
