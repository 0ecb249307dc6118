// Package cachetrim keeps in nodemaint-controller's informer caches only what its controllers
// read. On a cluster of 5,000 nodes and 50,000 pods the caches are most of the controller's
// memory, and most of a cached pod is what no controller here reads: its containers (images,
// commands, environment, probes), the containers' statuses, IPs; most of a cached Deployment or
// ReplicaSet is its pod template. The transforms run as objects enter the cache (before they are
// stored or handed to event handlers), so a trimmed field is absent for every reader of the
// cache, and for the patches computed from cached objects: a merge patch is the difference
// between two copies of the same trimmed object, so a field absent from both is never sent.
//
// What the controllers read, and so what is kept:
//   - Pod: metadata (without managed fields and kubectl's last-applied configuration);
//     spec.nodeName, tolerations, volumes' persistentVolumeClaim claim names, evictionResponders
//     and schedulingGroup (the Eviction controller's, KEP-4563); status.phase,
//     conditions but the kubelet's ContainersReady and PodReadyToStartContainers, and of the
//     containers waiting their names and reasons (the Deployment responder's "replacement
//     failing to start"). For the preflight of Planning maintenances: what the pod asks of a
//     node as the scheduler adds it up (each container's and init container's name and
//     requests, an init container's restart policy, the overhead, pod-level requests; no
//     containers at all when none requests anything), its node selector and required node
//     affinity, and which volumes are emptyDirs. What pods share (namespace, labels, owner
//     references, tolerations, conditions' types and reasons, the requested containers, node
//     selectors and affinities, volumes without claims) is interned: see intern.go.
//   - Node: metadata, spec; status.conditions, nodeInfo, volumesAttached, allocatable (interned).
//   - Deployment and ReplicaSet: metadata, spec without the pod template (replicas, selector,
//     strategy, minReadySeconds, paused, ...), status.
//   - PersistentVolumeClaim: metadata, spec.volumeName; PersistentVolume: metadata, the CSI
//     driver and volume handle (the node controller's volumes still attached), the node
//     affinity (the preflight's).
//   - HorizontalPodAutoscaler: metadata, spec.scaleTargetRef, minReplicas and maxReplicas (the
//     Deployment responder raises the bounds of a surging Deployment's autoscaler, and restores
//     them; the preflight counts a Deployment's autoscalers).
//
// PodDisruptionBudgets, namespaces and DrainRules are kept whole but for their managed fields
// and last-applied configuration. EvictionRequests and Evictions too, but for the managed fields
// entries of kube-controller-manager's Eviction controllers (evictiondecide.InTreeManager: their
// manager, operation and time, not their fields), from which nodemaint's Eviction controller tells
// that the in-tree one answers. The list is checked by TestPodKeepsWhatControllersRead, and
// TestPreflightOfTrimmedObjects checks that a preflight of trimmed objects reports exactly as
// one of the objects as the API server serves them.
package cachetrim

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
)

// lastApplied is kubectl's client-side apply annotation: a copy of the whole object as applied.
const lastApplied = corev1.LastAppliedConfigAnnotation

// Options sets the cache's transforms: managed fields and kubectl's last-applied configuration
// dropped from every object, and the kinds above trimmed.
func Options(o cache.Options) cache.Options {
	o.DefaultTransform = Metadata
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	for obj, t := range map[client.Object]func(any) (any, error){
		&corev1.Pod{}:        typed(Pod),
		&corev1.Node{}:       typed(Node),
		&appsv1.Deployment{}: typed(Deployment),
		&appsv1.ReplicaSet{}: typed(ReplicaSet),
		// Read by the preflight, and once a maintenance drains pods with volumes.
		&corev1.PersistentVolumeClaim{}:          typed(PersistentVolumeClaim),
		&corev1.PersistentVolume{}:               typed(PersistentVolume),
		&autoscalingv2.HorizontalPodAutoscaler{}: typed(HorizontalPodAutoscaler),
	} {
		by := o.ByObject[obj]
		by.Transform = t
		o.ByObject[obj] = by
	}
	return o
}

// typed makes a cache transform of a trim function: objects of another type (a tombstone) pass
// unchanged.
func typed[T any](trim func(T)) func(any) (any, error) {
	return func(in any) (any, error) {
		if obj, ok := in.(T); ok {
			if m, err := meta.Accessor(obj); err == nil {
				trimMetadata(m)
			}
			trim(obj)
		}
		return in, nil
	}
}

