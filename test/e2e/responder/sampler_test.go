package responder_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// sampler watches a Deployment and its pods, and records on every event, with no gap between
// samples: the fewest Ready pods, the most pods, the highest spec.replicas, the pods that went
// away, and when pods were first seen accepted or declined (on their conditions), or accepted
// with their marks for an Eviction (evacuation.AcceptedEvictionAnnotation: which one, and when).
// A pod counts when it is not terminating.
type sampler struct {
	mu      sync.Mutex
	changed chan struct{} // closed at every change
	synced  bool
	pods    map[string]*corev1.Pod
	d       *appsv1.Deployment

	minReady, maxLive, maxReplicas int
	gone                           map[string]bool
	accepted, declined             map[string]time.Time
	declineReasons                 map[string]string
	acceptedEviction               map[string]string
	acceptedOnPod                  map[string]time.Time
}

// watchApp starts a sampler of the pods labelled app=name and of the Deployment name, if there
// is one, stopped when the test ends.
func watchApp(t *testing.T, namespace, name string) *sampler {
	t.Helper()
	s := &sampler{
		changed: make(chan struct{}), pods: map[string]*corev1.Pod{}, minReady: 1 << 30,
		gone: map[string]bool{}, accepted: map[string]time.Time{}, declined: map[string]time.Time{},
		declineReasons: map[string]string{}, acceptedEviction: map[string]string{}, acceptedOnPod: map[string]time.Time{},
	}
	cs := framework.Cluster().Client()
	podLW := toolscache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(labels.Set{"app": name}).String()
	})
	deployLW := toolscache.NewFilteredListWatchFromClient(cs.AppsV1().RESTClient(), "deployments", namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	podInformer := toolscache.NewSharedIndexInformer(podLW, &corev1.Pod{}, 0, nil)
	deployInformer := toolscache.NewSharedIndexInformer(deployLW, &appsv1.Deployment{}, 0, nil)
	onPod := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.observePod(o.(*corev1.Pod), false) },
		UpdateFunc: func(_, o any) { s.observePod(o.(*corev1.Pod), false) },
		DeleteFunc: func(o any) {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			s.observePod(o.(*corev1.Pod), true)
		},
	}
	onDeployment := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.observeDeployment(o.(*appsv1.Deployment)) },
		UpdateFunc: func(_, o any) { s.observeDeployment(o.(*appsv1.Deployment)) },
	}
	if _, err := podInformer.AddEventHandler(onPod); err != nil {
		t.Fatal(err)
	}
	if _, err := deployInformer.AddEventHandler(onDeployment); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go podInformer.Run(ctx.Done())
	go deployInformer.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(t.Context().Done(), podInformer.HasSynced, deployInformer.HasSynced) {
		t.Fatal("sampler: caches not synced")
	}
	s.mu.Lock()
	s.synced = true
	s.sampleLocked()
	s.mu.Unlock()
	return s
}

func (s *sampler) observePod(pod *corev1.Pod, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if deleted {
		delete(s.pods, pod.Name)
	} else {
		s.pods[pod.Name] = pod
	}
	if s.synced && (deleted || !pod.DeletionTimestamp.IsZero()) {
		s.gone[pod.Name] = true
	}
	if uid := pod.Annotations[evacuation.AcceptedEvictionAnnotation]; uid != "" && !deleted && s.acceptedEviction[pod.Name] != uid {
		s.acceptedEviction[pod.Name], s.acceptedOnPod[pod.Name] = uid, time.Now()
	}
	if c := evacuation.Condition(pod, evacuation.Initiated); c != nil && !deleted {
		seen := s.accepted
		if c.Status == corev1.ConditionFalse {
			seen = s.declined
			s.declineReasons[pod.Name] = c.Reason
		}
		if _, ok := seen[pod.Name]; !ok {
			seen[pod.Name] = time.Now()
		}
	}
	s.sampleLocked()
}

func (s *sampler) observeDeployment(d *appsv1.Deployment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = d
	s.sampleLocked()
}

