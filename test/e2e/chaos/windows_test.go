package chaos_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// A window is a moment the controller is in the middle of a sequence of writes, where a crash
// would leave the most half-done: the driver kills the leader right after it sees one open.
type window string

const (
	// windowSurge: the Deployment responder wrote its surge record (nodemaint.dev/evacuation-surge
	// appears on a Deployment); its replacement pods do not exist yet.
	windowSurge window = "mid-surge"
	// windowRequest: a pod nobody answers for (a StatefulSet's, a Job's, a bare pod) got
	// nodemaint's EvacuationRequest; it is evicted once the response timeout runs out.
	windowRequest window = "request-before-eviction"
	// windowEviction: a pod nobody answers for was evicted (it carries nodemaint's
	// EvacuationRequest and a deletionTimestamp): the eviction sequence started. While the leader is
	// killed every few seconds this window never opens (the response timeout counts from the
	// leader's takeover), so the driver aims at it once, after the others.
	windowEviction window = "eviction-started"
	// windowStatus: the status of a NodeMaintenance was written.
	windowStatus window = "status-write"
	// windowRandom: no window, a kill at a random moment.
	windowRandom window = "random"
)

// aimedWindows are the windows the driver takes turns aiming at, random ones included.
var aimedWindows = []window{windowSurge, windowRequest, windowStatus, windowRandom}

// windows watches for windows opening, with informers of its own.
type windows struct {
	opened map[window]chan string
	// openNow returns a window that is open at this moment ("" when none is): the request and
	// surge windows last, the status write is a moment.
	openNow map[window]func() string
}

// watchWindows starts watching the namespace's pods and Deployments and every NodeMaintenance
// until ctx ends.
func watchWindows(ctx context.Context, config *rest.Config, ns string) (*windows, error) {
	w := &windows{opened: map[window]chan string{}, openNow: map[window]func() string{}}
	for _, win := range append(slices.Clone(aimedWindows), windowEviction) {
		w.opened[win] = make(chan string, 1)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	typed := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	untyped := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	handlers := []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{
		{typed.Apps().V1().Deployments().Informer(), cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*appsv1.Deployment), newObj.(*appsv1.Deployment)
			if v, ok := n.Annotations[evacuation.SurgeAnnotation]; ok && v != o.Annotations[evacuation.SurgeAnnotation] {
				w.open(windowSurge, "Deployment "+n.Name+" surge "+v)
			}
		}}},
		{typed.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
			if ours(n) && !ours(o) && !answered(n) {
				w.open(windowRequest, fmt.Sprintf("pod %s (%s) requested to leave %s", n.Name, ownerKind(n), n.Spec.NodeName))
			}
			if ours(n) && !answered(n) && n.DeletionTimestamp != nil && o.DeletionTimestamp == nil {
				w.open(windowEviction, fmt.Sprintf("pod %s (%s) evicted from %s", n.Name, ownerKind(n), n.Spec.NodeName))
			}
		}}},
		{untyped.ForResource(nodemaintv1alpha1.GroupVersion.WithResource("nodemaintenances")).Informer(), cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*unstructured.Unstructured), newObj.(*unstructured.Unstructured)
			if !reflect.DeepEqual(o.Object["status"], n.Object["status"]) {
				phase, _, _ := unstructured.NestedString(n.Object, "status", "phase")
				w.open(windowStatus, fmt.Sprintf("NodeMaintenance %s status written (phase %s)", n.GetName(), phase))
			}
		}}},
	}
	pods, deployments := typed.Core().V1().Pods().Informer().GetStore(), typed.Apps().V1().Deployments().Informer().GetStore()
	w.openNow[windowRequest] = func() string {
		for _, obj := range pods.List() {
			if pod := obj.(*corev1.Pod); ours(pod) && !answered(pod) && pod.DeletionTimestamp == nil {
				since := evacuation.Condition(pod, evacuation.Request).LastTransitionTime
				return fmt.Sprintf("pod %s (%s) requested to leave %s %v ago, not evicted yet",
					pod.Name, ownerKind(pod), pod.Spec.NodeName, time.Since(since.Time).Round(time.Second))
			}
		}
		return ""
	}
	w.openNow[windowSurge] = func() string {
		for _, obj := range deployments.List() {
			d := obj.(*appsv1.Deployment)
			if v, ok := d.Annotations[evacuation.SurgeAnnotation]; ok && d.Status.AvailableReplicas < ptr.Deref(d.Spec.Replicas, 1) {
				return fmt.Sprintf("Deployment %s surge %s, %d of %d replicas available", d.Name, v, d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1))
			}
		}
		return ""
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.handler); err != nil {
			return nil, err
		}
	}
	typed.Start(ctx.Done())
	untyped.Start(ctx.Done())
	typed.WaitForCacheSync(ctx.Done())
	untyped.WaitForCacheSync(ctx.Done())
	return w, nil
}

// open tells a driver waiting for the window, if any, that it opened.
func (w *windows) open(win window, what string) {
	select {
	case w.opened[win] <- what:
	default:
	}
}

// wait returns at once when win is open now, else forgets what opened before and waits until
// win opens again, at most timeout; it returns what opened, "" when nothing did.
func (w *windows) wait(ctx context.Context, win window, timeout time.Duration) string {
	if open := w.openNow[win]; open != nil {
		if what := open(); what != "" {
			return what
		}
	}
	ch := w.opened[win]
	select {
	case <-ch:
	default:
	}
	select {
	case what := <-ch:
		return what
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	return ""
}

// ours reports whether the pod carries nodemaint's EvacuationRequest.
func ours(pod *corev1.Pod) bool {
	c := evacuation.Condition(pod, evacuation.Request)
	return c != nil && c.Status == corev1.ConditionTrue && c.Reason == evacuation.ReasonNodeMaintenance
}

// answered reports whether an owner answers for the pod: a Deployment's, through the
// Deployment responder.
func answered(pod *corev1.Pod) bool { return ownerKind(pod) == "ReplicaSet" }

func ownerKind(pod *corev1.Pod) string {
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.Kind
		}
	}
	return "bare"
}
