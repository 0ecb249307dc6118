package evacuation

import (
	"context"
	"os"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const costKey, savedKey = corev1.PodDeletionCost, OriginalDeletionCostAnnotation

// countingClient counts the client's patches of pods and of their status.
func countingClient(c client.WithWatch) (client.Client, *atomic.Int32, *atomic.Int32) {
	var patches, statusPatches atomic.Int32
	return interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			statusPatches.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}), &patches, &statusPatches
}

// checkAnswered asserts the stored pod's EvacuationInitiated status ("" for none) and annotations.
func checkAnswered(t *testing.T, c client.Client, pod *corev1.Pod, status corev1.ConditionStatus, annotations map[string]*string) {
	t.Helper()
	got := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	cond := Condition(got, Initiated)
	if (cond == nil) != (status == "") || (cond != nil && cond.Status != status) {
		t.Errorf("EvacuationInitiated = %+v, want status %q", cond, status)
	}
	for key, want := range annotations {
		v, ok := got.Annotations[key]
		if want == nil && ok || want != nil && (!ok || v != *want) {
			t.Errorf("annotation %s = %q (present %t), want %v", key, v, ok, ptr.Deref(want, "<none>"))
		}
	}
	if got.Annotations["keep"] != "me" {
		t.Errorf("annotation keep = %q: another annotation changed", got.Annotations["keep"])
	}
}

var (
	lowered  = map[string]*string{costKey: ptr.To("-2147483648"), savedKey: ptr.To("5")}
	restored = map[string]*string{costKey: ptr.To("5"), savedKey: nil}
)

// TestAnswerWithAnnotationsRealAPIServer: on kube-apiserver, an answer and the annotations that go
// with it are one pods/status patch, for an acceptance and for its withdrawal.
func TestAnswerWithAnnotationsRealAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or set it to the output of hack/control-plane.sh")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	real, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, patches, statusPatches := countingClient(real)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Annotations: map[string]string{costKey: "5", "keep": "me"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if err := real.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	accept := &corev1.PodCondition{Type: Initiated, Status: corev1.ConditionTrue, Reason: "Surge", Message: "moving"}
	if err := Answer(ctx, c, pod, accept, lowered); err != nil {
		t.Fatal(err)
	}
	checkAnswered(t, real, pod, corev1.ConditionTrue, lowered)
	if n := patches.Load(); n != 0 {
		t.Errorf("accepting wrote %d pod patches, want none", n)
	}
	if n := statusPatches.Load(); n != 1 {
		t.Errorf("accepting wrote %d status patches, want one", n)
	}
	if got := pod.Annotations[costKey]; got != "-2147483648" {
		t.Errorf("the pod in memory is not the one written: annotation %s = %q, want -2147483648", costKey, got)
	}
	if Condition(pod, Initiated) == nil {
		t.Errorf("the pod in memory is not the one written: conditions %v, want %s", pod.Status.Conditions, Initiated)
	}

	// Nothing changes: no write.
	if err := Answer(ctx, c, pod, accept, lowered); err != nil {
		t.Fatal(err)
	}
	if n := patches.Load(); n != 0 {
		t.Errorf("answering again wrote %d pod patches, want none", n)
	}
	if n := statusPatches.Load(); n != 1 {
		t.Errorf("answering again wrote %d status patches more, want none more", n-1)
	}

	if err := Answer(ctx, c, pod, nil, restored); err != nil {
		t.Fatal(err)
	}
	checkAnswered(t, real, pod, "", restored)
	if n := patches.Load(); n != 0 {
		t.Errorf("withdrawing wrote %d pod patches, want none", n)
	}
	if n := statusPatches.Load(); n != 2 {
		t.Errorf("withdrawing wrote %d status patches, want one", n-1)
	}

	// The pod deleted and created again under its name (a StatefulSet's) is another pod: an
	// answer, or annotations alone, decided for the old one are refused (Stale) and the new one
	// stays as it is.
	old := pod.DeepCopy()
	if err := real.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	again := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Annotations: map[string]string{costKey: "5", "keep": "me"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if err := real.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := Answer(ctx, c, old.DeepCopy(), accept, lowered); !Stale(err) {
		t.Errorf("answering for the old pod: %v, want a stale write", err)
	}
	if err := Answer(ctx, c, old.DeepCopy(), nil, lowered); !Stale(err) {
		t.Errorf("annotating the old pod: %v, want a stale write", err)
	}
	checkAnswered(t, real, again, "", map[string]*string{costKey: ptr.To("5"), savedKey: nil})
}

// TestAnswerWithAnnotationsFallback: an API server that drops metadata changes made through
// pods/status (as controller-runtime's fake client does) still gets the annotations, by a second
// patch of the pod.
func TestAnswerWithAnnotationsFallback(t *testing.T) {
	pod := testPod()
	pod.Annotations = map[string]string{costKey: "5", "keep": "me"}
	fc := newClient(t, pod.DeepCopy())
	c, patches, statusPatches := countingClient(fc.(client.WithWatch))
	ctx := context.Background()
	if err := Answer(ctx, c, pod, &corev1.PodCondition{Type: Initiated, Status: corev1.ConditionFalse, Reason: "No"}, lowered); err != nil {
		t.Fatal(err)
	}
	checkAnswered(t, fc, pod, corev1.ConditionFalse, lowered)
	if n := patches.Load(); n != 1 {
		t.Errorf("wrote %d pod patches, want one", n)
	}
	if n := statusPatches.Load(); n != 1 {
		t.Errorf("wrote %d status patches, want one", n)
	}
	// Annotations alone: one pod patch.
	if err := Answer(ctx, c, pod, &corev1.PodCondition{Type: Initiated, Status: corev1.ConditionFalse, Reason: "No"}, restored); err != nil {
		t.Fatal(err)
	}
	checkAnswered(t, fc, pod, corev1.ConditionFalse, restored)
	if n := patches.Load(); n != 2 {
		t.Errorf("wrote %d pod patches in all, want a second one (2)", n)
	}
	if n := statusPatches.Load(); n != 1 {
		t.Errorf("wrote %d status patches in all, want no second one (1)", n)
	}
}
