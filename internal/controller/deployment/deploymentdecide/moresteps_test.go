package deploymentdecide

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
)

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
