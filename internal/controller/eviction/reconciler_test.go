package eviction_test

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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
	"github.com/nodemaint/nodemaint/internal/setup"
	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

var (
	env *testenv.Env
	k8s client.Client
	// logs are the controller's log lines: its traces of decisions (expectLooked).
	logs testutil.Logs
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logs.Logger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr))))
	var err error
	if env, err = testenv.StartWith(testenv.Options{EvictionRequestAPI: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	// The Eviction controller alone, as nodemaint-controller sets it up, named "a"
	// (--eviction-controller=on); TestTwoControllers runs others beside it.
	stop, err := startInstance("a", false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	_ = env.Stop()
	os.Exit(code)
}

// startInstance starts an Eviction controller named name in a manager of its own (its own cache,
// as another installation has), yielding to others when yield (--eviction-controller=auto), its
// writes recorded (written). A refused eviction backs off an hour: where a test sees it tried
// again, the budget's change brought the retry forward. stop stops it and says how its manager
// ended.
func startInstance(name string, yield bool) (stop func() error, err error) {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: testenv.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Logger: ctrl.Log.WithValues("instance", name),
		// Every instance has a controller named "eviction", as separate installations do.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: testenv.Scheme, Mapper: mgr.GetRESTMapper(), Cache: &client.CacheOptions{Reader: mgr.GetCache()}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := setup.Controllers(ctx, mgr, setup.Options{
		EvictionController: true, EvictionControllerName: name, EvictionYield: yield, EvictionClient: written.client(name, base),
		EvictionConcurrency: 4, EvictionBackoff: time.Hour, EvictionMaxBackoff: time.Hour,
	}); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}, nil
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, cond)
}

func createPod(t *testing.T, name string, responders ...corev1.EvictionResponder) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			Containers:         []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			EvictionResponders: responders,
		},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	// Running and Ready, as a kubelet would make it: the Eviction API ignores the budgets of
	// pending pods.
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func request(t *testing.T, pod *corev1.Pod, requester string) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	r := &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + "-" + fmt.Sprint(len(requester)), Namespace: pod.Namespace},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
			Requester: requester,
			Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
	if err := k8s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), r) })
	return r
}

