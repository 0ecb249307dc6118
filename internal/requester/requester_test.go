package requester_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/internal/setup"
	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// The envtests of nodemaint as a requester: an API server serving lifecycle.k8s.io/v1alpha1, the
// node and NodeMaintenance reconcilers under the EvictionRequest protocol, and nodemaint's
// Eviction controller.

var k8s client.Client

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	env, err := testenv.StartWith(testenv.Options{EvictionRequestAPI: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, env) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	_ = env.Stop()
	os.Exit(code)
}

func run(ctx context.Context, env *testenv.Env) error {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: testenv.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	// The maintenance controllers under the EvictionRequest protocol and the Eviction controller,
	// as nodemaint-controller sets them up, without the responder: these tests answer for the
	// owners.
	if _, err := setup.Controllers(ctx, mgr, setup.Options{
		Maintenance: true, EvictionController: true, Protocol: nodemaintv1alpha1.EvacuationProtocolEvictionRequest,
		Concurrency: 4, EvictionConcurrency: 4,
		EvictionBackoff: 100 * time.Millisecond, EvictionMaxBackoff: time.Second, StatusBatchDelay: 200 * time.Millisecond,
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, cond)
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), o, client.GracePeriodSeconds(0)) })
}

// runningPod creates a Running, Ready pod on the node, as a kubelet would report it.
func runningPod(t *testing.T, name, node string, responders ...corev1.EvictionResponder) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, EvictionResponders: responders,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	create(t, pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// maintenance drains the node; responseTimeout, when given, is its evacuationResponseTimeout.
func maintenance(t *testing.T, name, node string, responseTimeout ...time.Duration) *nodemaintv1alpha1.NodeMaintenance {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: true, Reason: "kernel upgrade"},
	}
	for _, d := range responseTimeout {
		nm.Spec.EvacuationResponseTimeout = &nodemaintv1alpha1.Duration{Duration: d}
	}
	create(t, nm)
	return nm
}

