package deploymentdecide

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestForgedRecordsNeverScaleToZero: records anyone who may patch the Deployment or its
// autoscaler can write, claiming a surge of the Deployment of 3 replicas from 0, never have the
// responder scale it below 3 (nobody is asked to leave; the autoscaler's minReplicas is 3, or
// restored to 1): neither the Deployment's own record, nor an autoscaler's record of raised
// bounds (adopted, then rolled back), nor one of restored bounds (a count taken for the
// autoscaler's late decision, undone).
func TestForgedRecordsNeverScaleToZero(t *testing.T) {
	fromZero := &surgepolicy.State{OriginalReplicas: 0, Surge: 3, StartTime: metav1.NewMicroTime(now.Add(-10 * time.Second))}
	raised := &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](1), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](3), Surge: fromZero}
	restored := &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](1), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](3), Surge: fromZero,
		Restored: ptr.To(metav1.NewMicroTime(now.Add(-5 * time.Second)))}
	pods := []*corev1.Pod{pod("a"), pod("b"), pod("c")}
	for name, in := range map[string]Input{
		"the Deployment's record": {Deployment: withAnnotation(newDeployment(3, 3), evacuation.SurgeAnnotation, fromZero.String())},
		"an autoscaler's record of raised bounds": {Deployment: newDeployment(3, 3),
			Autoscalers: []*autoscalingv2.HorizontalPodAutoscaler{hpa("web", "web", 3, 3, raised)}},
		"an autoscaler's record of restored bounds": {Deployment: newDeployment(3, 3),
			Autoscalers: []*autoscalingv2.HorizontalPodAutoscaler{reporting(hpa("web", "web", 1, 3, restored), 3, 2, 3)}},
	} {
		in.ReplicaSets, in.Pods, in.Now, in.SurgeTimeout = replicaSets(3), pods, now, 2*time.Minute
		if p := Decide(in); p.Scale != nil && p.Scale.Replicas < 3 {
			t.Errorf("%s: the Deployment of 3 scaled to %d", name, p.Scale.Replicas)
		}
	}
}

func replicaSets(replicas int32) []*appsv1.ReplicaSet {
	return []*appsv1.ReplicaSet{replicaSet("rs", replicas)}
}
