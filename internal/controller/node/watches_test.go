package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestPodEventsOfUnmaintainedNodes: pod events reach the node controller for the nodes a
// maintenance selects or left its state on, and for pods with nodemaint's request; the pods of
// every other node do not queue their node.
func TestPodEventsOfUnmaintainedNodes(t *testing.T) {
	ctx := context.Background()
	for _, node := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "events-idle"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "events-maintained"}},
		// Restored but for the annotation: the node controller still has to look at it.
		{ObjectMeta: metav1.ObjectMeta{Name: "events-left", Annotations: map[string]string{nodemaintv1alpha1.MaintenancesAnnotation: "gone"}}},
	} {
		if err := k8s.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "events"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: testutil.NodeSelectorFor("events-maintained"), Cordon: true}}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })

	podOn := func(node string, requested bool) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
		if requested {
			evacuation.SetCondition(pod, maintenance.EvacuationRequest("left over"))
		}
		return pod
	}
	mapped := func(pod *corev1.Pod) string {
		reqs := nodeOfPod(ctx, &observe.Observer{Client: k8s}, pod)
		if len(reqs) == 0 {
			return ""
		}
		return reqs[0].Name
	}
	for _, tc := range []struct {
		what string
		pod  *corev1.Pod
		want string
	}{
		{"a pod of a node no maintenance selects", podOn("events-idle", false), ""},
		{"a pod not scheduled", podOn("", false), ""},
		{"a pod with nodemaint's request on that node", podOn("events-idle", true), "events-idle"},
		{"a pod of a selected node", podOn("events-maintained", false), "events-maintained"},
		{"a pod of a node that carries nodemaint's annotation", podOn("events-left", false), "events-left"},
		{"a pod of a node not in the cache", podOn("events-unknown", false), "events-unknown"},
	} {
		if got := mapped(tc.pod); got != tc.want {
			t.Errorf("%s: enqueued %q, want %q", tc.what, got, tc.want)
		}
	}

	// Once the maintenance is gone (no controller runs here to hold its finalizer), the selected
	// node's pods stop queueing it.
	if err := k8s.Delete(ctx, nm); err != nil {
		t.Fatal(err)
	}
	if got := mapped(podOn("events-maintained", false)); got != "" {
		t.Errorf("a pod of a node no maintenance selects any more: enqueued %q", got)
	}
}