// current reads the pod from the API server.
func current(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func requests(ctx context.Context, node string) ([]lifecyclev1alpha1.EvictionRequest, error) {
	var list lifecyclev1alpha1.EvictionRequestList
	err := k8s.List(ctx, &list, client.MatchingLabels{requester.NodeLabel: node})
	return list.Items, err
}

func evictions(ctx context.Context) ([]lifecyclev1alpha1.Eviction, error) {
	var list lifecyclev1alpha1.EvictionList
	err := k8s.List(ctx, &list, client.InNamespace("default"))
	return list.Items, err
}

// collectGarbage plays the garbage collector, which envtest does not run, once: it deletes the
// EvictionRequests whose owner pod is gone, then the Evictions whose every owner request is gone.
// nodemaint leaves a deleted pod's requests and Eviction to it: what the test finds left after
// this had no owner to go with.
func collectGarbage(ctx context.Context, t *testing.T) {
	t.Helper()
	exists := func(obj client.Object, key types.NamespacedName) bool {
		err := k8s.Get(ctx, key, obj)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	var reqs lifecyclev1alpha1.EvictionRequestList
	if err := k8s.List(ctx, &reqs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for i := range reqs.Items {
		r := &reqs.Items[i]
		for _, o := range r.OwnerReferences {
			if o.Kind == "Pod" && !exists(&corev1.Pod{}, types.NamespacedName{Namespace: r.Namespace, Name: o.Name}) {
				if err := k8s.Delete(ctx, r); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
			}
		}
	}
	evs, err := evictions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		e := &evs[i]
		left := 0
		for _, o := range e.OwnerReferences {
			if exists(&lifecyclev1alpha1.EvictionRequest{}, types.NamespacedName{Namespace: e.Namespace, Name: o.Name}) {
				left++
			}
		}
		if len(e.OwnerReferences) > 0 && left == 0 {
			if err := k8s.Delete(ctx, e); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestDrainThroughEvictionRequest: a node drained under the EvictionRequest protocol. Its bare pod
// with a minAvailable: 1 budget, registered with an operator as its responder, gets one
// EvictionRequest from nodemaint; the Eviction controller makes its Eviction, the operator (played
// by the test) declines, and the imperative evictor holds the pod for the drain (only nodemaint
// asks for it); the drain evicts it through the budget, which refuses; the NodeMaintenance says so. Once the budget
// allows, the pod is evicted (and, its kubelet being simulated, deleted); the node is Drained,
// and the request and the Eviction go with the pod (the garbage collector's, played by the test).
func TestDrainThroughEvictionRequest(t *testing.T) {
	ctx := context.Background()
	const responder = "web.example.com/operator"
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "er-n1"}})
	pod := runningPod(t, "web", "er-n1", corev1.EvictionResponder{Name: responder, Priority: ptr.To[int32](20000)})
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	create(t, pdb)
	// No disruption controller runs here: the test writes the budget's status.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	nm := maintenance(t, "er-drain", "er-n1", time.Second)
	decline(t, pod, responder)

	eventually(t, "one EvictionRequest by nodemaint, the imperative evictor holding the pod, the drain's eviction refused by the budget, and the status says so", func(ctx context.Context) (bool, string, error) {
		reqs, err := requests(ctx, "er-n1")
		if err != nil || len(reqs) != 1 {
			return false, fmt.Sprintf("%d requests", len(reqs)), err
		}
		r := reqs[0]
		if r.Spec.Requester != names.Requester || r.Spec.Target.Pod.UID != pod.UID || r.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction {
			return false, fmt.Sprintf("request %+v", r.Spec), nil
		}
		got := &nodemaintv1alpha1.NodeMaintenance{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return false, "", err
		}
		msg := ""
		for _, b := range got.Status.Nodes["er-n1"].Blocked {
			msg += b.Reason + ": " + b.Message + "; "
		}
		evs, err := evictions(ctx)
		if err != nil {
			return false, "", err
		}
		held := false
		for _, e := range evs {
			for _, rs := range e.Status.Responders {
				held = held || (e.Spec.Target.Pod.UID == pod.UID && rs.Name == names.ImperativeEvictor && ptr.Deref(rs.Message, "") == names.HeldForDrain)
			}
		}
		ok := got.Status.EvacuationProtocol == nodemaintv1alpha1.EvacuationProtocolEvictionRequest && held &&
			strings.Contains(msg, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget+": The disruption budget web needs 1 healthy pods") &&
			got.Status.PodsEvacuating == 0
		return ok, fmt.Sprintf("protocol %q, held %v, evacuating %d, blocked %s", got.Status.EvacuationProtocol, held, got.Status.PodsEvacuating, msg), nil
	})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err != nil {
		t.Fatalf("the pod was evicted against its budget: %v", err)
	}

	pdb.Status.DisruptionsAllowed = 1
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod is evicted (terminating)", func(ctx context.Context) (bool, string, error) {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		}
		return p.DeletionTimestamp != nil, "not terminating", nil
	})
	// The kubelet's part: the pod's containers stopped.
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(t, "no EvictionRequest and no Eviction left once the garbage collector ran, the node Drained", func(ctx context.Context) (bool, string, error) {
		collectGarbage(ctx, t)
		reqs, err := requests(ctx, "er-n1")
		if err != nil {
			return false, "", err
		}
		evs, err := evictions(ctx)
		if err != nil {
			return false, "", err
		}
		got := &nodemaintv1alpha1.NodeMaintenance{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return false, "", err
		}
		return len(reqs) == 0 && len(evs) == 0 && got.Status.NodesDrained == 1, fmt.Sprintf("%d requests, %d evictions, drained %d", len(reqs), len(evs), got.Status.NodesDrained), nil
	})
}

