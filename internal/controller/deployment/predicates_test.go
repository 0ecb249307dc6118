package deployment

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/decidetest"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
)

// TestAutoscalerChanged: an autoscaler's status reports wake the Deployment's decision only while
// the autoscaler carries a record of restored bounds (it goes once a report shows the autoscaler
// settled); its bounds and record always do.
func TestAutoscalerChanged(t *testing.T) {
	restored := &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4),
		Surge: &surgepolicy.State{OriginalReplicas: 3, Surge: 1, StartTime: metav1.NewMicroTime(decidetest.Now)}, Restored: ptr.To(metav1.NewMicroTime(decidetest.Now))}
	raised := &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4)}
	reported := func(h *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
		return decidetest.Reporting(h.DeepCopy(), 3, 3, 3)
	}
	for name, tc := range map[string]struct {
		old, cur *autoscalingv2.HorizontalPodAutoscaler
		want     bool
	}{
		"a report, the bounds restored and the record kept": {decidetest.HPA("web", "web", 3, 3, restored), reported(decidetest.HPA("web", "web", 3, 3, restored)), true},
		"a report, the bounds raised":                       {decidetest.HPA("web", "web", 4, 4, raised), reported(decidetest.HPA("web", "web", 4, 4, raised)), false},
		"a report, no record":                               {decidetest.HPA("web", "web", 3, 3, nil), reported(decidetest.HPA("web", "web", 3, 3, nil)), false},
		"the record gone":                                   {decidetest.HPA("web", "web", 3, 3, restored), decidetest.HPA("web", "web", 3, 3, nil), true},
		"maxReplicas changed":                               {decidetest.HPA("web", "web", 3, 3, nil), decidetest.HPA("web", "web", 3, 4, nil), true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := autoscalerChanged().Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur}); got != tc.want {
				t.Errorf("passed %t, want %t", got, tc.want)
			}
		})
	}
}
