package testutil

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// CreatePod creates a pod of the default namespace bound to node ("": unscheduled), changed by
// mutate first, and deletes it when the test ends. With no kubelet, a pod is bound by its
// spec.nodeName and goes with a zero grace period.
func CreatePod(t testing.TB, c client.Client, name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	for _, m := range mutate {
		m(pod)
	}
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { DeletePod(c, pod) })
	return pod
}

// DeletePod deletes the pod at once, as a kubelet would once it stopped.
func DeletePod(c client.Client, pod *corev1.Pod) {
	_ = c.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
}

// SetPodCondition sets the condition on the pod of the default namespace, merged by type, as its
// owner (an answer) or another requester would.
func SetPodCondition(t testing.TB, c client.Client, name string, cond corev1.PodCondition) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	orig := pod.DeepCopy()
	evacuation.SetCondition(pod, cond)
	if err := c.Status().Patch(ctx, pod, client.StrategicMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// ExpectEvicted waits for the deletion timestamp of the pod of the default namespace: with no
// kubelet, an evicted pod stays terminating.
func ExpectEvicted(t testing.TB, c client.Client, name string) {
	t.Helper()
	Eventually(t, 30*time.Second, "pod "+name+" evicted", func(ctx context.Context) (bool, string, error) {
		pod := &corev1.Pod{}
		err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, pod)
		return pod.DeletionTimestamp != nil, Request(pod), err
	})
}

// ExpectNotEvicted fails the test if the pod of the default namespace is being deleted.
func ExpectNotEvicted(t testing.TB, c client.Client, name string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.DeletionTimestamp != nil {
		t.Fatalf("pod %s was evicted", name)
	}
}
