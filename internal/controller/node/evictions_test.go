package node

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/controller/protocol"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/evictor"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

func ownedByReplicaSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
}

// TestEvictionRereadsThePod: a pod decided for eviction from a cache that has not seen its
// owner's answer yet (the answer came just before the response timeout ran out) is read again
// and left to its owner; a pod still unanswered is evicted. Their node does not exist and no
// maintenance selects it.
func TestEvictionRereadsThePod(t *testing.T) {
	ctx := context.Background()
	answered := createPod(t, "reread-answered", "reread-nowhere", ownedByReplicaSet)
	silent := createPod(t, "reread-silent", "reread-nowhere", ownedByReplicaSet)
	// The decision's view: both asked to leave long ago, neither answered.
	asked := corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: "NodeMaintenance", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}
	var stale []drain.Classified
	for _, pod := range []*corev1.Pod{answered, silent} {
		testutil.SetPodCondition(t, k8s, pod.Name, asked)
		seen, err := getPod(ctx, pod.Name)
		if err != nil {
			t.Fatal(err)
		}
		stale = append(stale, drain.Classified{Pod: seen})
	}
	// The owner's answer, which that view does not have.
	testutil.SetPodCondition(t, k8s, answered.Name, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Surge"})

	r := &Reconciler{Client: k8s, APIReader: k8s, Observer: &observe.Observer{Refusals: evictor.NewRefusals(time.Second, time.Second)}}
	if _, _, err := r.evictPods(ctx, stale, nil, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	expectEvicted(t, silent.Name)
	notEvicted(t, answered.Name)
	if _, _, refused := r.Observer.Refusals.Refusal(answered.UID); refused {
		t.Error("the answered pod's eviction is reported as refused")
	}
}

// TestEvictionFailureIsThePodsAlone: a pod whose eviction fails for good (two budgets select it:
// the API server answers 500) backs off and is reported on its own; the node's other pods are
// evicted, and the drain returns no error, which would put the whole node into the work queue's
// back-off.
func TestEvictionFailureIsThePodsAlone(t *testing.T) {
	ctx := context.Background()
	broken := createPod(t, "twobudgets-broken", "twobudgets-nowhere", ownedByReplicaSet, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "twobudgets"} })
	fine := createPod(t, "twobudgets-fine", "twobudgets-nowhere", ownedByReplicaSet)
	broken.Status.Phase = corev1.PodRunning
	broken.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := k8s.Status().Update(ctx, broken); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"twobudgets-a", "twobudgets-b"} {
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "twobudgets"}}},
		}
		if err := k8s.Create(ctx, pdb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), pdb) })
	}
	r := &Reconciler{Client: k8s, Recorder: events.NewFakeRecorder(10), Observer: &observe.Observer{Refusals: evictor.NewRefusals(time.Second, time.Minute)}}
	wait, _, err := r.evictPods(ctx, []drain.Classified{{Pod: broken}, {Pod: fine}}, nil, nil, time.Now())
	if err != nil {
		t.Fatalf("one pod's failed eviction returned an error for the node: %v", err)
	}
	if wait <= 0 {
		t.Errorf("no back-off for the failed eviction: %v", wait)
	}
	expectEvicted(t, fine.Name)
	notEvicted(t, broken.Name)
	if reason, msg, refused := r.Observer.Refusals.Refusal(broken.UID); !refused {
		t.Errorf("the failed eviction is not recorded; want it recorded as %s", nodemaintv1alpha1.BlockedReasonEvictionFailed)
	} else {
		if reason != nodemaintv1alpha1.BlockedReasonEvictionFailed {
			t.Errorf("the failed eviction is recorded as %q; want %s", reason, nodemaintv1alpha1.BlockedReasonEvictionFailed)
		}
		if !strings.Contains(msg, "more than one") {
			t.Errorf("the failed eviction is recorded with message %q; want the API server's (more than one)", msg)
		}
	}
}

