package deployment

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide"
	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/responder"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// apply writes copies of the pods observe read from the cache: changing them, as the writes do,
// leaves the cache's alone, and an answer through the pod's request changes the copy apply holds.
func TestOwnWrites(t *testing.T) {
	withUID := func(p *corev1.Pod) { p.UID = types.UID(p.Name) }
	answered := pod("answered", withUID, requested(1))
	unmarked := pod("unmarked", withUID, withMark)
	readOnly := pod("read-only", withUID, requested(1), accepted)
	cached := []*corev1.Pod{answered, unmarked, readOnly}
	before := make([]*corev1.Pod, len(cached))
	for i, p := range cached {
		before[i] = p.DeepCopy()
	}
	view := responder.Observe(cached, nil, "")
	p := deploymentdecide.Decision{Answers: []deploymentdecide.Answer{{Pod: answered, Status: corev1.ConditionTrue, Reason: surgepolicy.ReasonSurge}}, Mark: []*corev1.Pod{answered}, Unmark: []*corev1.Pod{unmarked}}
	ownWrites(&p, view)

	own := p.Answers[0].Pod
	switch {
	case own == answered || p.Unmark[0] == unmarked:
		t.Fatal("the plan holds the cache's pods, not copies")
	case p.Mark[0] != own:
		t.Error("a pod answered and marked is two copies: the mark would start from the pod before its answer")
	case view.Request(own) == nil || view.Request(own).Pod() != own:
		t.Error("the answer through the pod's request would not change the copy apply holds")
	}
	// What the writes do in memory.
	evacuation.SetCondition(own, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: surgepolicy.ReasonSurge})
	marks.SetAnnotation(own, corev1.PodDeletionCost, nil)
	marks.SetAnnotation(p.Unmark[0], evacuation.OriginalDeletionCostAnnotation, nil)
	for i, p := range cached {
		if p.Name != before[i].Name {
			t.Errorf("the cache's pod %s is now %s; want it unchanged", before[i].Name, p.Name)
		}
		if got, want := len(p.Status.Conditions), len(before[i].Status.Conditions); got != want {
			t.Errorf("the cache's pod %s has %d conditions; want %d, unchanged", before[i].Name, got, want)
		}
		if got, want := len(p.Annotations), len(before[i].Annotations); got != want {
			t.Errorf("the cache's pod %s has %d annotations; want %d, unchanged", before[i].Name, got, want)
		}
	}
}
