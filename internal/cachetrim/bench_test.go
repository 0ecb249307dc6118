package cachetrim

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// replicaSetPod is a pod of a Deployment as the API server serves it once the kubelet runs it:
// what admission adds (the default tolerations, the service account's token volume), five
// conditions, a running container.
func replicaSetPod(i int) *corev1.Pod {
	since := metav1.Unix(1_790_000_000, 0)
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: since}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("web-7d9f8b6c5d-%05d", i), GenerateName: "web-7d9f8b6c5d-", Namespace: "shop",
			UID: types.UID(fmt.Sprintf("0b0c9e1e-5d43-4c57-a3b1-%012d", i)), ResourceVersion: fmt.Sprint(100_000 + i),
			CreationTimestamp: since,
			Labels:            map[string]string{"app": "web", "pod-template-hash": "7d9f8b6c5d"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-01T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8b6c5d",
				UID: "5f1d2c4e-8a7b-4c3d-9e2f-1a2b3c4d5e6f", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{}}}`)}},
		},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("node-%04d", i%1000),
			Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.2.3",
				Resources:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}}}}}}},
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			ServiceAccountName: "default", SchedulerName: "default-scheduler", RestartPolicy: corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.3.7", HostIP: "192.168.0.7", QOSClass: corev1.PodQOSBurstable, StartTime: &since,
			Conditions: []corev1.PodCondition{cond("PodReadyToStartContainers"), cond(corev1.PodInitialized), cond(corev1.PodReady),
				cond(corev1.ContainersReady), cond(corev1.PodScheduled)},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Started: ptr.To(true), Image: "registry.example/web:1.2.3",
				ImageID: "registry.example/web@sha256:0123", ContainerID: "containerd://abc",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: since}}}},
		},
	}
}

// BenchmarkCachedPod reports the heap a cached pod keeps, trimmed (B/pod): 10,000 pods of 100
// Deployments on 1,000 nodes, each decoded from protobuf (as the informer does: every string a
// copy of its own) and trimmed, held as the cache holds them.
func BenchmarkCachedPod(b *testing.B) {
	const pods = 10_000
	data := make([][]byte, pods)
	for i := range data {
		pod := replicaSetPod(i)
		// 100 Deployments: a ReplicaSet's pods have its name, hash and UID.
		rs := fmt.Sprintf("web%02d-7d9f8b6c5d", i%100)
		pod.GenerateName, pod.Labels["app"], pod.OwnerReferences[0].Name = rs+"-", rs, rs
		pod.OwnerReferences[0].UID = types.UID(fmt.Sprintf("5f1d2c4e-8a7b-4c3d-9e2f-%012d", i%100))
		var err error
		if data[i], err = pod.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	trim := typed(Pod)
	var perPod float64
	for b.Loop() {
		kept := make([]*corev1.Pod, pods)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range kept {
			pod := &corev1.Pod{}
			if err := pod.Unmarshal(data[i]); err != nil {
				b.Fatal(err)
			}
			if _, err := trim(pod); err != nil {
				b.Fatal(err)
			}
			kept[i] = pod
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perPod = float64(after.HeapAlloc-before.HeapAlloc) / pods
		runtime.KeepAlive(kept)
	}
	b.ReportMetric(perPod, "B/pod")
}