// Metadata drops managed fields and kubectl's last-applied configuration; of an EvictionRequest
// or an Eviction, it keeps the entries of the in-tree Eviction controllers (inTreeWrites).
func Metadata(in any) (any, error) {
	if m, err := meta.Accessor(in); err == nil {
		kept := inTreeWrites(in, m.GetManagedFields())
		trimMetadata(m)
		if kept != nil {
			m.SetManagedFields(kept)
		}
	}
	return in, nil
}

// inTreeWrites are the managed fields entries of kube-controller-manager's Eviction controllers
// of an EvictionRequest or an Eviction, without their fields; nil for other objects.
func inTreeWrites(in any, managed []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	switch in.(type) {
	case *lifecyclev1alpha1.EvictionRequest, *lifecyclev1alpha1.Eviction:
	default:
		return nil
	}
	var kept []metav1.ManagedFieldsEntry
	for _, m := range managed {
		if evictiondecide.InTreeManager([]metav1.ManagedFieldsEntry{m}) != "" {
			m.FieldsV1 = nil
			kept = append(kept, m)
		}
	}
	return kept
}

func trimMetadata(m interface {
	SetManagedFields([]metav1.ManagedFieldsEntry)
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}) {
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[lastApplied]; ok {
			delete(a, lastApplied)
			m.SetAnnotations(a)
		}
	}
}

// Pod keeps of a pod what the controllers read (see the package comment).
func Pod(pod *corev1.Pod) {
	internMetadata(&pod.ObjectMeta)
	spec := &pod.Spec
	pod.Spec = corev1.PodSpec{
		NodeName:    str(spec.NodeName),
		Tolerations: internTolerations(spec.Tolerations),
		Volumes:     internVolumes(spec.Volumes),
		// The Eviction controller's (KEP-4563): the pod's responders, and whether it belongs to
		// a scheduling group (which the API does not evict).
		EvictionResponders: spec.EvictionResponders,
		SchedulingGroup:    spec.SchedulingGroup,
		// The preflight's: what the pod asks of a node (the requests of its containers, its
		// overhead and pod-level requests) and which nodes it may go to.
		Containers:     internContainers(spec.Containers, false),
		InitContainers: internContainers(spec.InitContainers, true),
		Overhead:       spec.Overhead,
		Resources:      podRequests(spec.Resources),
		NodeSelector:   internNodeSelector(spec.NodeSelector),
		Affinity:       internAffinity(spec.Affinity),
		// The drain's: a maintenance's evictionGracePeriodSeconds is compared with the pod's own.
		TerminationGracePeriodSeconds: internGracePeriod(spec.TerminationGracePeriodSeconds),
	}
	pod.Status.Conditions = exact(slices.DeleteFunc(pod.Status.Conditions, unreadCondition))
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		c.Type, c.Status, c.Reason = corev1.PodConditionType(str(string(c.Type))), corev1.ConditionStatus(str(string(c.Status))), str(c.Reason)
	}
	pod.Status = corev1.PodStatus{
		Phase:                 corev1.PodPhase(str(string(pod.Status.Phase))),
		Conditions:            pod.Status.Conditions,
		InitContainerStatuses: waiting(pod.Status.InitContainerStatuses),
		ContainerStatuses:     waiting(pod.Status.ContainerStatuses),
	}
}

// unreadCondition reports whether no controller reads a pod condition: the kubelet's
// ContainersReady (Ready says what the controllers ask) and PodReadyToStartContainers. Two of a
// running pod's five conditions, 256 bytes of each cached pod (its conditions in 384 bytes where
// 640 held them). Every other type is kept, those nodemaint does not know included (an
// evacuation requester's or responder's own). The pods' conditions are written by strategic
// merge patches that name one condition (merged by type), never from a cached list.
func unreadCondition(c corev1.PodCondition) bool {
	return c.Type == corev1.ContainersReady || c.Type == corev1.PodReadyToStartContainers
}

// waiting keeps of container statuses those of the containers waiting: their names and reasons.
// The statuses of running and terminated containers (most pods' only ones) are not read.
func waiting(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, s := range statuses {
		if w := s.State.Waiting; w != nil {
			out = append(out, corev1.ContainerStatus{Name: str(s.Name), State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: str(w.Reason)},
			}})
		}
	}
	return out
}

