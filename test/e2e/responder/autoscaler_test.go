package responder_test

import (
	"context"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// autoscaledReadyDelay is how long the autoscaled Deployment's pods take to become Ready: longer
// than the HorizontalPodAutoscaler controller's sync period (15s), so that a surge to 4 the
// autoscaler was not told of (maxReplicas 3) is scaled back before its replacement is Ready.
const autoscaledReadyDelay = "20s"

// TestAutoscaledDeploymentSurges: a Deployment of 3 replicas scaled by a HorizontalPodAutoscaler
// (minReplicas 3, maxReplicas 3; the HPA controller of kube-controller-manager runs, and with no
// metrics server still scales a Deployment above maxReplicas back at once) behind a budget that
// allows no disruption (kubectl drain would wait forever) moves off a maintained node by
// surging: the responder raises the autoscaler's bounds to 4 before the surge, so it does not
// scale the Deployment back, and restores 3 and 3 once the surge is over. Ready pods never drop
// below 3, nobody scales the Deployment during the surge, the drain completes, and neither the
// autoscaler nor the Deployment keeps a trace of it.
func TestAutoscaledDeploymentSurges(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions, framework.EvictionRequests)
	startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	answers := watchAnswers(t, ns) // on the EvictionRequest API: the responder registered on the pods
	s, bounds := createAutoscaled(t, ns)
	moved := s.view().live()[0]
	node := moved.Spec.NodeName

	nm := maintain(t, ns, node)
	s.waitFor(t, 2*waitTimeout, "the maintained node's pods replaced", func(v view) bool {
		return v.settled(3) && len(v.liveOn(node)) == 0
	})
	testutil.Eventually(t, waitTimeout, "the maintenance Drained", func(ctx context.Context) (bool, string, error) {
		cur := &nodemaintv1alpha1.NodeMaintenance{}
		err := framework.Client().Get(ctx, types.NamespacedName{Name: nm.Name}, cur)
		return err == nil && meta.IsStatusConditionTrue(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrained), "", err
	})
	if accepted, _ := answers.times(s, moved.Name, ""); accepted.IsZero() {
		t.Errorf("the responder's acceptance of %s not seen %s", moved.Name, answers)
	}
	expectAutoscaledKept(t, ns, s, bounds)
}

// TestAutoscaledControllerKilledDuringSurge: nodemaint-controller is killed while the autoscaled
// Deployment of TestAutoscaledDeploymentSurges surges, and started again once the replacement is
// Ready: meanwhile the autoscaler, its bounds raised, leaves the surge alone through its syncs;
// then the evacuation completes and the autoscaler's bounds are restored, Ready never below 3.
func TestAutoscaledControllerKilledDuringSurge(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	c := startNodemaint(t, 2*time.Minute)
	ns := framework.Namespace(t)
	watchAnswers(t, ns) // on the EvictionRequest API: the responder registered on the pods
	s, bounds := createAutoscaled(t, ns)
	node := s.view().live()[0].Spec.NodeName

	maintain(t, ns, node)
	s.waitFor(t, waitTimeout, "a surge in flight", func(v view) bool { return v.surging() && v.replicas() == 4 })
	c.Kill()
	s.waitFor(t, 2*waitTimeout, "the surge Ready while the controller is down", func(v view) bool {
		return len(v.ready()) == 4 && v.replicas() == 4
	})
	cur := bounds.last()
	if got := ptr.Deref(cur.Spec.MinReplicas, 1); got != 4 {
		t.Errorf("the autoscaler's minReplicas %d while the controller is down mid-surge; want 4", got)
	}
	if cur.Spec.MaxReplicas != 4 {
		t.Errorf("the autoscaler's maxReplicas %d while the controller is down mid-surge; want 4", cur.Spec.MaxReplicas)
	}
	c.Start()
	s.waitFor(t, waitTimeout, "the evacuation completed", func(v view) bool {
		return v.settled(3) && len(v.liveOn(node)) == 0
	})
	expectAutoscaledKept(t, ns, s, bounds)
}

