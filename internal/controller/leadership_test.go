package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// The time before this replica led does not count against an owner's response timeout.
func TestActiveSincePolicy(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	requested := func(at time.Time) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance,
			LastTransitionTime: metav1.NewTime(at),
		}}}}
	}
	policy := drain.Policy{Evict: true, ResponseTimeout: 30 * time.Second}
	for _, tc := range []struct {
		name      string
		active    time.Time // zero: never became active
		pod       *corev1.Pod
		wantEvict bool
	}{
		{name: "not set up: the request's time counts", pod: requested(now.Add(-time.Minute)), wantEvict: true},
		{name: "requested long before this replica led", active: now.Add(-10 * time.Second), pod: requested(now.Add(-time.Minute))},
		{name: "led long enough since", active: now.Add(-31 * time.Second), pod: requested(now.Add(-time.Minute)), wantEvict: true},
		{name: "requested after this replica led", active: now.Add(-time.Hour), pod: requested(now.Add(-31 * time.Second)), wantEvict: true},
		{name: "requested after this replica led, in time", active: now.Add(-time.Hour), pod: requested(now.Add(-29 * time.Second))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a activeSince
			if !tc.active.IsZero() {
				a.nanos.Store(tc.active.UnixNano())
			}
			p := policy
			p.CountFrom = a.since()
			d := drain.Decide(drain.Classified{Pod: tc.pod}, now, p)
			if d.Evict != tc.wantEvict {
				t.Errorf("evict %v, want %v (%+v)", d.Evict, tc.wantEvict, d)
			}
		})
	}
}

// A NodeMaintenance's status is written at most once per StatusBatchDelay, whatever triggers
// the reconciles; another NodeMaintenance has its own spacing.
func TestStatusWriteSpacing(t *testing.T) {
	r := &NodeMaintenanceReconciler{StatusBatchDelay: time.Second}
	a, b := types.NamespacedName{Name: "a"}, types.NamespacedName{Name: "b"}
	now := time.Unix(1000, 0)
	if w := r.statusWriteWait(a, now); w != 0 {
		t.Fatalf("first write waits %v", w)
	}
	r.statusWritten.Store(a, now)
	if w := r.statusWriteWait(a, now.Add(300*time.Millisecond)); w != 700*time.Millisecond {
		t.Errorf("write 300ms after the last waits %v, want 700ms", w)
	}
	if w := r.statusWriteWait(a, now.Add(2*time.Second)); w != 0 {
		t.Errorf("write 2s after the last waits %v", w)
	}
	if w := r.statusWriteWait(b, now); w != 0 {
		t.Errorf("another NodeMaintenance waits %v", w)
	}
}
