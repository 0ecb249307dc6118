// Package decidetest builds the objects of the Deployment responder's tests: Deployments (steady,
// surging, paused, scaled), their ReplicaSet, HorizontalPodAutoscalers, and pods in every state of the evacuation protocol
// (asked to leave, accepted, declined, marked, terminating, created by a surge, Ready or in
// trouble), at the fixed instant Now. The tests of internal/controller/deployment/deploymentdecide and of
// internal/controller/deployment share them.
package decidetest

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Now is the instant of the tests: the decisions' now, and what the pods' times are relative to.
var Now = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

func rolling(maxSurge intstr.IntOrString) appsv1.DeploymentStrategy {
	return appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge},
	}
}

// NewDeployment is a steady Deployment: every replica updated and available.
func NewDeployment(replicas, maxSurge int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d", Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Strategy: rolling(intstr.FromInt32(maxSurge))},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas,
			ReadyReplicas: replicas, AvailableReplicas: replicas},
	}
}

// WithStatus changes the Deployment's status with f.
func WithStatus(d *appsv1.Deployment, f func(*appsv1.DeploymentStatus)) *appsv1.Deployment {
	f(&d.Status)
	return d
}

// WithReplicas sets the Deployment's spec.replicas.
func WithReplicas(d *appsv1.Deployment, n int32) *appsv1.Deployment {
	d.Spec.Replicas = ptr.To(n)
	return d
}

// WithPaused pauses the Deployment.
func WithPaused(d *appsv1.Deployment) *appsv1.Deployment {
	d.Spec.Paused = true
	return d
}

// WithMinReady sets the Deployment's minReadySeconds.
func WithMinReady(d *appsv1.Deployment, seconds int32) *appsv1.Deployment {
	d.Spec.MinReadySeconds = seconds
	return d
}

// WithAnnotation sets an annotation of the Deployment.
func WithAnnotation(d *appsv1.Deployment, k, v string) *appsv1.Deployment {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[k] = v
	return d
}

// Surging puts a surge in progress on the Deployment, its status at the surge's generation
// (whether the surge is available, its pods say). A state that names no UID gets the
// Deployment's, as nodemaint writes it.
func Surging(d *appsv1.Deployment, s *surgepolicy.State) *appsv1.Deployment {
	if s.UID == "" {
		s.UID = d.UID
	}
	WithAnnotation(d, evacuation.SurgeAnnotation, s.String())
	if *d.Spec.Replicas == s.OriginalReplicas {
		d.Spec.Replicas = ptr.To(s.OriginalReplicas + s.Surge)
	}
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas}
	return d
}

// ReplicaSet is a ReplicaSet of the namespace "ns", its UID its name, with replicas pods.
func ReplicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.ReplicaSetStatus{Replicas: replicas},
	}
}

// Pod is a pod of the ReplicaSet "rs", Ready for an hour unless Created says otherwise.
func Pod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(Now.Add(-time.Hour)),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}},
	}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(Now.Add(-time.Hour))}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Requested adds an evacuation request made minutesAgo.
func Requested(minutesAgo int) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		evacuation.SetCondition(p, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
			Reason: evacuation.ReasonNodeMaintenance, LastTransitionTime: metav1.NewTime(Now.Add(-time.Duration(minutesAgo) * time.Minute))})
	}
}

// Accepted answers the pod's evacuation request: EvacuationInitiated=True, by surging.
func Accepted(p *corev1.Pod) {
	evacuation.SetCondition(p, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: surgepolicy.ReasonSurge})
}

// Declined declines the pod's evacuation request for reason: EvacuationInitiated=False.
func Declined(reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		evacuation.SetCondition(p, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: reason})
	}
}

// WithMark marks the pod to go first: the lowest deletion cost, its own saved.
func WithMark(p *corev1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[evacuation.OriginalDeletionCostAnnotation] = ""
	p.Annotations[corev1.PodDeletionCost] = "-2147483648"
}

// Terminating makes the pod terminating since Now.
func Terminating(p *corev1.Pod) {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(Now))
}

// Created sets the pod's creation secondsAgo: a pod not Ready yet (Since adds conditions).
func Created(secondsAgo int) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(Now.Add(-time.Duration(secondsAgo) * time.Second))
		evacuation.RemoveCondition(p, corev1.PodReady)
	}
}

// Unschedulable marks the pod as one the scheduler found no node for.
func Unschedulable(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable})
}

// OnNode binds the pod to a node.
func OnNode(p *corev1.Pod) { p.Spec.NodeName = "node-1" }

// Waiting makes the pod's container wait for reason.
func Waiting(reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}})
	}
}

// WithProgressDeadline sets the Deployment's progressDeadlineSeconds.
func WithProgressDeadline(d *appsv1.Deployment, seconds int32) *appsv1.Deployment {
	d.Spec.ProgressDeadlineSeconds = ptr.To(seconds)
	return d
}

// Since sets the pod's condition True since secondsAgo.
func Since(t corev1.PodConditionType, secondsAgo int) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		evacuation.RemoveCondition(p, t)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(Now.Add(-time.Duration(secondsAgo) * time.Second))})
	}
}

// HPA is a HorizontalPodAutoscaler of the namespace's Deployment target (apps/v1), its UID
// "hpa-" and its name, with the given bounds; a record of raised bounds (surgepolicy.Bounds) when
// rec is not nil, which gets the autoscaler's UID, and its surge the Deployment's ("d"), where
// they name none, as nodemaint writes them.
func HPA(name, target string, minReplicas, maxReplicas int32, rec *surgepolicy.Bounds) *autoscalingv2.HorizontalPodAutoscaler {
	uid := types.UID("hpa-" + name)
	if rec != nil && rec.UID == "" {
		rec.UID = uid
	}
	if rec != nil && rec.Surge != nil && rec.Surge.UID == "" {
		rec.Surge.UID = "d"
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "7", UID: uid},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			MinReplicas:    ptr.To(minReplicas), MaxReplicas: maxReplicas,
		},
	}
	if rec != nil {
		hpa.Annotations = map[string]string{evacuation.SurgeBoundsAnnotation: rec.String()}
	}
	return hpa
}

// Reporting sets the autoscaler's generation and its report of the generation it last acted on
// (status.observedGeneration) with the count it found there.
func Reporting(hpa *autoscalingv2.HorizontalPodAutoscaler, generation, observed int64, current int32) *autoscalingv2.HorizontalPodAutoscaler {
	hpa.Generation = generation
	hpa.Status.ObservedGeneration = ptr.To(observed)
	hpa.Status.CurrentReplicas = current
	return hpa
}