// evictionOf reads the pod's Eviction; nil when there is none.
func evictionOf(ctx context.Context, pod *corev1.Pod) (*lifecyclev1alpha1.Eviction, error) {
	var list lifecyclev1alpha1.EvictionList
	if err := k8s.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if p := list.Items[i].Spec.Target.Pod; p != nil && p.UID == pod.UID {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

func states(e *lifecyclev1alpha1.Eviction) string {
	s := ""
	for _, t := range e.Status.TargetResponders {
		s += fmt.Sprintf("%s=%s ", t.Name, t.State)
	}
	return s
}

// expectLooked waits for the controller's trace of a decision about the pod logged at or after
// since, with values among its key-value pairs ("looking again": it decided, carried the
// decision out, and will look again later). It is the evidence that the controller looked,
// before a test asserts that it did nothing.
func expectLooked(t *testing.T, pod string, since time.Time, values map[string]string) {
	t.Helper()
	want := map[string]string{"controller": "eviction", "namespace": "default", "name": pod}
	for k, v := range values {
		want[k] = v
	}
	eventually(t, fmt.Sprintf("a decision about %s since %s (%v)", pod, since.Format(time.StampMilli), values), func(context.Context) (bool, string, error) {
		seen := logs.Since(since, "looking again", want)
		return len(seen) > 0, fmt.Sprintf("%d traces", len(seen)), nil
	})
}

func podGone(ctx context.Context, pod *corev1.Pod) (bool, error) {
	err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// descheduler is the requester of these tests: the imperative evictor evicts the pods another
// requester than nodemaint's drain asks for (the drain evicts its own: see
// evictionrequest.HeldForDrain and TestHeldForDrain).
const descheduler = "descheduler.example.com/rebalance"

// TestHeldForDrain: a pod only nodemaint's drain asks for is held by the imperative evictor, which
// says so and does not evict it.
func TestHeldForDrain(t *testing.T) {
	ctx := context.Background()
	pod := createPod(t, "held")
	request(t, pod, evictionrequest.Requester)
	eventually(t, "the imperative evictor active and holding the pod", func(ctx context.Context) (bool, string, error) {
		e, err := evictionOf(ctx, pod)
		if err != nil || e == nil {
			return false, "no Eviction", err
		}
		for _, r := range e.Status.Responders {
			if r.Name == evictionrequest.ImperativeEvictor && r.Message != nil && *r.Message == evictionrequest.HeldForDrain {
				return states(e) == evictionrequest.ImperativeEvictor+"=Active ", states(e), nil
			}
		}
		return false, states(e), nil
	})
	if gone, err := podGone(ctx, pod); err != nil || gone {
		t.Fatalf("the imperative evictor evicted a pod only nodemaint's drain asks for (gone %v, %v)", gone, err)
	}
}

// TestDeclinedThenEvictedThroughPDB: a responder of higher priority than the imperative evictor
// is asked first; it declines (completionTime without evicting), the imperative evictor takes over
// and evicts the pod through its PodDisruptionBudget, only once the budget allows; the request
// learns TargetEvicted, as its Eviction, which is kept, says. (Passing over a responder that stops
// heartbeating takes the API server's 20 minutes, which it enforces: see FuzzDecide and
// TestDecideHeartbeat for that rule.)
func TestDeclinedThenEvictedThroughPDB(t *testing.T) {
	ctx := context.Background()
	const responder = "decline.example.com/operator"
	pod := createPod(t, "declined", corev1.EvictionResponder{Name: responder, Priority: ptr.To[int32](20000)})
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "declined", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "declined"}},
		},
	}
	if err := k8s.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pdb) })
	// No disruption controller runs here: the budget's status says no disruption is allowed.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1, DisruptionsAllowed: 0}
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	req := request(t, pod, descheduler)

	var e *lifecyclev1alpha1.Eviction
	eventually(t, "the operator is the active responder, the imperative evictor waits", func(ctx context.Context) (bool, string, error) {
		var err error
		e, err = evictionOf(ctx, pod)
		if err != nil || e == nil {
			return false, "no Eviction", err
		}
		want := fmt.Sprintf("%s=Active %s=Inactive ", responder, evictionrequest.ImperativeEvictor)
		return states(e) == want && e.Labels[descheduler] == "requester" && e.Labels[responder] == "responder" &&
			len(e.Status.Requesters) == 1 && e.Status.Requesters[0].Name == descheduler, states(e), nil
	})
	// The operator heartbeats, as an active responder does (which brings no look: it only
	// postpones the responder's deadline), and the pod gets a label, which brings one: only once
	// the controller decided about the pod again may the test tell that it left the pod alone.
	looked := time.Now()
	orig := e.DeepCopy()
	for i := range e.Status.Responders {
		if e.Status.Responders[i].Name == responder {
			e.Status.Responders[i].HeartbeatTime = ptr.To(metav1.Now())
		}
	}
	if err := k8s.Status().Patch(ctx, e, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"looked":"again"}}}`))); err != nil {
		t.Fatal(err)
	}
	expectLooked(t, pod.Name, looked, nil)
	if gone, err := podGone(ctx, pod); err != nil || gone {
		t.Fatalf("the pod was evicted while its responder was active (gone %v, %v)", gone, err)
	}
	// The operator declines.
	var err error
	if e, err = evictionOf(ctx, pod); err != nil || e == nil {
		t.Fatalf("the Eviction: %v, %v", e, err)
	}
	orig = e.DeepCopy()
	for i := range e.Status.Responders {
		if e.Status.Responders[i].Name == responder {
			e.Status.Responders[i].CompletionTime = ptr.To(metav1.Now())
			e.Status.Responders[i].Message = ptr.To("declined: nothing to move")
		}
	}
	if err := k8s.Status().Patch(ctx, e, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the operator completed and the imperative evictor is refused by the budget", func(ctx context.Context) (bool, string, error) {
		e, err := evictionOf(ctx, pod)
		if err != nil || e == nil {
			return false, "no Eviction", err
		}
		msg := ""
		for _, r := range e.Status.Responders {
			if r.Name == evictionrequest.ImperativeEvictor && r.Message != nil {
				msg = *r.Message
			}
		}
		want := fmt.Sprintf("%s=Completed %s=Active ", responder, evictionrequest.ImperativeEvictor)
		return states(e) == want && strings.Contains(msg, "disruption budget"), states(e) + msg, nil
	})
	if gone, err := podGone(ctx, pod); err != nil || gone {
		t.Fatalf("the pod was evicted against its budget (gone %v, %v)", gone, err)
	}

	// The budget allows one disruption: the evictor tries again at once (not after its back-off of
	// an hour) and goes through.
	pdb.Status.DisruptionsAllowed = 1
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod is evicted, its request and its Eviction (kept) say TargetEvicted", func(ctx context.Context) (bool, string, error) {
		gone, err := podGone(ctx, pod)
		if err != nil || !gone {
			return false, "pod still there", err
		}
		r := &lifecyclev1alpha1.EvictionRequest{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(req), r); err != nil {
			return false, "", err
		}
		e, err := evictionOf(ctx, pod)
		return err == nil && e != nil && meta.IsStatusConditionTrue(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) &&
				meta.IsStatusConditionTrue(r.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)),
			fmt.Sprintf("eviction %v, conditions %v", e != nil, r.Status.Conditions), err
	})
}

// TestBudgetPacedRetries: three pods of one budget that allows one disruption at a time, as a
// StatefulSet's: the imperative evictor evicts one, its evictions of the others are refused and
// back off (an hour here); each time the budget allows a disruption again (the disruption
// controller's work, done by the test: none runs here), the evictor tries at once and evicts one
// more, and never more than the budget allows.
func TestBudgetPacedRetries(t *testing.T) {
	ctx := context.Background()
	var pods []*corev1.Pod
	for i := range 3 {
		pod := createPod(t, fmt.Sprintf("db-%d", i))
		orig := pod.DeepCopy()
		pod.Labels["set"] = "db"
		if err := k8s.Patch(ctx, pod, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"set": "db"}},
		},
	}
	if err := k8s.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pdb) })
	allow := func(healthy int32) {
		t.Helper()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			t.Fatal(err)
		}
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: healthy, DesiredHealthy: healthy - 1, ExpectedPods: healthy, DisruptionsAllowed: 1}
		if err := k8s.Status().Update(ctx, pdb); err != nil {
			t.Fatal(err)
		}
	}
	allow(3)
	for _, pod := range pods {
		request(t, pod, descheduler)
	}
	left := func(ctx context.Context) ([]string, error) {
		var out []string
		for _, pod := range pods {
			gone, err := podGone(ctx, pod)
			if err != nil {
				return nil, err
			}
			if !gone {
				out = append(out, pod.Name)
			}
		}
		return out, nil
	}
	refused := func(ctx context.Context, pod string) (bool, error) {
		var list lifecyclev1alpha1.EvictionList
		if err := k8s.List(ctx, &list, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			for _, r := range e.Status.Responders {
				if e.Spec.Target.Pod.Name == pod && r.Name == evictionrequest.ImperativeEvictor && r.Message != nil && strings.Contains(*r.Message, "disruption budget") {
					return true, nil
				}
			}
		}
		return false, nil
	}
	for want := 2; want >= 0; want-- {
		var remaining []string
		eventually(t, fmt.Sprintf("one more pod evicted, the others refused (%d left)", want), func(ctx context.Context) (bool, string, error) {
			var err error
			if remaining, err = left(ctx); err != nil || len(remaining) != want {
				return false, fmt.Sprint(remaining), err
			}
			for _, name := range remaining {
				if ok, err := refused(ctx, name); err != nil || !ok {
					return false, name + " not refused yet", err
				}
			}
			return true, "", nil
		})
		// The budget holds them: nothing more goes while it allows nothing. The controller decided
		// about each pod left with the budget as it is now (the version of its status the
		// eviction left), and only then may the test tell that it evicted none.
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			t.Fatal(err)
		}
		version := evictiondecide.BudgetsVersion([]policyv1.PodDisruptionBudget{*pdb})
		for _, name := range remaining {
			expectLooked(t, name, time.Time{}, map[string]string{"budgets": version})
		}
		if now, err := left(ctx); err != nil || len(now) != want {
			t.Fatalf("evicted beyond the budget: %v left, want %d (%v)", now, want, err)
		}
		if want > 0 {
			allow(int32(want + 1))
		}
	}
}

// TestCancellation: while a responder works on the eviction (heartbeating), when every requester withdraws, the eviction is canceled (the active responder
// Canceled, Failed=CanceledDueToNoRequesters, copied into the request), and once the request is
// deleted the Eviction is collected. The pod is never evicted.
func TestCancellation(t *testing.T) {
	ctx := context.Background()
	const responder = "busy.example.com/operator"
	pod := createPod(t, "busy", corev1.EvictionResponder{Name: responder, Priority: ptr.To[int32](20000)})
	req := request(t, pod, "other.example.com/descheduler")

	var name string
	eventually(t, "the operator is active", func(ctx context.Context) (bool, string, error) {
		e, err := evictionOf(ctx, pod)
		if err != nil || e == nil {
			return false, "no Eviction", err
		}
		name = e.Name
		return len(e.Status.TargetResponders) > 0 && e.Status.TargetResponders[0].State == lifecyclev1alpha1.ResponderStateActive, states(e), nil
	})
	e := &lifecyclev1alpha1.Eviction{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, e); err != nil {
		t.Fatal(err)
	}
	orig := e.DeepCopy()
	for i := range e.Status.Responders {
		if e.Status.Responders[i].Name == responder {
			e.Status.Responders[i].HeartbeatTime = ptr.To(metav1.Now())
			e.Status.Responders[i].Message = ptr.To("moving the data")
		}
	}
	if err := k8s.Status().Patch(ctx, e, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}

	origReq := req.DeepCopy()
	req.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	if err := k8s.Patch(ctx, req, client.MergeFrom(origReq)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the eviction is canceled, and the request says so", func(ctx context.Context) (bool, string, error) {
		e, err := evictionOf(ctx, pod)
		if err != nil || e == nil {
			return false, "no Eviction", err
		}
		r := &lifecyclev1alpha1.EvictionRequest{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(req), r); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed))
		rc := meta.FindStatusCondition(r.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed))
		ok := c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters) &&
			rc != nil && rc.Status == metav1.ConditionTrue && rc.Reason == c.Reason &&
			e.Status.TargetResponders[0].State == lifecyclev1alpha1.ResponderStateCanceled &&
			len(e.Status.Requesters) == 1 && e.Status.Requesters[0].Intent == lifecyclev1alpha1.RequesterIntentWithdrawn
		return ok, fmt.Sprintf("%s %v %v", states(e), c, rc), nil
	})
	if err := k8s.Delete(ctx, req); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Eviction is collected", func(ctx context.Context) (bool, string, error) {
		e, err := evictionOf(ctx, pod)
		return e == nil, "still there", err
	})
	if gone, err := podGone(ctx, pod); err != nil || gone {
		t.Fatalf("a canceled eviction evicted the pod (gone %v, %v)", gone, err)
	}
}

// TestSilentResponderPassedOver: a responder that heartbeats once and then stops is passed over
// (Interrupted) once the KEP's 20 minutes since its heartbeat have run out, not before, and the
// imperative evictor evicts the pod. The API server enforces those 20 minutes, so this test takes
// them: it runs only with NODEMAINT_SLOW_TESTS=1.
func TestSilentResponderPassedOver(t *testing.T) {
	if os.Getenv("NODEMAINT_SLOW_TESTS") != "1" {
		t.Skip("takes the API server's heartbeat deadline (20 minutes): set NODEMAINT_SLOW_TESTS=1")
	}
	ctx := context.Background()
	const responder = "silent.example.com/operator"
	pod := createPod(t, "silent", corev1.EvictionResponder{Name: responder, Priority: ptr.To[int32](20000)})
	request(t, pod, descheduler)

	var e *lifecyclev1alpha1.Eviction
	eventually(t, "the responder is active", func(ctx context.Context) (bool, string, error) {
		var err error
		e, err = evictionOf(ctx, pod)
		if err != nil || e == nil {
			return false, "no Eviction", err
		}
		if len(e.Status.TargetResponders) == 0 {
			return false, "no target responders yet", nil
		}
		return e.Status.TargetResponders[0].State == lifecyclev1alpha1.ResponderStateActive, states(e), nil
	})
	orig := e.DeepCopy()
	heartbeat := metav1.Now()
	for i := range e.Status.Responders {
		if e.Status.Responders[i].Name == responder {
			e.Status.Responders[i].HeartbeatTime = &heartbeat
		}
	}
	if err := k8s.Status().Patch(ctx, e, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	// Silent from now on.
	// Active at every look until 5s before the API server's deadline.
	deadline := heartbeat.Add(evictionrequest.HeartbeatDeadline)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Second, time.Until(deadline.Add(-5*time.Second)), true, func(ctx context.Context) (bool, error) {
		got, err := evictionOf(ctx, pod)
		if err != nil {
			return false, err
		}
		if got == nil || got.Status.TargetResponders[0].State != lifecyclev1alpha1.ResponderStateActive {
			return false, fmt.Errorf("passed over %v before its heartbeat deadline: %v", time.Until(deadline), got)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "interrupted, and the pod evicted by the imperative evictor", func(ctx context.Context) (bool, string, error) {
		gone, err := podGone(ctx, pod)
		if err != nil || !gone {
			got, _ := evictionOf(ctx, pod)
			if got != nil {
				return false, states(got), err
			}
			return false, "pod there", err
		}
		return true, "", nil
	})
	t.Logf("passed over and evicted %v after the deadline", time.Since(deadline).Round(time.Second))
}
