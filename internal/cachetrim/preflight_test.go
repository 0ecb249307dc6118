package cachetrim_test

import (
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/cachetrim"
	"github.com/nodemaint/nodemaint/internal/drainpreflight"
)

// TestPreflightOfTrimmedObjects: the controller computes the preflight from its cache, so what
// the cache keeps must let it report exactly what the objects as the API server serves them
// would: requests of containers, sidecars and init containers, overhead and pod-level requests,
// node selectors and required node affinity, tolerations, emptyDirs, the node affinity of a bound
// local volume, nodes' allocatable, taints and cordons, Deployments, ReplicaSets, autoscalers,
// budgets. Every target alone, in a rollout of 2, and all at once.
func TestPreflightOfTrimmedObjects(t *testing.T) {
	whole := preflightCluster()
	trimmed := preflightCluster()
	for i := range trimmed.Nodes {
		cachetrim.Node(&trimmed.Nodes[i])
	}
	for i := range trimmed.Pods {
		cachetrim.Pod(&trimmed.Pods[i])
	}
	for i := range trimmed.Deployments {
		cachetrim.Deployment(&trimmed.Deployments[i])
	}
	for i := range trimmed.ReplicaSets {
		cachetrim.ReplicaSet(&trimmed.ReplicaSets[i])
	}
	for i := range trimmed.HorizontalPodAutoscalers {
		cachetrim.HorizontalPodAutoscaler(&trimmed.HorizontalPodAutoscalers[i])
	}
	for i := range trimmed.PersistentVolumeClaims {
		cachetrim.PersistentVolumeClaim(&trimmed.PersistentVolumeClaims[i])
	}
	for i := range trimmed.PersistentVolumes {
		cachetrim.PersistentVolume(&trimmed.PersistentVolumes[i])
	}
	if reflect.DeepEqual(whole.Pods, trimmed.Pods) {
		t.Error("no pod trimmed")
	}
	if reflect.DeepEqual(whole.Nodes, trimmed.Nodes) {
		t.Error("no node trimmed")
	}
	if t.Failed() {
		t.FailNow()
	}
	var all []string
	for _, n := range whole.Nodes {
		all = append(all, n.Name)
	}
	for _, spec := range []drainpreflight.Spec{{Targets: all[:1]}, {Targets: all[1:2]}, {Targets: all[2:3]}, {Targets: all, MaxUnavailable: 2}, {Targets: all}} {
		w, tr := whole, trimmed
		w.Targets, w.MaxUnavailable = spec.Targets, spec.MaxUnavailable
		tr.Targets, tr.MaxUnavailable = spec.Targets, spec.MaxUnavailable
		want, got := drainpreflight.Run(w), drainpreflight.Run(tr)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v, %d at once: trimmed\n%+v\nwhole\n%+v", spec.Targets, spec.MaxUnavailable, got, want)
		}
		findings := 0
		for _, n := range want.Nodes {
			findings += len(n.Findings)
		}
		if findings == 0 {
			t.Errorf("%v: nothing found, nothing compared", spec.Targets)
		}
	}
}