// internMetadata shares what a pod's metadata has in common with other pods': namespace,
// generateName, labels, annotations (those of the pod template), owner references, finalizers.
func internMetadata(m *metav1.ObjectMeta) {
	m.Namespace, m.GenerateName = str(m.Namespace), str(m.GenerateName)
	m.Labels = internLabels(m.Labels)
	m.OwnerReferences = internOwnerReferences(m.OwnerReferences)
	for i, f := range m.Finalizers {
		m.Finalizers[i] = str(f)
	}
	m.Annotations = internAnnotations(m.Annotations)
}

// Node keeps of a node what the controllers read (see the package comment).
func Node(node *corev1.Node) {
	node.Status = corev1.NodeStatus{
		Conditions:      exact(node.Status.Conditions),
		NodeInfo:        node.Status.NodeInfo,
		VolumesAttached: node.Status.VolumesAttached,
		Allocatable:     internResources(node.Status.Allocatable),
	}
	internNode(node)
}

// internNode shares the strings nodes have in common: label and annotation keys, most label
// values (zone, instance type, architecture), the conditions' types, reasons and messages
// ("kubelet has sufficient memory available"), taints, the versions of nodeInfo.
func internNode(node *corev1.Node) {
	node.Labels, node.Annotations = internStrings(node.Labels), internKeys(node.Annotations)
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		t.Key, t.Value, t.Effect = str(t.Key), str(t.Value), corev1.TaintEffect(str(string(t.Effect)))
	}
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		c.Type, c.Status = corev1.NodeConditionType(str(string(c.Type))), corev1.ConditionStatus(str(string(c.Status)))
		c.Reason, c.Message = str(c.Reason), str(c.Message)
	}
	info := &node.Status.NodeInfo
	// (KubeProxyVersion, deprecated, is empty from kubelets of 1.31 on.)
	for _, s := range []*string{&info.KernelVersion, &info.OSImage, &info.ContainerRuntimeVersion, &info.KubeletVersion,
		&info.OperatingSystem, &info.Architecture} {
		*s = str(*s)
	}
}

// Deployment drops a Deployment's pod template.
func Deployment(d *appsv1.Deployment) { d.Spec.Template = corev1.PodTemplateSpec{} }

// ReplicaSet drops a ReplicaSet's pod template.
func ReplicaSet(rs *appsv1.ReplicaSet) { rs.Spec.Template = corev1.PodTemplateSpec{} }

// PersistentVolumeClaim keeps of a claim its metadata and the name of its volume.
func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	pvc.Spec = corev1.PersistentVolumeClaimSpec{VolumeName: pvc.Spec.VolumeName}
	pvc.Status = corev1.PersistentVolumeClaimStatus{}
}

// PersistentVolume keeps of a volume its metadata, of a CSI volume its driver and handle, and
// its node affinity (which nodes a pod using it may go to).
func PersistentVolume(pv *corev1.PersistentVolume) {
	var csi *corev1.CSIPersistentVolumeSource
	if c := pv.Spec.CSI; c != nil {
		csi = &corev1.CSIPersistentVolumeSource{Driver: c.Driver, VolumeHandle: c.VolumeHandle}
	}
	pv.Spec = corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: csi}, NodeAffinity: pv.Spec.NodeAffinity}
	pv.Status = corev1.PersistentVolumeStatus{}
}

// HorizontalPodAutoscaler keeps of an autoscaler its metadata, what it scales, its bounds, and
// the generation it last acted on with the count it found (whether it saw restored bounds).
func HorizontalPodAutoscaler(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	hpa.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: hpa.Spec.ScaleTargetRef,
		MinReplicas: hpa.Spec.MinReplicas, MaxReplicas: hpa.Spec.MaxReplicas}
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{ObservedGeneration: hpa.Status.ObservedGeneration,
		CurrentReplicas: hpa.Status.CurrentReplicas}
}

// exact returns s in an array of its length: the decoder appends conditions one by one, and a
// pod's five (120 bytes each) end in an array of eight, 1,024 bytes where 640 hold them.
func exact[S ~[]E, E any](s S) S {
	if cap(s) == len(s) {
		return s
	}
	return slices.Clone(s)
}
