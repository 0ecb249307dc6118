package main

import (
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The status the bench writes for an idle pod is the one kwok leaves once it started the pod,
// but for the times (which it sets to one instant) and the pod IP.
func TestRunningStatusAsKwok(t *testing.T) {
	b, err := os.ReadFile("testdata/kwok-running-pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kwok corev1.Pod
	if err := yaml.UnmarshalStrict(b, &kwok); err != nil {
		t.Fatal(err)
	}
	// The pod as created: the API server set its QoS class and nothing else of its status.
	created := kwok.DeepCopy()
	created.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: kwok.Status.QOSClass}
	now := time.Date(2026, 11, 25, 4, 0, 0, 500, time.UTC)
	got := runningStatus(created, "", kwok.Status.PodIP, now)

	if got.StartTime == nil || !got.StartTime.Time.Equal(now.Truncate(time.Second)) {
		t.Errorf("start time %v, want %v", got.StartTime, now.Truncate(time.Second))
	}
	want := kwok.Status
	sameTimes(&got, metav1.Time{})
	sameTimes(&want, metav1.Time{})
	if !equality.Semantic.DeepEqual(got, want) {
		g, _ := yaml.Marshal(got)
		w, _ := yaml.Marshal(want)
		t.Errorf("the bench's status:\n%s\nkwok's:\n%s", g, w)
	}
}

// sameTimes sets every time of s to t.
func sameTimes(s *corev1.PodStatus, t metav1.Time) {
	if s.StartTime != nil {
		s.StartTime = &t
	}
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = t
	}
	for i := range s.ContainerStatuses {
		if r := s.ContainerStatuses[i].State.Running; r != nil {
			r.StartedAt = t
		}
	}
}

func TestRunningStatusHostIP(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}}
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "n"}, {Type: corev1.NodeExternalIP, Address: "192.0.2.1"}, {Type: corev1.NodeInternalIP, Address: "172.16.0.1"}}}}
	s := runningStatus(pod, nodeHostIP(node), "10.1.0.1", time.Now())
	if s.HostIP != "172.16.0.1" {
		t.Errorf("host IP %q: want the node's internal IP", s.HostIP)
	}
	if len(s.HostIPs) != 1 || s.HostIPs[0].IP != "172.16.0.1" {
		t.Errorf("host IPs %v: want the node's internal IP", s.HostIPs)
	}
	if len(s.ContainerStatuses) != 2 {
		t.Errorf("container statuses %+v: want both", s.ContainerStatuses)
	} else {
		if s.ContainerStatuses[1].Name != "b" {
			t.Errorf("container statuses %+v: want b second", s.ContainerStatuses)
		}
		if s.ContainerStatuses[1].State.Running == nil {
			t.Errorf("container statuses %+v: want b running", s.ContainerStatuses)
		}
	}
	if got := nodeHostIP(&corev1.Node{}); got != "" {
		t.Errorf("a node without addresses: host IP %q", got)
	}
}

func TestIdlePodIP(t *testing.T) {
	for i, want := range map[int]string{0: "10.1.0.1", 254: "10.1.0.255", 255: "10.1.1.0", 49999: "10.1.195.80", 65534: "10.1.255.255", 65535: "10.2.0.0"} {
		if got := idlePodIP(i); got != want {
			t.Errorf("idlePodIP(%d) = %s, want %s", i, got, want)
		}
	}
}

// The requests of the Planning measurement: per minute, the most first, and a counter without
// labels read from the exposition.
func TestPlanningFigures(t *testing.T) {
	before := map[string]float64{"patch nodes": 10, "get leases.coordination.k8s.io": 5, "list pods": 1}
	after := map[string]float64{"patch nodes": 40, "get leases.coordination.k8s.io": 5, "list pods": 1, "patch nodemaintenances.nodemaint.dev/status": 3}
	got := perMinute(after, before, 2*time.Minute)
	if line := requestsLine(got); line != "15 patch nodes, 1.5 patch nodemaintenances.nodemaint.dev/status (16.5 in all)" {
		t.Errorf("requests %q", line)
	}
	if line := requestsLine(nil); line != "none" {
		t.Errorf("no requests: %q", line)
	}
	text := []byte("# HELP nodemaint_preflights_total x\nnodemaint_preflights_total 52\nnodemaint_preflight_seconds_total 1.25\n")
	if v := plainValue(text, "nodemaint_preflights_total"); v != 52 {
		t.Errorf("preflights %v", v)
	}
	if v := plainValue(text, "nodemaint_preflight_snapshots_total"); v != 0 {
		t.Errorf("a missing counter %v", v)
	}
}
