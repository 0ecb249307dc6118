package maintenance

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

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
	s := NewSelectors(time.Minute, clocktesting.NewFakePassiveClock(time.Now()))
	if !s.Of(selecting(1, "a")).Matches(node("a")) {
		t.Fatal("generation 1 does not select zone a; want it to")
	}
	if s.Of(selecting(1, "a")).Matches(node("b")) {
		t.Fatal("generation 1 selects zone b; want zone a only")
	}
	if s.Of(selecting(2, "b")).Matches(node("a")) {
		t.Error("generation 2 selects zone a: the selector of generation 1 was kept")
	}
	if !s.Of(selecting(2, "b")).Matches(node("b")) {
		t.Error("generation 2 does not select zone b: the selector of generation 1 was kept")
	}
	// Without a generation (not from the API server) nothing is remembered.
	if s.Of(selecting(0, "c")).Matches(node("b")) {
		t.Error("a NodeMaintenance without a generation selects zone b, a remembered selector's; want its own selector")
	}
	if !s.Of(selecting(0, "c")).Matches(node("c")) {
		t.Error("a NodeMaintenance without a generation does not select zone c; want its own selector")
	}
}

// TestSelectorsHoldAllInUse: 1,000 maintenances gone over in turn, as the reconcilers do, are
// parsed once each however many there are; one no longer used is forgotten within two periods.
func TestSelectorsHoldAllInUse(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := NewSelectors(time.Minute, clk)
	nms := make([]*nodemaintv1alpha1.NodeMaintenance, 1000)
	for i := range nms {
		nms[i] = &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("nm-", i), UID: types.UID(fmt.Sprint("u-", i)), Generation: 1}}
		nms[i].Spec.NodeSelector.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprint("node-", i)}},
		}}}
	}
	first := make([]Selector, len(nms))
	for round := range 3 {
		for i, nm := range nms[:len(nms)-round] {
			sel := s.Of(nm)
			if round == 0 {
				first[i] = sel
			} else if fmt.Sprintf("%p", sel.terms) != fmt.Sprintf("%p", first[i].terms) {
				t.Fatalf("round %d: maintenance %d parsed again", round, i)
			}
		}
		clk.Step(40 * time.Second)
	}
	// Those not used for two periods are gone.
	for range 2 {
		clk.Step(2 * time.Minute)
		for _, nm := range nms[:990] {
			s.Of(nm)
		}
	}
	if got := s.Len(); got != 990 {
		t.Errorf("%d selectors remembered, want the 990 in use", got)
	}
}
