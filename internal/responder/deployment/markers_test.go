package deployment

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

func TestCountCanWait(t *testing.T) {
	count, ready := evacuation.ReplicasToEvacuateAnnotation, evacuation.EvacuationReadyAnnotation
	cur := map[string]string{count: "3", ready: "true"}
	for _, tc := range []struct {
		name    string
		want    map[string]*string
		surging bool
		wait    bool
	}{
		{"a count changes during a surge", map[string]*string{count: ptr.To("5"), ready: ptr.To("true")}, true, true},
		{"a count changes, no surge", map[string]*string{count: ptr.To("5"), ready: ptr.To("true")}, false, false},
		{"nothing changes", map[string]*string{count: ptr.To("3"), ready: ptr.To("true")}, true, true},
		{"the count goes", map[string]*string{count: nil, ready: nil}, true, false},
		{"evacuation-ready goes", map[string]*string{count: ptr.To("5"), ready: nil}, true, false},
		{"a count appears", map[string]*string{evacuation.DeploymentReplicasToEvacuateAnnotation: ptr.To("1")}, true, false},
		{"another annotation changes", map[string]*string{count: ptr.To("3"), ready: ptr.To("false")}, true, false},
	} {
		if got := countCanWait(cur, tc.want, tc.surging); got != tc.wait {
			t.Errorf("%s: countCanWait %v, want %v", tc.name, got, tc.wait)
		}
	}
}