// TestWithdrawnWhenTheMaintenanceEnds: a pod whose own responder works on its eviction; the
// maintenance stops draining: nodemaint withdraws its request, the Eviction is canceled (the
// responder Canceled), and then both are gone. The pod stays.
func TestWithdrawnWhenTheMaintenanceEnds(t *testing.T) {
	ctx := context.Background()
	const responder = "db.example.com/operator"
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "er-n2"}})
	pod := runningPod(t, "db", "er-n2", corev1.EvictionResponder{Name: responder, Priority: ptr.To[int32](20000)})
	nm := maintenance(t, "er-withdraw", "er-n2")

	var eviction types.NamespacedName
	eventually(t, "the operator is the active responder, and the status says so", func(ctx context.Context) (bool, string, error) {
		evs, err := evictions(ctx)
		if err != nil {
			return false, "", err
		}
		for _, e := range evs {
			if e.Spec.Target.Pod.UID == pod.UID && len(e.Status.TargetResponders) > 0 && e.Status.TargetResponders[0].State == lifecyclev1alpha1.ResponderStateActive {
				eviction = client.ObjectKeyFromObject(&e)
			}
		}
		got := &nodemaintv1alpha1.NodeMaintenance{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return false, "", err
		}
		msg := fmt.Sprint(got.Status.Nodes["er-n2"].Blocked)
		return eviction.Name != "" && strings.Contains(msg, "evacuating by "+responder), msg, nil
	})
	// The operator heartbeats with an estimate.
	e := &lifecyclev1alpha1.Eviction{}
	if err := k8s.Get(ctx, eviction, e); err != nil {
		t.Fatal(err)
	}
	orig := e.DeepCopy()
	for i := range e.Status.Responders {
		if e.Status.Responders[i].Name == responder {
			e.Status.Responders[i].HeartbeatTime = ptr.To(metav1.Now())
			e.Status.Responders[i].ExpectedCompletionTime = ptr.To(metav1.NewTime(time.Now().Add(time.Hour)))
			e.Status.Responders[i].Message = ptr.To("moving the primary")
		}
	}
	if err := k8s.Status().Patch(ctx, e, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the status shows the operator's progress", func(ctx context.Context) (bool, string, error) {
		got := &nodemaintv1alpha1.NodeMaintenance{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return false, "", err
		}
		msg := fmt.Sprint(got.Status.Nodes["er-n2"].Blocked)
		return strings.Contains(msg, "expected completion") && strings.Contains(msg, "moving the primary"), msg, nil
	})

	orignm := nm.DeepCopy()
	nm.Spec.Drain = false
	if err := k8s.Patch(ctx, nm, client.MergeFrom(orignm)); err != nil {
		t.Fatal(err)
	}
	canceled := false
	eventually(t, "the request withdrawn, the Eviction canceled, and both gone", func(ctx context.Context) (bool, string, error) {
		e := &lifecyclev1alpha1.Eviction{}
		switch err := k8s.Get(ctx, eviction, e); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, "", err
		default:
			canceled = canceled || e.Status.TargetResponders[0].State == lifecyclev1alpha1.ResponderStateCanceled
		}
		reqs, err := requests(ctx, "er-n2")
		if err != nil {
			return false, "", err
		}
		evs, err := evictions(ctx)
		return err == nil && len(reqs) == 0 && len(evs) == 0, fmt.Sprintf("%d requests, %d evictions", len(reqs), len(evs)), err
	})
	if !canceled {
		t.Log("the Eviction went before the test saw it Canceled")
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err != nil {
		t.Fatalf("the pod must stay: %v", err)
	}
}

// TestPodConditionWithdrawnAfterSwitch: nodemaint's EvacuationRequest pod condition left from
// before the controller switched to the EvictionRequest protocol is withdrawn, and the pod is
// asked through an EvictionRequest instead.
func TestPodConditionWithdrawnAfterSwitch(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "er-n3"}})
	pod := runningPod(t, "switched", "er-n3", corev1.EvictionResponder{Name: "keep.example.com/op", Priority: ptr.To[int32](20000)})
	evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance, Message: "old"})
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	maintenance(t, "er-switch", "er-n3")
	eventually(t, "the pod condition withdrawn and an EvictionRequest instead", func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		reqs, err := requests(ctx, "er-n3")
		return err == nil && evacuation.Condition(pod, evacuation.Request) == nil && len(reqs) == 1,
			fmt.Sprintf("%d requests, conditions %v", len(reqs), pod.Status.Conditions), err
	})
}

