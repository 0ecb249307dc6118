package deploymentdecide

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
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
func TestMoreSteps(t *testing.T) {
	for name, tc := range map[string]struct {
		in   Input
		want bool
	}{
		"nothing requested": {Input{Deployment: newDeployment(3, 1), Pods: []*corev1.Pod{pod("a"), pod("b"), pod("c")}}, false},
		"accepted pods wait for a wave": {Input{Deployment: withStatus(newDeployment(3, 1), func(s *appsv1.DeploymentStatus) { s.ObservedGeneration = 0 }),
			Pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")}}, true},
		"a completed surge's pods leaving": {Input{Deployment: newDeployment(3, 1),
			Pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark, terminating), pod("b", requested(1), accepted, withMark), pod("c"), pod("s")}}, true},
		"the last pods leaving": {Input{Deployment: newDeployment(3, 1),
			Pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark, terminating), pod("b"), pod("c"), pod("s")}}, false},
		"a surge in progress": {Input{Deployment: surging(newDeployment(3, 1), &surgepolicy.State{OriginalReplicas: 3, Surge: 1, StartTime: metav1.NewMicroTime(now)}),
			Pods: []*corev1.Pod{pod("a", requested(1), accepted, withMark), pod("b"), pod("c")}}, true},
		"declined pods": {Input{Deployment: withPaused(newDeployment(3, 1)), Pods: []*corev1.Pod{pod("a", requested(1)), pod("b"), pod("c")}}, false},
		"given up":      {Input{Deployment: newDeployment(3, 1), Pods: []*corev1.Pod{pod("a", requested(1), declined(surgepolicy.ReasonSurgeTimedOut)), pod("b"), pod("c")}}, false},
	} {
		tc.in.ReplicaSets = []*appsv1.ReplicaSet{replicaSet("rs", 3)}
		tc.in.Now, tc.in.SurgeTimeout = now, 2*time.Minute
		if got := Decide(tc.in).MoreSteps; got != tc.want {
			t.Errorf("%s: moreSteps %t, want %t", name, got, tc.want)
		}
	}
}
