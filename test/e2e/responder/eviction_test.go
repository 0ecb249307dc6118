package responder_test

// The Deployment responder and the example responder on KEP-4563's EvictionRequest API. These
// tests run on a cluster that serves lifecycle.k8s.io/v1alpha1 (EVICTION_REQUEST_API=true) and are
// skipped on others; nodemaint-controller then drains through EvictionRequests and runs the
// Eviction controller (--evacuation-protocol auto).

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// exampleResponder is examples/responder's name in spec.evictionResponders.
const exampleResponder = "example.nodemaint.dev/checkpoint"

// TestEvictionSingleReplicaWithStrictPDB: on the EvictionRequest API, the single-replica
// Deployment behind a minAvailable 1 budget moves off the drained node with a Ready pod at every
// moment: its pod was registered with the Deployment responder at creation, the responder was the
// active responder on the pod's Eviction, surged, and accepted with one write of the pod (its
// mark and the Eviction's UID), writing the Eviction only for a heartbeat due (every
// evacuation.HeartbeatInterval from its startTime), keeping its turn until the pod was gone; the
// imperative evictor never had a turn, and the pod's conditions were not used.
func TestEvictionSingleReplicaWithStrictPDB(t *testing.T) {
	requireEvictionAPI(t)
	c := startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	evictions := watchEvictions(t, ns)
	s := moveStrictSingleReplica(t, ns, intstr.FromString("25%"), "5s")
	minReady, maxLive, maxReplicas := s.stats()
	t.Logf("Ready pods never below %d, at most %d pods, spec.replicas at most %d", minReady, maxLive, maxReplicas)
	if minReady < 1 {
		t.Errorf("Ready pods down to %d, want at least 1 throughout", minReady)
	}
	if maxLive > 2 {
		t.Errorf("%d pods at once, want at most 2", maxLive)
	}
	if maxReplicas != 2 {
		t.Errorf("spec.replicas up to %d, want a surge to 2", maxReplicas)
	}
	old := onlyTarget(t, evictions)
	if got := evictions.activeOrder(old); !slices.Equal(got, []string{deployment.EvictionResponder}) {
		t.Errorf("responders active on %s's Eviction, in order: %v; want only the Deployment responder", old, got)
	}
	s.mu.Lock()
	_, accepted := s.accepted[old]
	acceptedEviction := s.acceptedEviction[old]
	s.mu.Unlock()
	uid := evictions.eviction(old)
	if uid == "" {
		t.Errorf("pod %s: no Eviction seen", old)
	}
	if acceptedEviction != string(uid) {
		t.Errorf("pod %s was accepted with its marks for Eviction %q; want its Eviction %q", old, acceptedEviction, uid)
	}
	st := evictions.last(old, deployment.EvictionResponder)
	if st.CompletionTime != nil {
		t.Errorf("the Deployment responder's last status on %s's Eviction: %+v; want its turn kept to the pod's end, not completed", old, st)
	}
	if st.Message != nil && !strings.HasPrefix(*st.Message, surgepolicy.ReasonSurge) {
		t.Errorf("the Deployment responder's last report on %s's Eviction: %q; want a %s", old, *st.Message, surgepolicy.ReasonSurge)
	}
	writes, _ := evictions.writesOf(old, deployment.EvictionResponder)
	active := time.Since(evictions.firstSurge())
	if most := int(active / evacuation.HeartbeatInterval); writes > most {
		t.Errorf("the Deployment responder wrote its entry on %s's Eviction %d times while Active for %v; want a heartbeat per %v at most, from its startTime: %d", old, writes, active.Round(time.Second), evacuation.HeartbeatInterval, most)
	}
	if accepted {
		t.Errorf("pod %s got EvacuationInitiated: the responder answered the pod conditions, not the Eviction", old)
	}
	// The answer on the Eviction counts in the answer metric, as an answer on the pod would.
	m, err := framework.ScrapeMetrics(t.Context(), c.MetricsTarget())
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := m.Value("nodemaint_evacuation_answer_duration_seconds", map[string]string{"answer": "accepted"}); n < 1 {
		t.Errorf("nodemaint_evacuation_answer_duration_seconds{answer=accepted} counted %v answers; want the Deployment responder's on %s's Eviction", n, old)
	}
	expectMarkersGone(t, ns, "web")
}