// TestSignalOnlyAsksThroughThePodCondition: a SignalOnly maintenance asks a pod that names a
// responder of its own through the EvacuationRequest pod condition, never an EvictionRequest,
// which an Eviction controller other than nodemaint's would carry through to an eviction; so
// does one whose only evicting neighbour leaves the pod alone (its podSelector). Switched to
// Evict, the maintenance asks through an EvictionRequest and its condition is withdrawn; back to
// SignalOnly, the request is withdrawn and the condition set again. The pod stays throughout:
// a budget that allows nothing holds it.
func TestSignalOnlyAsksThroughThePodCondition(t *testing.T) {
	ctx := context.Background()
	const node = "er-n-signal"
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	pod := heldPod(t, "signal", node)
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "er-signal"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: true, Reason: "kernel upgrade",
			EvictionPolicy: nodemaintv1alpha1.EvictionPolicySignalOnly, EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Second}},
	}
	create(t, nm)
	setPolicy := func(p nodemaintv1alpha1.EvictionPolicy) {
		t.Helper()
		orig := nm.DeepCopy()
		nm.Spec.EvictionPolicy = p
		if err := k8s.Patch(ctx, nm, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
	other := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "er-signal-other"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: true, Reason: "kernel upgrade",
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}},
	}
	create(t, other)
	asked := func(what string, byCondition bool) {
		t.Helper()
		eventually(t, what, func(ctx context.Context) (bool, string, error) {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return false, "", err
			}
			reqs, err := requests(ctx, node)
			if err != nil {
				return false, "", err
			}
			asking := 0
			for _, r := range reqs {
				if r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction {
					asking++
				}
			}
			cond := evacuation.RequestedBy(pod, evacuation.ReasonNodeMaintenance)
			return cond == byCondition && (asking == 0) == byCondition && pod.DeletionTimestamp == nil,
				fmt.Sprintf("condition %v, %d requests (%d asking), deleting %v", cond, len(reqs), asking, pod.DeletionTimestamp != nil), nil
		})
	}
	asked("SignalOnly: asked through the condition alone", true)
	setPolicy(nodemaintv1alpha1.EvictionPolicyEvict)
	asked("Evict: asked through an EvictionRequest alone", false)
	setPolicy(nodemaintv1alpha1.EvictionPolicySignalOnly)
	asked("SignalOnly again: the request withdrawn, asked through the condition", true)
}

// heldPod creates a running pod on the node, registered with a responder that never answers,
// behind a budget that allows no disruption (its status written by the test: no disruption
// controller runs here), so that nodemaint's request for it stays.
func heldPod(t *testing.T, name, node string) *corev1.Pod {
	t.Helper()
	pod := runningPod(t, name, node, corev1.EvictionResponder{Name: "silent.example.com/operator", Priority: ptr.To[int32](10000)})
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
	create(t, pdb)
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if err := k8s.Status().Update(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	return pod
}

// ownedBy reports whether the request carries its pod's owner reference (no blockOwnerDeletion).
func ownedBy(r lifecyclev1alpha1.EvictionRequest, pod *corev1.Pod) bool {
	for _, o := range r.OwnerReferences {
		if o == requester.PodOwner(pod.Name, pod.UID) {
			return true
		}
	}
	return false
}

// TestNothingLeftWhenTheNodeIsGone: a node deleted under a draining maintenance (drained, then
// deleted; an autoscaler's scale-down) leaves none of nodemaint's EvictionRequests once its pods
// are gone. The API server accepts the request's owner reference to its pod (the garbage
// collector's part, proven on the local cluster by test/e2e/drain's TestNothingLeftWhenNodeDeleted:
// envtest has none, the test plays it); the node reconciler, the node gone, leaves the requests of
// its pods gone to it, and asks nothing again.
func TestNothingLeftWhenTheNodeIsGone(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "er-gone"}}
	create(t, node)
	pod := heldPod(t, "held", "er-gone")
	maintenance(t, "er-gone", "er-gone")
	eventually(t, "nodemaint's request, owned by its pod", func(ctx context.Context) (bool, string, error) {
		reqs, err := requests(ctx, "er-gone")
		return len(reqs) == 1 && ownedBy(reqs[0], pod), fmt.Sprintf("%+v", reqs), err
	})

	if err := k8s.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	// The pod garbage collector's part: the pods of a node gone are deleted.
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no EvictionRequest of nodemaint's left once the garbage collector ran, and none asked again", func(ctx context.Context) (bool, string, error) {
		collectGarbage(ctx, t)
		reqs, err := requests(ctx, "er-gone")
		return len(reqs) == 0, fmt.Sprintf("%d requests", len(reqs)), err
	})
}

