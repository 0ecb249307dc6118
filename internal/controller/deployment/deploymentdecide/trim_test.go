package deploymentdecide

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodemaint/nodemaint/internal/cachetrim"
)

// The responder reads pods from the trimmed cache (internal/cachetrim): trimmed, a replacement
// is in trouble exactly when it is whole.
func TestInTroubleTrimmed(t *testing.T) {
	running := corev1.ContainerStatus{Name: "sidecar", Ready: true, Image: "x", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	done := corev1.ContainerStatus{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}
	wait := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}
	}
	for _, tc := range []struct {
		name       string
		init, main []corev1.ContainerStatus
		want       bool
	}{
		{name: "running", init: []corev1.ContainerStatus{done}, main: []corev1.ContainerStatus{running}},
		{name: "creating", main: []corev1.ContainerStatus{running, wait("ContainerCreating")}},
		{name: "crash loop after a running one", main: []corev1.ContainerStatus{running, wait("CrashLoopBackOff")}, want: true},
		{name: "init image pull", init: []corev1.ContainerStatus{wait("ImagePullBackOff")}, main: []corev1.ContainerStatus{wait("PodInitializing")}, want: true},
	} {
		pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: tc.init, ContainerStatuses: tc.main}}
		trimmed := pod.DeepCopy()
		cachetrim.Pod(trimmed)
		got, whole := InTrouble(trimmed), InTrouble(pod)
		if whole != tc.want {
			t.Errorf("%s: in trouble %v; want %v", tc.name, whole, tc.want)
		}
		if got != whole {
			t.Errorf("%s: in trouble trimmed %v; want as whole, %v", tc.name, got, whole)
		}
	}
}
