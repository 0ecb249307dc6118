package cachetrim

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	if len(pod.Spec.Containers) != 0 {
		t.Errorf("containers not trimmed: %+v", pod.Spec.Containers)
	}
	if pod.Status.PodIP != "" {
		t.Errorf("podIP not trimmed: %s", pod.Status.PodIP)
	}
	if pod.ManagedFields != nil {
		t.Errorf("managedFields not trimmed: %+v", pod.ManagedFields)
	}
	if img := pod.Status.ContainerStatuses[0].Image; img != "" {
		t.Errorf("container status image not trimmed: %s", img)
	}
	if _, ok := pod.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Errorf("last-applied configuration kept")
	}
	// Kept: what the decisions read.
	if got, want := drain.ToleratesUnschedulable(pod), drain.ToleratesUnschedulable(full); got != want {
		t.Errorf("tolerates unschedulable: %v, want %v as the whole pod", got, want)
	} else if !got {
		t.Errorf("tolerates unschedulable: %v, want true", got)
	}
	if maintenance.Targeted(pod) != maintenance.Targeted(full) {
		t.Errorf("targeted differs")
	}
	if !evacuation.Requested(pod) {
		t.Errorf("request lost: %+v", pod.Status.Conditions)
	}
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s; want Running", pod.Status.Phase)
	}
	if pod.Spec.NodeName != "node-1" {
		t.Errorf("node %q; want node-1", pod.Spec.NodeName)
	}
	if len(pod.Spec.EvictionResponders) != 1 {
		t.Errorf("evictionResponders lost: %+v; want one", pod.Spec.EvictionResponders)
	} else if name := pod.Spec.EvictionResponders[0].Name; name != "example.com/checkpointer" {
		t.Errorf("evictionResponder %q; want example.com/checkpointer", name)
	}
	if len(pod.Spec.Volumes) != 2 {
		t.Errorf("volumes %+v, want the claim and the emptyDir", pod.Spec.Volumes)
	} else {
		if c := pod.Spec.Volumes[0].PersistentVolumeClaim; c == nil || c.ClaimName != "data-web-1" {
			t.Errorf("first volume %+v; want the claim data-web-1", pod.Spec.Volumes[0])
		}
		if pod.Spec.Volumes[1].EmptyDir == nil {
			t.Errorf("second volume %+v; want the emptyDir", pod.Spec.Volumes[1])
		}
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("terminationGracePeriodSeconds lost: %v", g)
	}
	if w := pod.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
		t.Errorf("waiting reason lost: %+v", pod.Status.ContainerStatuses)
	}
	for _, key := range []string{corev1.PodDeletionCost} {
		if pod.Annotations[key] != full.Annotations[key] {
			t.Errorf("annotation %s lost", key)
		}
	}
	if len(pod.OwnerReferences) != 1 {
		t.Errorf("ownerReferences lost: %+v", pod.OwnerReferences)
	}
	if len(pod.Finalizers) != 1 {
		t.Errorf("finalizers lost: %v", pod.Finalizers)
	}
	if pod.UID != "u1" {
		t.Errorf("uid %q; want u1", pod.UID)
	}
	if pod.Labels["app"] != "web" {
		t.Errorf("labels lost: %v", pod.Labels)
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
	if node.Status.Images != nil {
		t.Errorf("node images not trimmed: %+v", node.Status.Images)
	}
	if node.Status.Addresses != nil {
		t.Errorf("node addresses not trimmed: %+v", node.Status.Addresses)
	}
	// Kept: what is read.
	if !node.Spec.Unschedulable {
		t.Errorf("node unschedulable lost")
	}
	if len(node.Spec.Taints) != 1 {
		t.Errorf("node taints lost: %+v", node.Spec.Taints)
	}
	if node.Status.NodeInfo.BootID != "b1" {
		t.Errorf("node bootID %q; want b1", node.Status.NodeInfo.BootID)
	}
	if len(node.Status.Conditions) != 1 {
		t.Errorf("node conditions lost: %+v", node.Status.Conditions)
	}
	if len(node.Status.VolumesAttached) != 1 {
		t.Errorf("node volumesAttached lost: %+v", node.Status.VolumesAttached)
	}
	if got := node.Annotations["nodemaint.dev/maintenances"]; got != "a" {
		t.Errorf("node annotation nodemaint.dev/maintenances %q; want a", got)
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
	if *d.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas %d; want 3", *d.Spec.Replicas)
	}
	if d.Spec.MinReadySeconds != 5 {
		t.Errorf("Deployment minReadySeconds %d; want 5", d.Spec.MinReadySeconds)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("Deployment strategy %s; want RollingUpdate", d.Spec.Strategy.Type)
	}
	if *rs.Spec.Replicas != 3 {
		t.Errorf("ReplicaSet replicas %d; want 3", *rs.Spec.Replicas)
	}
	// Objects of another type (a tombstone) pass unchanged.
	if out, err := typed(Pod)("tombstone"); err != nil || out != "tombstone" {
		t.Errorf("tombstone: %v %v", out, err)
	}
}

