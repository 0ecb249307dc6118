package observe

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			var a ActiveSince
			if !tc.active.IsZero() {
				a.nanos.Store(tc.active.UnixNano())
			}
			p := policy
			p.CountFrom = a.Since()
			d := drain.Judge(drain.Classified{Pod: tc.pod}, now, p)
			if d.Evict != tc.wantEvict {
				t.Errorf("evict %v, want %v (%+v)", d.Evict, tc.wantEvict, d)
			}
		})
	}
}
