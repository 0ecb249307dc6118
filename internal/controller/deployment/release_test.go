package deployment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/decidetest"
	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestRelease: a Deployment mid-surge (2 replicas surged to 3 for one evacuated pod) is rolled
// back as when its maintenance ends early: replicas 2, the surge record gone, the surge's pod
// marked to go first, the evacuated pod unmarked and its acceptance withdrawn, its request
// (the requester's) left; once the ReplicaSet removed the surge's pod, its
// HorizontalPodAutoscaler's bounds (raised to 3 for the surge) are restored to 2 and 2, nothing
// of the responder's is left, and another call changes nothing. So too when the autoscaler scaled the Deployment to
// 3 before the responder could record its surge: the Deployment has no surge record, the
// autoscaler's record names the surge.
func TestRelease(t *testing.T) {
	defer func(f func() time.Time) { timeNow = f }(timeNow)
	timeNow = func() time.Time { return now }
	for _, autoscalerFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("autoscaler first %v", autoscalerFirst), func(t *testing.T) { testRelease(t, autoscalerFirst) })
	}
}

func testRelease(t *testing.T, autoscalerFirst bool) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	state := &surgepolicy.State{OriginalReplicas: 2, Surge: 1, StartTime: metavNow(-30 * time.Second)}
	d := withAnnotation(surging(newDeployment(2, 1), state), evacuation.DeploymentReplicasToEvacuateAnnotation, "1")
	if autoscalerFirst {
		delete(d.Annotations, evacuation.SurgeAnnotation)
	}
	rs := replicaSet("rs", 3)
	rs.Annotations = map[string]string{evacuation.ReplicasToEvacuateAnnotation: "1", evacuation.EvacuationReadyAnnotation: "true"}
	evacuated := pod("evacuated", requested(1), accepted, withMark)
	stays := pod("stays")
	surged := pod("surged", created(10))
	hpa := decidetest.HPA("web", "web", 3, 3, &surgepolicy.Bounds{Deployment: "web", MinReplicas: ptr.To[int32](2), MaxReplicas: 2,
		SetMinReplicas: ptr.To[int32](3), SetMaxReplicas: ptr.To[int32](3), Surge: state})
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(d, rs, evacuated, stays, surged, hpa).
		WithStatusSubresource(&corev1.Pod{}).Build()
	ctx := context.Background()
	release := func(dryRun bool) ([]string, bool) {
		t.Helper()
		var dep appsv1.Deployment
		var rsNow appsv1.ReplicaSet
		var pods corev1.PodList
		var hpaNow autoscalingv2.HorizontalPodAutoscaler
		if err := c.Get(ctx, client.ObjectKeyFromObject(hpa), &hpaNow); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), &dep); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &rsNow); err != nil {
			t.Fatal(err)
		}
		if err := c.List(ctx, &pods); err != nil {
			t.Fatal(err)
		}
		var ps []*corev1.Pod
		for i := range pods.Items {
			ps = append(ps, &pods.Items[i])
		}
		changes, again, err := Release(ctx, c, &dep, []*appsv1.ReplicaSet{&rsNow}, ps, []*autoscalingv2.HorizontalPodAutoscaler{&hpaNow}, dryRun)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("changes (dry run %v, again %v):\n%s", dryRun, again, strings.Join(changes, "\n"))
		return changes, again
	}
	get := func(o client.Object) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
	}

	if changes, _ := release(true); len(changes) == 0 {
		t.Fatal("dry run: no change announced")
	}
	get(d)
	if *d.Spec.Replicas != 3 {
		t.Fatalf("dry run changed the Deployment's replicas: %d; want 3", *d.Spec.Replicas)
	}
	if (d.Annotations[evacuation.SurgeAnnotation] == "") != autoscalerFirst {
		t.Fatalf("dry run changed the Deployment's surge record: annotations %v", d.Annotations)
	}

	changes, again := release(false)
	if !again {
		t.Errorf("rollback: not to be called again; want again, the surge's pods still marked")
	}
	if !strings.Contains(strings.Join(changes, "\n"), "SurgeRolledBack") {
		t.Errorf("rollback: changes %v; want SurgeRolledBack", changes)
	}
	get(d)
	if *d.Spec.Replicas != 2 {
		t.Errorf("Deployment after the rollback: replicas %d; want 2", *d.Spec.Replicas)
	}
	if len(ours(d.Annotations)) > 0 {
		t.Errorf("Deployment after the rollback: annotations %v; want none of ours", d.Annotations)
	}
	get(evacuated)
	get(surged)
	get(rs)
	if marks.IsMarked(evacuated) {
		t.Errorf("evacuated pod: marked %v; want unmarked", evacuated.Annotations)
	}
	if evacuation.Condition(evacuated, evacuation.Initiated) != nil {
		t.Errorf("evacuated pod: conditions %v; want no answer", evacuated.Status.Conditions)
	}
	if !evacuation.RequestedBy(evacuated, evacuation.ReasonNodeMaintenance) {
		t.Errorf("evacuated pod: conditions %v; want its request kept", evacuated.Status.Conditions)
	}
	if !marks.IsMarked(surged) {
		t.Errorf("the surge's pod is not marked: %v", surged.Annotations)
	}
	if got := surged.Annotations[corev1.PodDeletionCost]; got != "-2147483648" {
		t.Errorf("the surge's pod deletion cost %q; want -2147483648, to go first", got)
	}
	if len(ours(rs.Annotations)) > 0 {
		t.Errorf("ReplicaSet deploymentdecide.Markers left: %v", rs.Annotations)
	}
	get(hpa)
	// Until the scale-back is done, the bounds stay raised and recorded.
	if *hpa.Spec.MinReplicas != 3 {
		t.Errorf("HorizontalPodAutoscaler with the rollback: min %d; want 3", *hpa.Spec.MinReplicas)
	}
	if hpa.Spec.MaxReplicas != 3 {
		t.Errorf("HorizontalPodAutoscaler with the rollback: max %d; want 3", hpa.Spec.MaxReplicas)
	}
	if len(ours(hpa.Annotations)) != 1 {
		t.Errorf("HorizontalPodAutoscaler with the rollback: annotations %v; want the record", hpa.Annotations)
	}

	// The ReplicaSet removes the surge's pod (the lowest deletion cost); the Deployment is scaled
	// back: the autoscaler's bounds are restored.
	if err := c.Delete(ctx, surged); err != nil {
		t.Fatal(err)
	}
	changes, again = release(false)
	if again {
		t.Errorf("after the ReplicaSet scaled down: to be called again; want done")
	}
	if !strings.Contains(strings.Join(changes, "\n"), "AutoscalerBoundsRestored") {
		t.Errorf("after the ReplicaSet scaled down: changes %v; want the bounds restored", changes)
	}
	get(hpa)
	if *hpa.Spec.MinReplicas != 2 {
		t.Errorf("HorizontalPodAutoscaler after the scale-back: min %d; want 2", *hpa.Spec.MinReplicas)
	}
	if hpa.Spec.MaxReplicas != 2 {
		t.Errorf("HorizontalPodAutoscaler after the scale-back: max %d; want 2", hpa.Spec.MaxReplicas)
	}
	if len(ours(hpa.Annotations)) > 0 {
		t.Errorf("HorizontalPodAutoscaler after the scale-back: annotations %v; want no record", hpa.Annotations)
	}
	changes, again = release(false)
	if again {
		t.Errorf("once all is released: to be called again; want done")
	}
	if len(changes) != 0 {
		t.Errorf("once all is released: changes %v; want none", changes)
	}
	get(d)
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
	}
}

func metavNow(offset time.Duration) metav1.MicroTime { return metav1.NewMicroTime(now.Add(offset)) }

// ours is the nodemaint.dev/ annotations.
func ours(a map[string]string) []string {
	var out []string
	for k := range a {
		if strings.HasPrefix(k, "nodemaint.dev/") {
			out = append(out, k)
		}
	}
	return out
}