// Pods of one ReplicaSet on one node share, trimmed, one instance of what they have in common,
// and keep their values: label and annotation maps, owner references, tolerations, strings.
func TestPodsShareWhatTheyHaveInCommon(t *testing.T) {
	a, b := fullPod(), fullPod()
	b.Name, b.UID = "web-2", "u2"
	// Decoded apart, equal values are distinct instances.
	b.Namespace = string([]byte(a.Namespace))
	other := fullPod()
	other.Labels = map[string]string{"app": "db"}
	wantLabels, wantRefs, wantTolerations := a.DeepCopy().Labels, a.DeepCopy().OwnerReferences, a.DeepCopy().Spec.Tolerations
	for _, p := range []*corev1.Pod{a, b, other} {
		if _, err := typed(Pod)(p); err != nil {
			t.Fatal(err)
		}
	}
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	if !same(a.Labels, b.Labels) {
		t.Errorf("labels not shared")
	}
	if !same(a.Annotations, b.Annotations) {
		t.Errorf("annotations not shared")
	}
	if !same(a.OwnerReferences, b.OwnerReferences) {
		t.Errorf("owner references not shared")
	}
	if !same(a.Spec.Tolerations, b.Spec.Tolerations) {
		t.Errorf("tolerations not shared")
	}
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Errorf("namespace not interned")
	}
	if unsafe.StringData(a.Spec.NodeName) != unsafe.StringData(b.Spec.NodeName) {
		t.Errorf("node name not interned")
	}
	if same(a.Labels, other.Labels) {
		t.Errorf("other labels %v share a's %v", other.Labels, a.Labels)
	}
	if other.Labels["app"] != "db" {
		t.Errorf("other label app=%q; want db", other.Labels["app"])
	}
	if !equality.Semantic.DeepEqual(b.Labels, wantLabels) {
		t.Errorf("labels changed: %v; want %v", b.Labels, wantLabels)
	}
	if !equality.Semantic.DeepEqual(b.OwnerReferences, wantRefs) {
		t.Errorf("owner references changed: %+v; want %+v", b.OwnerReferences, wantRefs)
	}
	if !equality.Semantic.DeepEqual(b.Spec.Tolerations, wantTolerations) {
		t.Errorf("tolerations changed: %+v; want %+v", b.Spec.Tolerations, wantTolerations)
	}
	if b.Name != "web-2" {
		t.Errorf("name changed: %q; want web-2", b.Name)
	}
	if b.UID != "u2" {
		t.Errorf("uid changed: %q; want u2", b.UID)
	}
	if len(b.Annotations) != 1 {
		t.Errorf("annotations %v, want the deletion cost alone", b.Annotations)
	}
	if got := b.Annotations[corev1.PodDeletionCost]; got != "5" {
		t.Errorf("deletion cost %q; want 5", got)
	}
	// A reader's deep copy has maps and slices of its own.
	c := a.DeepCopy()
	c.Labels["app"] = "changed"
	if b.Labels["app"] != "web" {
		t.Errorf("a copy's change reached the shared labels")
	}
}

