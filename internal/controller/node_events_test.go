package controller_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaint/nodemaint/internal/controller"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestPodEventsOfUnmaintainedNodes: pod events reach the node controller for the nodes a
// maintenance selects or left its state on, and for pods with nodemaint's request; the pods of
// every other node do not queue their node.
func TestPodEventsOfUnmaintainedNodes(t *testing.T) {
	createNode(t, "events-idle", nil, false)
	createNode(t, "events-maintained", nil, false)
	createNM(t, "events", true, false, "", "events-maintained")
	ctx := context.Background()

	podOn := func(node string, requested bool) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
		if requested {
			evacuation.SetCondition(pod, maintenance.EvacuationRequest("left over"))
		}
		return pod
	}
	mapped := func(pod *corev1.Pod) string {
		reqs := controller.NodeOfPod(ctx, k8s, pod)
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
	} {
		if got := mapped(tc.pod); got != tc.want {
			t.Errorf("%s: enqueued %q, want %q", tc.what, got, tc.want)
		}
	}

	// Once the maintenance is gone and the node reconciler removed what it set, the node's pods
	// stop queueing it.
	deleteNMAndWait(t, "events")
	eventually(t, "pod events of the former maintained node ignored", func(context.Context) (bool, string, error) {
		got := mapped(podOn("events-maintained", false))
		return got == "", fmt.Sprintf("enqueued %q", got), nil
	})
}