// TestEvictionUnregisteredPodMoves: on the EvictionRequest API, the single-replica Deployment
// behind a minAvailable 1 budget, created before the Deployment responder was registered on pods
// (before nodemaint was installed, or with an install without config/admission/eviction-responder),
// moves off the drained node with a Ready pod at every moment: its pod names no responder, so an
// EvictionRequest would reach only the imperative evictor, which the budget holds for good; it is
// asked through the pod condition protocol instead, and the Deployment responder surges.
func TestEvictionUnregisteredPodMoves(t *testing.T) {
	requireEvictionAPI(t)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	evictions := watchEvictions(t, ns)
	framework.BeforeEvictionResponderPolicy(t, func() {
		createDeployment(t, ns, "web", 1, intstr.FromString("25%"), "5s", 0)
	})
	createStrictPDB(t, ns, "web")
	s := watchApp(t, ns, "web")
	old := s.view().live()[0]
	if len(old.Spec.EvictionResponders) != 0 {
		t.Fatalf("pod %s names responders %+v; want none, as created before the policy", old.Name, old.Spec.EvictionResponders)
	}
	maintain(t, ns, old.Spec.NodeName)
	s.waitFor(t, waitTimeout, "the pod replaced on another node", func(v view) bool {
		return v.settled(1) && v.pod(old.Name) == nil && v.live()[0].Spec.NodeName != old.Spec.NodeName
	})
	minReady, maxLive, maxReplicas := s.stats()
	t.Logf("Ready pods never below %d, at most %d pods, spec.replicas at most %d", minReady, maxLive, maxReplicas)
	if minReady < 1 {
		t.Errorf("Ready pods down to %d, want at least 1 throughout", minReady)
	}
	if maxLive > 2 {
		t.Errorf("%d pods at once, want at most 2", maxLive)
	}
	if maxReplicas != 2 {
		t.Errorf("spec.replicas up to %d, want a surge to 2", maxReplicas)
	}
	s.mu.Lock()
	accepted := !s.accepted[old.Name].IsZero()
	s.mu.Unlock()
	if !accepted {
		t.Errorf("pod %s never got EvacuationInitiated: the Deployment responder did not answer its pod condition", old.Name)
	}
	if order := evictions.activeOrder(old.Name); len(order) != 0 {
		t.Errorf("pod %s had an Eviction with responders %v active; want it asked through its pod condition only", old.Name, order)
	}
	expectMarkersGone(t, ns, "web")
}