// TestEvictionsAndDeletionsCarryTheGracePeriod: an eviction and a deletion the decision gives a
// grace period (a maintenance's evictionGracePeriodSeconds) carry it, and the pod's deletion
// grace period says so; a pod it names none for keeps its own.
func TestEvictionsAndDeletionsCarryTheGracePeriod(t *testing.T) {
	ctx := context.Background()
	own := func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45) }
	evicted := createPod(t, "grace-evicted", "grace-nowhere", ownedByReplicaSet, own)
	deleted := createPod(t, "grace-deleted", "grace-nowhere", ownedByReplicaSet, own)
	plain := createPod(t, "grace-plain", "grace-nowhere", ownedByReplicaSet, own)
	grace := map[types.UID]int64{evicted.UID: 3, deleted.UID: 4}
	r := &Reconciler{Client: k8s, Recorder: events.NewFakeRecorder(10), Observer: &observe.Observer{Refusals: evictor.NewRefusals(time.Second, time.Minute)}}
	if _, _, err := r.evictPods(ctx, []drain.Classified{{Pod: evicted}, {Pod: plain}}, grace, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := r.deletePods(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "grace-nowhere"}}, []drain.Classified{{Pod: deleted}}, grace); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{evicted.Name: 3, deleted.Name: 4, plain.Name: 45} {
		expectEvicted(t, name)
		pod, err := getPod(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if g := pod.DeletionGracePeriodSeconds; g == nil || *g != want {
			t.Errorf("%s: deletion grace period %v, want %ds", name, g, want)
		}
	}
}

// TestEvictionRereadsTheEviction: under EvictionRequests, a pod decided for eviction from a cache
// that shows its Eviction with no answer (the responder accepted just before the response timeout
// ran out, or the API server dropped the cache's watch under load and the cache is minutes
// behind) is read again with its Eviction, and left to the responder the API server shows
// active; a pod whose Eviction has no responder active is evicted.
func TestEvictionRereadsTheEviction(t *testing.T) {
	ctx := context.Background()
	const responder = "owner.example.com/responder"
	registered := func(p *corev1.Pod) {
		ownedByReplicaSet(p)
		p.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: responder, Priority: ptr.To(names.ManagingControllerPriority)}}
	}
	answered := createPod(t, "er-answered", "er-nowhere", registered)
	silent := createPod(t, "er-silent", "er-nowhere", registered)

	// The cache: nodemaint's requests, asked long ago, and the pods' Evictions as created, with
	// no responder active yet.
	stores := protocol.Stores{Requests: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{}),
		Evictions: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})}
	if err := stores.Index(); err != nil {
		t.Fatal(err)
	}
	seen := &requester.Observed{Node: "er-nowhere"}
	var stale []drain.Classified
	evs := map[string]*lifecyclev1alpha1.Eviction{}
	for _, pod := range []*corev1.Pod{answered, silent} {
		plan := requester.WritesOf(requester.Observed{Node: seen.Node}, []*corev1.Pod{pod}, []*corev1.Pod{pod}, nil, "maintenance", time.Now().Add(-time.Hour))
		req := plan.Create[0]
		if err := k8s.Create(ctx, req); err != nil {
			t.Fatal(err)
		}
		seen.Requests = append(seen.Requests, *req)
		ev := &lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "pod-1-" + pod.Name},
			Spec: lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID}}}}
		if err := k8s.Create(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if err := stores.Evictions.Add(ev.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		evs[pod.Name] = ev
		stale = append(stale, drain.Classified{Pod: pod})
	}
	// The API server: the responder is active on the answered pod's Eviction.
	ev := evs[answered.Name]
	now := metav1.Now()
	ev.Status = lifecyclev1alpha1.EvictionStatus{
		TargetResponders: []lifecyclev1alpha1.TargetResponder{
			{Name: responder, Priority: ptr.To(names.ManagingControllerPriority), State: lifecyclev1alpha1.ResponderStateActive},
			{Name: names.ImperativeEvictor, Priority: ptr.To(names.ImperativeEvictorPriority), State: lifecyclev1alpha1.ResponderStateInactive},
		},
		Responders: []lifecyclev1alpha1.ResponderStatus{{Name: responder, StartTime: &now, HeartbeatTime: &now}, {Name: names.ImperativeEvictor}},
	}
	if err := k8s.Status().Update(ctx, ev); err != nil {
		t.Fatal(err)
	}

	r := &Reconciler{Client: k8s, APIReader: k8s, Observer: &observe.Observer{
		Protocol: protocol.For(nodemaintv1alpha1.EvacuationProtocolEvictionRequest, k8s, stores), Refusals: evictor.NewRefusals(time.Second, time.Second)}}
	if _, _, err := r.evictPods(ctx, stale, nil, seen, time.Now()); err != nil {
		t.Fatal(err)
	}
	expectEvicted(t, silent.Name)
	notEvicted(t, answered.Name)
}
