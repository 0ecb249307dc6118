package marks

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

func TestCountCanWait(t *testing.T) {
	count, ready := evacuation.ReplicasToEvacuateAnnotation, evacuation.EvacuationReadyAnnotation
	cur := map[string]string{count: "3", ready: "true"}
	for _, tc := range []struct {
		name      string
		want      map[string]*string
		moreSteps bool
		wait      bool
	}{
		{"a count changes during a surge", map[string]*string{count: ptr.To("5"), ready: ptr.To("true")}, true, true},
		{"a count changes, nothing more to do", map[string]*string{count: ptr.To("5"), ready: ptr.To("true")}, false, false},
		{"nothing changes", map[string]*string{count: ptr.To("3"), ready: ptr.To("true")}, true, true},
		{"the count goes", map[string]*string{count: nil, ready: nil}, true, false},
		{"evacuation-ready goes", map[string]*string{count: ptr.To("5"), ready: nil}, true, false},
		{"a count appears", map[string]*string{evacuation.DeploymentReplicasToEvacuateAnnotation: ptr.To("1")}, true, false},
		{"another annotation changes", map[string]*string{count: ptr.To("3"), ready: ptr.To("false")}, true, false},
	} {
		if got := CountCanWait(cur, tc.want, tc.moreSteps); got != tc.wait {
			t.Errorf("%s: CountCanWait %v, want %v", tc.name, got, tc.wait)
		}
	}
}

// The counts of pods to evacuate wait for the evacuation's next write of the Deployment while
// it has one: during a surge and while accepted pods wait for a wave, not once what is left is
// declined or gone.