// TestEvictionThirdPartyResponderFirst: examples/responder, registered on the pods with a
// priority above the Deployment responder's, is asked first: it checkpoints the worker and
// completes its turn; only then is the Deployment responder active, which surges; the pod moves
// with a Ready pod at every moment.
func TestEvictionThirdPartyResponderFirst(t *testing.T) {
	requireEvictionAPI(t)
	startNodemaint(t, 2*time.Minute)
	runExample(t)
	ns := framework.Namespace(t)
	evictions := watchEvictions(t, ns)

	d := framework.NewDeployment(ns, "web", 1)
	maxSurge, maxUnavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable}}
	d.Spec.Template.Annotations = map[string]string{localcluster.PodReadyDelayAnnotation: "5s"}
	d.Spec.Template.Labels = map[string]string{"app": "web", "example.nodemaint.dev/responder": "checkpoint"}
	d.Spec.Template.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: exampleResponder, Priority: ptr.To[int32](20000)}}
	framework.CreateDeployment(t, d)
	createStrictPDB(t, ns, "web")
	s := watchApp(t, ns, "web")
	oldPod := s.view().live()[0]
	if !slices.ContainsFunc(oldPod.Spec.EvictionResponders, func(r corev1.EvictionResponder) bool { return r.Name == deployment.EvictionResponder }) {
		t.Fatalf("pod %s's evictionResponders %+v do not name the Deployment responder: the MutatingAdmissionPolicy did not register it", oldPod.Name, oldPod.Spec.EvictionResponders)
	}

	maintain(t, ns, oldPod.Spec.NodeName)
	s.waitFor(t, waitTimeout, "the pod replaced on another node", func(v view) bool {
		return v.settled(1) && v.pod(oldPod.Name) == nil && v.live()[0].Spec.NodeName != oldPod.Spec.NodeName
	})
	minReady, maxLive, maxReplicas := s.stats()
	if minReady < 1 {
		t.Errorf("Ready pods down to %d, want at least 1 throughout", minReady)
	}
	if maxLive > 2 {
		t.Errorf("%d pods at once, want at most 2", maxLive)
	}
	if maxReplicas != 2 {
		t.Errorf("spec.replicas up to %d, want a surge to 2", maxReplicas)
	}
	if got := evictions.activeOrder(oldPod.Name); !slices.Equal(got, []string{exampleResponder, deployment.EvictionResponder}) {
		t.Errorf("responders active on %s's Eviction, in order: %v; want the example, then the Deployment responder", oldPod.Name, got)
	}
	ex := evictions.last(oldPod.Name, exampleResponder)
	if ex.CompletionTime == nil {
		t.Errorf("the example's last status: %+v; want completed", ex)
	}
	if !strings.Contains(ptr.Deref(ex.Message, ""), "progress is saved") {
		t.Errorf("the example's last message: %q; want its progress saved", ptr.Deref(ex.Message, ""))
	}
	if at := evictions.firstSurge(); at.IsZero() {
		t.Errorf("the Deployment responder never became active; want after the example completed at %v", ex.CompletionTime)
	} else if ex.CompletionTime == nil || at.Before(ex.CompletionTime.Time.Truncate(time.Second)) {
		t.Errorf("the Deployment responder became active at %v; want after the example completed at %v", at, ex.CompletionTime)
	}
	s.mu.Lock()
	gone := s.gone[oldPod.Name]
	s.mu.Unlock()
	if !gone {
		t.Errorf("pod %s did not go", oldPod.Name)
	}
	var final corev1.Pod
	if err := framework.Client().Get(t.Context(), types.NamespacedName{Namespace: ns, Name: oldPod.Name}, &final); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s still there: %v", oldPod.Name, err)
	}
}

// requireEvictionAPI skips the test on a cluster that does not serve KEP-4563's API, and
// installs the MutatingAdmissionPolicy that registers the Deployment responder on Deployments'
// pods (config/admission/eviction-responder), once.
func requireEvictionAPI(t *testing.T) {
	t.Helper()
	framework.RequireProtocols(t, framework.EvictionRequests)
	framework.InstallEvictionResponderPolicy(t)
}

// evictionWatch records, from a watch of a namespace's Evictions on every event, the order in
// which responders became Active on each pod's Eviction, each responder's last status entry,
// whether it reported progress with an expected completion, and when the Deployment responder
// first became Active.
type evictionWatch struct {
	mu     sync.Mutex
	uid    map[string]types.UID // the last Eviction seen of each pod
	order  map[string][]string
	status map[string]map[string]lifecyclev1alpha1.ResponderStatus
	// writes counts the changes of each responder's entry after the Eviction controller's own
	// (its startTime), per pod; first and lastSeen when the first and the last were seen.
	writes          map[string]map[string]int
	first, lastSeen map[string]map[string]time.Time
	surgeFrom       time.Time
	// heartbeat and completed: when each responder's first heartbeat (its acceptance) and its
	// completionTime were first seen, per pod.
	heartbeat, completed map[string]map[string]time.Time
}

