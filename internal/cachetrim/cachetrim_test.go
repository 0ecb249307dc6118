package cachetrim

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// fullPod is a pod as the API server serves it, with the fields no controller reads.
func fullPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "u1", Labels: map[string]string{"app": "web"},
			Annotations:     map[string]string{corev1.PodDeletionCost: "5", corev1.LastAppliedConfigAnnotation: `{"big":"json"}`},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-x", UID: "rs", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
			Finalizers:      []string{"example.com/keep"},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1", Command: []string{"/web"},
				Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-1"}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			EvictionResponders:            []corev1.EvictionResponder{{Name: "example.com/checkpointer", Priority: ptr.To[int32](200)}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "192.168.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Image: "registry.example/web:1", ImageID: "sha256:x",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m"}}}},
		},
	}
}

func TestPodKeepsWhatControllersRead(t *testing.T) {
	full := fullPod()
	pod := full.DeepCopy()
	if _, err := typed(Pod)(pod); err != nil {
		t.Fatal(err)
	}
	// Dropped.
	if len(pod.Spec.Containers) != 0 || pod.Status.PodIP != "" || pod.ManagedFields != nil || pod.Status.ContainerStatuses[0].Image != "" {
		t.Errorf("not trimmed: %+v", pod)
	}
	if _, ok := pod.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Errorf("last-applied configuration kept")
	}
	// Kept: what the decisions read.
	if got, want := drain.ToleratesUnschedulable(pod), drain.ToleratesUnschedulable(full); got != want || !got {
		t.Errorf("tolerates unschedulable: %v, want %v", got, want)
	}
	if maintenance.Targeted(pod) != maintenance.Targeted(full) {
		t.Errorf("targeted differs")
	}
	if !evacuation.Requested(pod) || pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName != "node-1" {
		t.Errorf("request, phase or node lost: %+v", pod.Status)
	}
	if len(pod.Spec.EvictionResponders) != 1 || pod.Spec.EvictionResponders[0].Name != "example.com/checkpointer" {
		t.Errorf("evictionResponders lost: %+v", pod.Spec.EvictionResponders)
	}
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-web-1" {
		t.Errorf("volumes %+v, want the claim alone", pod.Spec.Volumes)
	}
	if w := pod.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
		t.Errorf("waiting reason lost: %+v", pod.Status.ContainerStatuses)
	}
	for _, key := range []string{corev1.PodDeletionCost} {
		if pod.Annotations[key] != full.Annotations[key] {
			t.Errorf("annotation %s lost", key)
		}
	}
	if len(pod.OwnerReferences) != 1 || len(pod.Finalizers) != 1 || pod.UID != "u1" || pod.Labels["app"] != "web" {
		t.Errorf("metadata lost: %+v", pod.ObjectMeta)
	}
	// A patch computed from two trimmed copies sends only what changed.
	changed := pod.DeepCopy()
	changed.Annotations[corev1.PodDeletionCost] = "-2147483648"
	patch, err := client.MergeFrom(pod).Data(changed)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(patch), `{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"-2147483648"}}}`; got != want {
		t.Errorf("patch %s, want %s", got, want)
	}
	// Trimmed, the pod is smaller: what the cache saves.
	before, _ := json.Marshal(full)
	after, _ := json.Marshal(pod)
	if len(after) >= len(before) {
		t.Errorf("trimmed %d bytes, whole %d", len(after), len(before))
	}
}

func TestNodeDeploymentReplicaSet(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{"nodemaint.dev/maintenances": "a"}},
		Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo:        corev1.NodeSystemInfo{BootID: "b1"},
			Images:          []corev1.ContainerImage{{Names: []string{"registry.example/web:1"}, SizeBytes: 1}},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}},
			VolumesAttached: []corev1.AttachedVolume{{Name: "kubernetes.io/csi/x^y"}},
		},
	}
	if _, err := typed(Node)(node); err != nil {
		t.Fatal(err)
	}
	if node.Status.Images != nil || node.Status.Addresses != nil {
		t.Errorf("node not trimmed: %+v", node.Status)
	}
	if !node.Spec.Unschedulable || len(node.Spec.Taints) != 1 || node.Status.NodeInfo.BootID != "b1" ||
		len(node.Status.Conditions) != 1 || len(node.Status.VolumesAttached) != 1 || node.Annotations["nodemaint.dev/maintenances"] != "a" {
		t.Errorf("node lost what is read: %+v", node)
	}

	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "x"}}}}
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: tmpl, MinReadySeconds: 5,
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}}}
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Template: tmpl}}
	_, _ = typed(Deployment)(d)
	_, _ = typed(ReplicaSet)(rs)
	if len(d.Spec.Template.Spec.Containers)+len(rs.Spec.Template.Spec.Containers) != 0 {
		t.Errorf("templates kept")
	}
	if *d.Spec.Replicas != 3 || d.Spec.MinReadySeconds != 5 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || *rs.Spec.Replicas != 3 {
		t.Errorf("spec lost: %+v %+v", d.Spec, rs.Spec)
	}
	// Objects of another type (a tombstone) pass unchanged.
	if out, err := typed(Pod)("tombstone"); err != nil || out != "tombstone" {
		t.Errorf("tombstone: %v %v", out, err)
	}
}