func (s *sampler) sampleLocked() {
	if s.synced {
		v := s.viewLocked()
		s.minReady = min(s.minReady, len(v.ready()))
		s.maxLive = max(s.maxLive, len(v.live()))
		if s.d != nil {
			s.maxReplicas = max(s.maxReplicas, int(ptr.Deref(s.d.Spec.Replicas, 1)))
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// view is a snapshot of the Deployment and its pods.
type view struct {
	d    *appsv1.Deployment
	pods []*corev1.Pod
}

func (s *sampler) viewLocked() view {
	v := view{d: s.d}
	for _, pod := range s.pods {
		v.pods = append(v.pods, pod)
	}
	sort.Slice(v.pods, func(i, j int) bool { return v.pods[i].Name < v.pods[j].Name })
	return v
}

func (s *sampler) view() view {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.viewLocked()
}

// waitFor waits until cond holds, re-evaluating it at every watch event, and fails the test
// with the last state after timeout.
func (s *sampler) waitFor(t *testing.T, timeout time.Duration, what string, cond func(v view) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		v, changed := s.viewLocked(), s.changed
		s.mu.Unlock()
		if cond(v) {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: not after %v; last seen: %s", what, timeout, v)
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		}
	}
}

// declinedWith reports whether some pod was seen declined with the reason.
func (s *sampler) declinedWith(reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.declineReasons {
		if r == reason {
			return true
		}
	}
	return false
}

// stats returns the fewest Ready pods, the most pods and the highest spec.replicas seen.
func (s *sampler) stats() (minReady, maxLive, maxReplicas int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.minReady, s.maxLive, s.maxReplicas
}

// wentAway reports which of the named pods were deleted or terminating at some point.
func (s *sampler) wentAway(names []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range names {
		if s.gone[n] {
			out = append(out, n)
		}
	}
	return out
}

// live returns the pods that are not terminating.
func (v view) live() []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range v.pods {
		if pod.DeletionTimestamp.IsZero() {
			out = append(out, pod)
		}
	}
	return out
}

func (v view) ready() []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range v.live() {
		if podutils.IsPodReady(pod) {
			out = append(out, pod)
		}
	}
	return out
}

// liveOn returns the pods that are not terminating on one of the nodes.
func (v view) liveOn(nodes ...string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range v.live() {
		if slices.Contains(nodes, pod.Spec.NodeName) {
			out = append(out, pod)
		}
	}
	return out
}

func (v view) pod(name string) *corev1.Pod {
	for _, pod := range v.pods {
		if pod.Name == name {
			return pod
		}
	}
	return nil
}

func (v view) replicas() int32 {
	if v.d == nil {
		return -1
	}
	return ptr.Deref(v.d.Spec.Replicas, 1)
}

func (v view) surging() bool {
	_, ok := v.d.Annotations[evacuation.SurgeAnnotation]
	return ok
}

// settled: spec.replicas is n with no surge in progress, n pods exist, all Ready.
func (v view) settled(n int32) bool {
	return v.d != nil && v.replicas() == n && !v.surging() && len(v.live()) == int(n) && len(v.ready()) == int(n)
}

func (v view) String() string {
	var b strings.Builder
	if v.d != nil {
		fmt.Fprintf(&b, "deployment replicas=%d available=%d annotations=%v; ", v.replicas(), v.d.Status.AvailableReplicas, nodemaintAnnotations(v.d.Annotations))
	}
	for _, pod := range v.pods {
		fmt.Fprintf(&b, "pod %s node=%s ready=%t terminating=%t request=%t initiated=%s %v; ", pod.Name, pod.Spec.NodeName, podutils.IsPodReady(pod),
			!pod.DeletionTimestamp.IsZero(), evacuation.Requested(pod), initiated(pod), nodemaintAnnotations(pod.Annotations))
	}
	return b.String()
}

func initiated(pod *corev1.Pod) string {
	c := evacuation.Condition(pod, evacuation.Initiated)
	if c == nil {
		return "-"
	}
	return string(c.Status) + "/" + c.Reason
}

func nodemaintAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if strings.Contains(k, "nodemaint.dev/") || k == corev1.PodDeletionCost {
			out[k] = v
		}
	}
	return out
}
