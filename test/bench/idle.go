package main

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The idle measurement's pods are started by the bench, not by kwok: kwok plays about 20 pods a
// second on this 2-core machine (two stages a pod, each a templated PATCH), so 50,000 pods took
// 40 minutes to start. The bench creates each pod with kwok's pod-create stage held back
// (idleCreateDelay) and writes through pods/status, right after, the status kwok's pod-create and
// pod-ready stages would have left (runningStatus). A pod with an IP, Running and Ready, matches
// none of kwok's stages (see test/localcluster/kwok_pod_stages.yaml), so kwok leaves it alone
// until it is deleted (pod-delete matches then, and replaces the held-back pod-create).

// idleCreateDelay holds kwok's pod-create stage back for the idle pods, in their
// pod-create.stage.kwok.x-k8s.io/delay annotation, so that kwok does not overwrite the status the
// bench writes: kwok queues a stage when it sees the pod and plays it after the delay whether or
// not the pod still matches it.
const idleCreateDelay = 365 * 24 * time.Hour

// idlePodIP is the i-th pod IP of the idle measurement: 10.1.0.1, 10.1.0.2, ... Outside kwok's
// --cidr (10.0.0.0/16, test/localcluster/kwok.go), so that the pods kwok starts do not get the
// same IPs, and kwok's pool ignores them when the pods go.
func idlePodIP(i int) string {
	b := netip.MustParseAddr("10.1.0.0").As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(i) + 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// nodeHostIP is the IP kwok gives the pods of node (its NodeIPWith): the node's first internal
// address, else its first external one; none for the bench's nodes, which have no addresses.
func nodeHostIP(node *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
	}
	return ""
}

// runningStatus is the status kwok's pod-create and pod-ready stages (kwok_pod_stages.yaml) give
// pod, a pod without init containers or readiness gates: Running, Initialized, Ready and
// ContainersReady, every container running and ready since now, the pod's IP, and its node's IP
// when the node has one. pod's QoS class, set by the API server, is kept.
func runningStatus(pod *corev1.Pod, hostIP, podIP string, now time.Time) corev1.PodStatus {
	t := metav1.NewTime(now.Truncate(time.Second))
	s := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
		},
		PodIP:     podIP,
		PodIPs:    []corev1.PodIP{{IP: podIP}},
		StartTime: &t,
		QOSClass:  pod.Status.QOSClass,
	}
	if hostIP != "" {
		s.HostIP, s.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	}
	for _, c := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
		})
	}
	return s
}