// Conditions, appended one by one by the decoder, are kept in an array of their length.
func TestConditionsExact(t *testing.T) {
	pod := fullPod()
	pod.Status.Conditions = append(make([]corev1.PodCondition, 0, 8), pod.Status.Conditions...)
	want := slices.Clone(pod.Status.Conditions)
	Pod(pod)
	if c := pod.Status.Conditions; cap(c) != len(c) {
		t.Errorf("conditions capacity %d; want their length %d", cap(c), len(c))
	}
	if c := pod.Status.Conditions; !equality.Semantic.DeepEqual(c, want) {
		t.Errorf("conditions %+v; want %+v", c, want)
	}
}

// The conditions no controller reads are dropped, the others kept in their order, those of
// types nodemaint does not know included.
func TestUnreadConditionsDropped(t *testing.T) {
	pod := fullPod()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance},
		{Type: "example.com/Checkpointed", Status: corev1.ConditionFalse}}
	Pod(pod)
	var types []corev1.PodConditionType
	for _, c := range pod.Status.Conditions {
		types = append(types, c.Type)
	}
	want := []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.PodScheduled, evacuation.Request, "example.com/Checkpointed"}
	if !slices.Equal(types, want) {
		t.Errorf("conditions %v, want %v", types, want)
	}
	if cap(pod.Status.Conditions) != len(want) {
		t.Errorf("conditions capacity %d, want %d", cap(pod.Status.Conditions), len(want))
	}
	if !evacuation.Requested(pod) {
		t.Errorf("the evacuation request lost")
	}
}

// Of container statuses only those of waiting containers are kept.
func TestRunningContainerStatusesDropped(t *testing.T) {
	pod := fullPod()
	pod.Status.ContainerStatuses = append([]corev1.ContainerStatus{{Name: "sidecar", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}, pod.Status.ContainerStatuses...)
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
	Pod(pod)
	if len(pod.Status.InitContainerStatuses) != 0 {
		t.Errorf("init container statuses %+v; want none", pod.Status.InitContainerStatuses)
	}
	if len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v, want web waiting alone", pod.Status.ContainerStatuses)
	}
	if name := pod.Status.ContainerStatuses[0].Name; name != "web" {
		t.Errorf("container status of %q; want web", name)
	}
	if w := pod.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
		t.Errorf("container state %+v; want waiting in CrashLoopBackOff", pod.Status.ContainerStatuses[0].State)
	}
}

// The table of shared values forgets what it was not asked for over two generations: it does not
// grow with values that came and went, and what is asked for again stays shared.
func TestSharedIsBounded(t *testing.T) {
	s := newShared[*int](4)
	kept := new(int)
	if got := s.get("kept", func() *int { return kept }); got != kept {
		t.Fatal("first instance not kept")
	}
	for i := range 100 {
		s.get(strconv.Itoa(i), func() *int { return new(int) })
		if i%3 == 0 && s.get("kept", func() *int { return new(int) }) != kept {
			t.Fatalf("after %d values, the value asked for every third lost its instance", i)
		}
	}
	if n := len(s.cur) + len(s.old); n > 8 {
		t.Errorf("%d values held, want at most 8", n)
	}
	if _, ok := s.cur["0"]; ok {
		t.Errorf("an old value not forgotten")
	}
}