// preflightCluster is four nodes of different sizes, taints and zones, and pods that ask for
// them in every way the preflight reads.
func preflightCluster() drainpreflight.Input {
	q := resource.MustParse
	node := func(name, zone, cpu, memory string, mutate ...func(*corev1.Node)) corev1.Node {
		alloc := corev1.ResourceList{corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(memory), corev1.ResourcePods: q("110"), "example.com/gpu": q("1")}
		n := corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zone},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
			Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc.DeepCopy(), Images: []corev1.ContainerImage{{Names: []string{"x"}}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		}
		for _, m := range mutate {
			m(&n)
		}
		return n
	}
	in := drainpreflight.Input{
		NamespaceLabels: map[string]map[string]string{"shop": {}},
		Nodes: []corev1.Node{
			node("a", "z1", "4", "16Gi"),
			node("b", "z1", "2", "8Gi"),
			node("c", "z2", "8", "32Gi", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
			}),
			node("d", "z2", "4", "16Gi", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		},
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	container := func(cpu, memory string) corev1.Container {
		c := corev1.Container{Name: "app", Image: "registry.example/app:1", Command: []string{"/app"}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("8")}}}
		if cpu != "" {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(memory)}
		}
		return c
	}
	owned := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(kind + "-" + name), Controller: ptr.To(true)}}
	}
	pod := func(name, node string, refs []metav1.OwnerReference, spec corev1.PodSpec) corev1.Pod {
		spec.NodeName = node
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name), Labels: map[string]string{"app": name[:len(name)-2]},
			OwnerReferences: refs, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}, Spec: spec, Status: running}
	}
	always := corev1.ContainerRestartPolicyAlways
	in.Pods = []corev1.Pod{
		// A Deployment's pods that need 3 CPUs: they fit on a alone.
		pod("web-0", "b", owned("ReplicaSet", "web-rs"), corev1.PodSpec{Containers: []corev1.Container{container("1500m", "1Gi"), container("1500m", "1Gi")}}),
		pod("web-1", "a", owned("ReplicaSet", "web-rs"), corev1.PodSpec{Containers: []corev1.Container{container("1500m", "1Gi"), container("1500m", "1Gi")}}),
		// A sidecar (restartable init container) and an init container larger than the rest.
		pod("side-0", "a", owned("StatefulSet", "side"), corev1.PodSpec{Containers: []corev1.Container{container("500m", "1Gi")},
			InitContainers: []corev1.Container{func() corev1.Container { c := container("1", "1Gi"); c.RestartPolicy = &always; return c }(), container("3", "1Gi")}}),
		// Overhead and pod-level requests: 8 CPUs, which c (8, 100m taken) does not have.
		pod("vm-0", "b", owned("StatefulSet", "vm"), corev1.PodSpec{Containers: []corev1.Container{container("", "")}, Overhead: corev1.ResourceList{corev1.ResourceCPU: q("3")},
			Resources:   &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("5"), corev1.ResourceMemory: q("2Gi")}},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}}),
		// An extended resource only a, b, c have one of: taken on a.
		pod("gpu-0", "a", owned("StatefulSet", "gpu"), corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"example.com/gpu": q("1")}, Limits: corev1.ResourceList{"example.com/gpu": q("1")}}}}}),
		// A node selector, a required node affinity (and a preferred one, not read), tolerations.
		pod("z2-0", "c", owned("StatefulSet", "z2"), corev1.PodSpec{Containers: []corev1.Container{container("100m", "100Mi")},
			NodeSelector: map[string]string{corev1.LabelTopologyZone: "z2"},
			Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}}),
		pod("pinned-0", "a", owned("StatefulSet", "pinned"), corev1.PodSpec{Containers: []corev1.Container{container("100m", "100Mi")},
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "d"}}}}}},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}}}},
				},
				PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname}}},
			}}),
		// An emptyDir, a bound local volume, a tolerated cordon (skipped), a bare pod.
		pod("cache-0", "b", owned("ReplicaSet", "cache-rs"), corev1.PodSpec{Containers: []corev1.Container{container("100m", "100Mi")},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(q("1Gi"))}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}}),
		pod("local-0", "a", owned("StatefulSet", "local"), corev1.PodSpec{Containers: []corev1.Container{container("100m", "100Mi")},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-local-0"}}}}}),
		pod("agent-0", "a", owned("ReplicaSet", "web-rs"), corev1.PodSpec{Containers: []corev1.Container{container("100m", "100Mi")},
			Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}),
		pod("bare-0", "b", nil, corev1.PodSpec{Containers: []corev1.Container{container("100m", "100Mi")}}),
	}
	in.PersistentVolumeClaims = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-local-0"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "local-a", StorageClassName: ptr.To("local")}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}}
	in.PersistentVolumes = []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "local-a"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disk"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}}}
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container("1500m", "1Gi")}}}
	for _, name := range []string{"web", "cache"} {
		d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("Deployment-" + name)},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: tmpl, Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1))}}},
			Status: appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2}}
		rs := appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-rs", UID: types.UID("ReplicaSet-" + name + "-rs"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Template: tmpl}, Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2}}
		in.Deployments, in.ReplicaSets = append(in.Deployments, d), append(in.ReplicaSets, rs)
	}
	in.HorizontalPodAutoscalers = []autoscalingv2.HorizontalPodAutoscaler{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "cache"},
			MinReplicas: ptr.To[int32](2), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType}}},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 2}}}
	for i, app := range []string{"side", "pinned"} {
		in.PodDisruptionBudgets = append(in.PodDisruptionBudgets, policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprint(app, "-pdb")},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: int32(i), CurrentHealthy: 1, DesiredHealthy: 1}})
	}
	return in
}