// TestRequestWithoutOwnerAdopted: a request of nodemaint's without its pod's owner reference (as
// an earlier version created them) is given it, so that an upgrade leaves nothing the garbage
// collector cannot collect. The test takes the reference off nodemaint's own request.
func TestRequestWithoutOwnerAdopted(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "er-adopt"}})
	pod := heldPod(t, "adopted", "er-adopt")
	maintenance(t, "er-adopt", "er-adopt")
	var req lifecyclev1alpha1.EvictionRequest
	eventually(t, "nodemaint's request", func(ctx context.Context) (bool, string, error) {
		reqs, err := requests(ctx, "er-adopt")
		if len(reqs) == 1 {
			req = reqs[0]
		}
		return len(reqs) == 1, fmt.Sprintf("%d requests", len(reqs)), err
	})
	orig := req.DeepCopy()
	req.OwnerReferences = nil
	if err := k8s.Patch(ctx, &req, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the request adopted by its pod again", func(ctx context.Context) (bool, string, error) {
		reqs, err := requests(ctx, "er-adopt")
		return len(reqs) == 1 && reqs[0].UID == req.UID && ownedBy(reqs[0], pod), fmt.Sprintf("%+v", reqs), err
	})
}

// decline plays the pod's responder: once its Eviction makes the responder Active, the responder
// completes its turn without moving the pod (KEP-4563's decline), and the next responder takes over.
func decline(t *testing.T, pod *corev1.Pod, responder string) {
	t.Helper()
	eventually(t, responder+" active on the pod's Eviction, then declining", func(ctx context.Context) (bool, string, error) {
		evs, err := evictions(ctx)
		if err != nil {
			return false, "", err
		}
		for i := range evs {
			e := &evs[i]
			if e.Spec.Target.Pod.UID != pod.UID || len(e.Status.TargetResponders) == 0 ||
				e.Status.TargetResponders[0].Name != responder || e.Status.TargetResponders[0].State != lifecyclev1alpha1.ResponderStateActive {
				continue
			}
			orig := e.DeepCopy()
			for j := range e.Status.Responders {
				if e.Status.Responders[j].Name == responder {
					e.Status.Responders[j].CompletionTime = ptr.To(metav1.Now())
				}
			}
			// A conflict (the controller wrote it since the list) is tried again.
			err := k8s.Status().Patch(ctx, e, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
			return err == nil, fmt.Sprint(err), nil
		}
		return false, fmt.Sprintf("%d evictions, none with %s active", len(evs), responder), nil
	})
}

// TestUnregisteredPodAskedByPodCondition: under the EvictionRequest protocol, a pod that names no
// responder of its own (created before its owner's responder was registered) is asked through the
// pod condition protocol, which its owner can answer: nodemaint sets its EvacuationRequest
// condition and makes no EvictionRequest; the owner's acceptance on the pod holds the drain past
// the response timeout (nothing evicts it); the owner moves the pod and the node is Drained.
func TestUnregisteredPodAskedByPodCondition(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "er-unreg"}})
	pod := runningPod(t, "unregistered", "er-unreg")
	nm := maintenance(t, "er-unreg", "er-unreg", time.Second)
	eventually(t, "nodemaint's pod condition on the pod, and no EvictionRequest", func(ctx context.Context) (bool, string, error) {
		got := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return false, "", err
		}
		reqs, err := requests(ctx, "er-unreg")
		return err == nil && evacuation.RequestedBy(got, evacuation.ReasonNodeMaintenance) && len(reqs) == 0,
			fmt.Sprintf("%d requests, conditions %v", len(reqs), got.Status.Conditions), err
	})
	testutil.SetPodCondition(t, k8s, pod.Name, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Surge", Message: "moving it"})
	// The response timeout (1s) runs out many times over while the owner moves the pod: the
	// status reports the owner's answer, and the pod is not evicted.
	eventually(t, "the status shows the owner evacuating the pod", func(ctx context.Context) (bool, string, error) {
		got := &nodemaintv1alpha1.NodeMaintenance{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return false, "", err
		}
		return got.Status.PodsEvacuating == 1, fmt.Sprintf("evacuating %d, nodes %v", got.Status.PodsEvacuating, got.Status.Nodes), nil
	})
	// Evidence that the drain decided after the pod's response timeout ran out: a pod nobody
	// answers for, created after that, is evicted once its own timeout runs out, in a decision
	// that would have evicted the moved pod too; a second one's request, written by a later
	// reconcile of the node, says that decision's evictions are done.
	deadline := evacuation.Condition(current(t, pod), evacuation.Request).LastTransitionTime.Add(time.Second)
	eventually(t, "the pod's response timeout run out", func(context.Context) (bool, string, error) {
		// The conditions' times are in seconds.
		return time.Now().After(deadline.Add(time.Second)), fmt.Sprintf("response due at %v", deadline), nil
	})
	silent := runningPod(t, "unregistered-silent", "er-unreg")
	eventually(t, "the pod nobody answers for evicted", func(context.Context) (bool, string, error) {
		return current(t, silent).DeletionTimestamp != nil, "not evicted", nil
	})
	later := runningPod(t, "unregistered-later", "er-unreg")
	eventually(t, "the next reconcile's request on another pod", func(context.Context) (bool, string, error) {
		return evacuation.RequestedBy(current(t, later), evacuation.ReasonNodeMaintenance), "not requested", nil
	})
	if g := current(t, pod); g.DeletionTimestamp != nil {
		t.Fatalf("the pod its owner is moving was evicted: deletion %v", g.DeletionTimestamp)
	}
	for _, p := range []*corev1.Pod{pod, silent, later} {
		if err := k8s.Delete(ctx, p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the node Drained, no EvictionRequest", func(ctx context.Context) (bool, string, error) {
		got := &nodemaintv1alpha1.NodeMaintenance{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return false, "", err
		}
		reqs, err := requests(ctx, "er-unreg")
		return err == nil && got.Status.NodesDrained == 1 && len(reqs) == 0, fmt.Sprintf("drained %d, %d requests", got.Status.NodesDrained, len(reqs)), err
	})
}