// createAutoscaled creates the Deployment web of 3 replicas whose pods take
// autoscaledReadyDelay to start, a budget of minAvailable 3 (no disruption allowed) and a
// HorizontalPodAutoscaler of minReplicas 3, maxReplicas 3, and starts watching the Deployment and
// the autoscaler.
func createAutoscaled(t *testing.T, ns string) (*sampler, *autoscalerWatch) {
	t.Helper()
	createDeployment(t, ns, "web", 3, intstr.FromInt32(1), autoscaledReadyDelay, 0)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(3)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if err := framework.Client().Create(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](3), MaxReplicas: 3,
		},
	}
	if err := framework.Client().Create(t.Context(), hpa); err != nil {
		t.Fatal(err)
	}
	return watchApp(t, ns, "web"), watchAutoscaler(t, ns, "web")
}

// expectAutoscaledKept waits until the autoscaler is back to 3, 3 with no record and the
// responder's markers are gone, then checks what the watches saw: Ready never below 3, the
// autoscaler's bounds raised to 4 during the surge, nobody (the autoscaler) scaling the
// Deployment during it.
func expectAutoscaledKept(t *testing.T, ns string, s *sampler, bounds *autoscalerWatch) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "the autoscaler back to 3, 3 with no record", func(context.Context) (bool, string, error) {
		cur := bounds.last()
		return cur != nil && ptr.Deref(cur.Spec.MinReplicas, 1) == 3 && cur.Spec.MaxReplicas == 3 &&
			cur.Annotations[evacuation.SurgeBoundsAnnotation] == "", "", nil
	})
	expectMarkersGone(t, ns, "web")

	minReady, maxLive, maxReplicas := s.stats()
	minRaised, maxRaised := bounds.highest()
	scaledBack := countEvents(t, ns, "web", "ScaledDuringSurge")
	t.Logf("Ready pods never below %d, at most %d pods, spec.replicas at most %d; the autoscaler's bounds at most %d, %d; %d ScaledDuringSurge",
		minReady, maxLive, maxReplicas, minRaised, maxRaised, scaledBack)
	if minReady < 3 {
		t.Errorf("Ready pods went down to %d, want 3 throughout", minReady)
	}
	if scaledBack > 0 {
		t.Errorf("the Deployment was scaled during a surge %d times (by the autoscaler), want never", scaledBack)
	}
	if minRaised < 4 {
		t.Errorf("the autoscaler's minReplicas went at most to %d during the surge; want 4", minRaised)
	}
	if maxRaised < 4 {
		t.Errorf("the autoscaler's maxReplicas went at most to %d during the surge; want 4", maxRaised)
	}
}

// autoscalerWatch records, from a watch of one HorizontalPodAutoscaler, its last version and the
// highest minReplicas and maxReplicas it had.
type autoscalerWatch struct {
	mu               sync.Mutex
	cur              *autoscalingv2.HorizontalPodAutoscaler
	minSeen, maxSeen int32
}

func watchAutoscaler(t *testing.T, namespace, name string) *autoscalerWatch {
	t.Helper()
	w := &autoscalerWatch{}
	lw := toolscache.NewFilteredListWatchFromClient(framework.Cluster().Client().AutoscalingV2().RESTClient(), "horizontalpodautoscalers", namespace,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	informer := toolscache.NewSharedIndexInformer(lw, &autoscalingv2.HorizontalPodAutoscaler{}, 0, nil)
	observe := func(o any) {
		hpa, ok := o.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.cur = hpa
		w.minSeen = max(w.minSeen, ptr.Deref(hpa.Spec.MinReplicas, 1))
		w.maxSeen = max(w.maxSeen, hpa.Spec.MaxReplicas)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, n any) { observe(n) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go informer.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatal("the autoscaler's watch did not sync")
	}
	return w
}

func (w *autoscalerWatch) last() *autoscalingv2.HorizontalPodAutoscaler {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

func (w *autoscalerWatch) highest() (minReplicas, maxReplicas int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.minSeen, w.maxSeen
}