func watchEvictions(t *testing.T, namespace string) *evictionWatch {
	t.Helper()
	w := &evictionWatch{uid: map[string]types.UID{}, order: map[string][]string{}, status: map[string]map[string]lifecyclev1alpha1.ResponderStatus{},
		writes: map[string]map[string]int{}, first: map[string]map[string]time.Time{}, lastSeen: map[string]map[string]time.Time{},
		heartbeat: map[string]map[string]time.Time{}, completed: map[string]map[string]time.Time{}}
	cs := framework.Cluster().Client()
	lw := toolscache.NewListWatchFromClient(cs.LifecycleV1alpha1().RESTClient(), "evictions", namespace, fields.Everything())
	informer := toolscache.NewSharedIndexInformer(lw, &lifecyclev1alpha1.Eviction{}, 0, nil)
	observe := func(o any) {
		if ev, ok := o.(*lifecyclev1alpha1.Eviction); ok {
			w.observe(ev)
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go informer.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatal("Eviction watch: cache not synced")
	}
	return w
}

func (w *evictionWatch) observe(ev *lifecyclev1alpha1.Eviction) {
	if ev.Spec.Target.Pod == nil {
		return
	}
	pod := ev.Spec.Target.Pod.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	w.uid[pod] = ev.UID
	for _, tr := range ev.Status.TargetResponders {
		if tr.State == lifecyclev1alpha1.ResponderStateActive && !slices.Contains(w.order[pod], tr.Name) {
			w.order[pod] = append(w.order[pod], tr.Name)
			if tr.Name == deployment.EvictionResponder && w.surgeFrom.IsZero() {
				w.surgeFrom = time.Now()
			}
		}
	}
	if w.status[pod] == nil {
		w.status[pod], w.writes[pod] = map[string]lifecyclev1alpha1.ResponderStatus{}, map[string]int{}
		w.first[pod], w.lastSeen[pod] = map[string]time.Time{}, map[string]time.Time{}
		w.heartbeat[pod], w.completed[pod] = map[string]time.Time{}, map[string]time.Time{}
	}
	now := time.Now()
	for _, st := range ev.Status.Responders {
		prev, seen := w.status[pod][st.Name]
		if (st.HeartbeatTime != nil || st.CompletionTime != nil || st.Message != nil) && (!seen || !equality.Semantic.DeepEqual(prev, st)) {
			w.writes[pod][st.Name]++
			if _, ok := w.first[pod][st.Name]; !ok {
				w.first[pod][st.Name] = now
			}
			w.lastSeen[pod][st.Name] = now
		}
		w.status[pod][st.Name] = st
		if _, seen := w.heartbeat[pod][st.Name]; !seen && st.HeartbeatTime != nil {
			w.heartbeat[pod][st.Name] = now
		}
		if _, seen := w.completed[pod][st.Name]; !seen && st.CompletionTime != nil {
			w.completed[pod][st.Name] = now
		}
	}
}

func (w *evictionWatch) activeOrder(pod string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.order[pod])
}

func (w *evictionWatch) last(pod, responder string) lifecyclev1alpha1.ResponderStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status[pod][responder]
}

// writesOf is how many times the responder's entry on the pod's Eviction was written (its
// changes seen), and the time from the first to the last.
func (w *evictionWatch) writesOf(pod, responder string) (int, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes[pod][responder], w.lastSeen[pod][responder].Sub(w.first[pod][responder])
}

// declinedWith reports whether the Deployment responder declined the pod's Eviction with the
// reason: completed its turn with the reason in its message, no surge.
func (w *evictionWatch) declinedWith(pod, reason string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.status[pod][deployment.EvictionResponder]
	return st.CompletionTime != nil && strings.HasPrefix(ptr.Deref(st.Message, ""), reason+": declined")
}

// answerTimes returns when the responder's first heartbeat and its completionTime were seen
// on the pod's Eviction; zero if not (yet).
func (w *evictionWatch) answerTimes(pod, responder string) (heartbeat, completed time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.heartbeat[pod][responder], w.completed[pod][responder]
}

// eviction is the UID of the last Eviction seen of the pod.
func (w *evictionWatch) eviction(pod string) types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.uid[pod]
}

func (w *evictionWatch) firstSurge() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.surgeFrom
}

// onlyTarget is the one pod the namespace's Evictions targeted.
func onlyTarget(t *testing.T, w *evictionWatch) string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var pods []string
	for pod := range w.status {
		pods = append(pods, pod)
	}
	if len(pods) != 1 {
		t.Fatalf("Evictions targeted pods %v; want exactly one", pods)
	}
	return pods[0]
}