// TestManyPodsPacedToTheEvictionController: the drain of a node with more registered pods than
// the Eviction controller's backlog admits at once (two a worker: 8 here) creates its
// EvictionRequests as the controller looks at them, and every pod gets its request and an
// Eviction with its responder Active: the backlog empties as the controller looks, and the
// requests left wait for the node's next look, not for good. The pacing itself is
// TestRequestsPacedByBacklog's (internal/controller/node).
func TestManyPodsPacedToTheEvictionController(t *testing.T) {
	const (
		node      = "er-paced"
		pods      = 20
		responder = "paced.example.com/operator"
	)
	// After the pods' deletion (cleanups run last first): their requests and Evictions go.
	t.Cleanup(func() { collectGarbage(context.Background(), t) })
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	uids := map[types.UID]bool{}
	for i := range pods {
		pod := runningPod(t, fmt.Sprintf("paced-%d", i), node, corev1.EvictionResponder{Name: responder, Priority: ptr.To[int32](20000)})
		uids[pod.UID] = true
	}
	maintenance(t, node, node)
	eventually(t, "a request and an Eviction with its responder Active for every pod", func(ctx context.Context) (bool, string, error) {
		reqs, err := requests(ctx, node)
		if err != nil {
			return false, "", err
		}
		evs, err := evictions(ctx)
		if err != nil {
			return false, "", err
		}
		active := 0
		for _, e := range evs {
			if e.Spec.Target.Pod == nil || !uids[e.Spec.Target.Pod.UID] {
				continue
			}
			for _, tr := range e.Status.TargetResponders {
				if tr.Name == responder && tr.State == lifecyclev1alpha1.ResponderStateActive {
					active++
				}
			}
		}
		return len(reqs) == pods && active == pods, fmt.Sprintf("%d requests, %d Active", len(reqs), active), nil
	})
}
