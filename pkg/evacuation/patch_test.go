package evacuation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The patches do on the API server what SetCondition and RemoveCondition do in memory, leaving
// the pod's other conditions (the kubelet's, another requester's) as they are.
func TestConditionPatches(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "7", Annotations: map[string]string{"a": "b"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: Request, Status: corev1.ConditionTrue, Reason: ReasonNodeMaintenance, Message: "m", LastTransitionTime: at},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
			}},
		}
	}
	accept := corev1.PodCondition{Type: Initiated, Status: corev1.ConditionTrue, Reason: "Surge", Message: "moving", LastTransitionTime: at}
	changed := corev1.PodCondition{Type: Request, Status: corev1.ConditionTrue, Reason: ReasonNodeMaintenance, Message: "other", LastTransitionTime: at}
	// The patches carry the pod's UID and resourceVersion as preconditions, which leave them
	// as they are.
	for name, tc := range map[string]struct {
		change func(*corev1.Pod)
		patch  client.Patch
	}{
		"add a condition":     {func(p *corev1.Pod) { SetCondition(p, accept) }, ConditionPatch(base(), accept)},
		"replace a condition": {func(p *corev1.Pod) { SetCondition(p, changed) }, ConditionPatch(base(), changed)},
		"remove a condition":  {func(p *corev1.Pod) { RemoveCondition(p, Request) }, RemoveConditionPatch(base(), Request)},
		"remove one absent":   {func(p *corev1.Pod) { RemoveCondition(p, Initiated) }, RemoveConditionPatch(base(), Initiated)},
	} {
		t.Run(name, func(t *testing.T) {
			want := base()
			tc.change(want)
			orig, err := json.Marshal(base())
			if err != nil {
				t.Fatal(err)
			}
			data, err := tc.patch.Data(nil)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := strategicpatch.StrategicMergePatch(orig, data, &corev1.Pod{})
			if err != nil {
				t.Fatalf("applying %s: %v", data, err)
			}
			got := &corev1.Pod{}
			if err := json.Unmarshal(patched, got); err != nil {
				t.Fatal(err)
			}
			// Conditions are merged by type, their order means nothing: without the
			// $setElementOrder directive of a diff, a new condition comes first.
			byType := func(a, b corev1.PodCondition) int { return strings.Compare(string(a.Type), string(b.Type)) }
			slices.SortFunc(got.Status.Conditions, byType)
			slices.SortFunc(want.Status.Conditions, byType)
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("patch %s gives conditions %+v, want %+v", data, got.Status.Conditions, want.Status.Conditions)
			}
		})
	}
}