// Nodes share, trimmed, the strings they have in common, and keep their values.
func TestNodesShareStrings(t *testing.T) {
	node := func(name string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: string([]byte("zone-a"))}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse,
				Reason: "KubeletHasSufficientMemory", Message: string([]byte("kubelet has sufficient memory available"))}},
				NodeInfo: corev1.NodeSystemInfo{BootID: name, KubeletVersion: string([]byte("v1.37.1"))}},
		}
	}
	a, b := node("a"), node("b")
	Node(a)
	Node(b)
	if unsafe.StringData(a.Status.Conditions[0].Message) != unsafe.StringData(b.Status.Conditions[0].Message) {
		t.Errorf("condition message not shared")
	}
	if unsafe.StringData(a.Labels[corev1.LabelTopologyZone]) != unsafe.StringData(b.Labels[corev1.LabelTopologyZone]) {
		t.Errorf("zone label not shared")
	}
	if unsafe.StringData(a.Status.NodeInfo.KubeletVersion) != unsafe.StringData(b.Status.NodeInfo.KubeletVersion) {
		t.Errorf("kubelet version not shared")
	}
	if got := b.Labels[corev1.LabelHostname]; got != "b" {
		t.Errorf("hostname label %q; want b", got)
	}
	if got := b.Labels[corev1.LabelTopologyZone]; got != "zone-a" {
		t.Errorf("zone label %q; want zone-a", got)
	}
	if got := b.Status.NodeInfo.BootID; got != "b" {
		t.Errorf("boot ID %q; want b", got)
	}
	if got := b.Status.Conditions[0].Message; got != "kubelet has sufficient memory available" {
		t.Errorf("condition message %q; want kubelet has sufficient memory available", got)
	}
}

// Of claims and volumes the node controller reads the claim's volume and the volume's CSI driver
// and handle (attachedVolumes).
func TestVolumes(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "shop"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", StorageClassName: ptr.To("fast"),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Name: "data"}, PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1", VolumeAttributes: map[string]string{"a": "b"}}}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	_, _ = typed(PersistentVolumeClaim)(pvc)
	_, _ = typed(PersistentVolume)(pv)
	if pvc.Spec.VolumeName != "pv-1" {
		t.Errorf("claim's volume %q; want pv-1", pvc.Spec.VolumeName)
	}
	if pvc.Name != "data" {
		t.Errorf("claim's name %q; want data", pvc.Name)
	}
	if pvc.Spec.StorageClassName != nil {
		t.Errorf("claim's storage class %q kept; want it dropped", *pvc.Spec.StorageClassName)
	}
	if pvc.Status.Phase != "" {
		t.Errorf("claim's phase %q kept; want it dropped", pvc.Status.Phase)
	}
	if pv.Spec.CSI == nil {
		t.Errorf("volume %+v lost its CSI source", pv)
	} else {
		if pv.Spec.CSI.Driver != "ebs.csi.aws.com" {
			t.Errorf("volume's CSI driver %q; want ebs.csi.aws.com", pv.Spec.CSI.Driver)
		}
		if pv.Spec.CSI.VolumeHandle != "vol-1" {
			t.Errorf("volume's handle %q; want vol-1", pv.Spec.CSI.VolumeHandle)
		}
		if pv.Spec.CSI.VolumeAttributes != nil {
			t.Errorf("volume's attributes %v kept; want them dropped", pv.Spec.CSI.VolumeAttributes)
		}
	}
	if pv.Spec.ClaimRef != nil {
		t.Errorf("volume's claimRef %+v kept; want it dropped", pv.Spec.ClaimRef)
	}
	if pv.Name != "pv-1" {
		t.Errorf("volume's name %q; want pv-1", pv.Name)
	}
	local := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/x"}}}}
	_, _ = typed(PersistentVolume)(local)
	if local.Spec.CSI != nil {
		t.Errorf("local volume's CSI %+v; want none", local.Spec.CSI)
	}
	if local.Spec.Local != nil {
		t.Errorf("local volume's local source %+v kept; want it dropped", local.Spec.Local)
	}
	if len(Options(cache.Options{}).ByObject) != 7 {
		t.Errorf("not every trimmed kind in the cache options")
	}
}

// A large annotation map (a pod's own network status, say) is not shared: the table would keep a
// copy of it for nothing.
func TestLargeMapsNotShared(t *testing.T) {
	status := strings.Repeat("x", 2*maxShared)
	m := map[string]string{"k8s.v1.cni.cncf.io/network-status": status}
	n := len(annotationMaps.cur) + len(annotationMaps.old)
	if got := internAnnotations(m); !reflect.DeepEqual(got, m) {
		t.Errorf("annotations changed: %v", got)
	}
	if len(annotationMaps.cur)+len(annotationMaps.old) != n {
		t.Errorf("a large map entered the table")
	}
}
