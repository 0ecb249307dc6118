package evictionrequest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	lifecycleapply "k8s.io/client-go/applyconfigurations/lifecycle/v1alpha1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// The responders and requesters of upstream's cases.
const (
	responderA    = "a.example.com/foo"
	responderB    = "b.example.com/bar"
	fieldManagerA = "a.example.com"
	fieldManagerB = "b.example.com"
	fieldManagerC = "c.example.com"
	requester1    = "foo.example.com/1"
	requester2    = "foo.example.com/2"
	imperative    = lifecyclev1alpha1.EvictionResponderImperativeEviction
	podName       = "test-pod"
)

// timeout bounds every wait: generous, for a busy machine; nothing here asserts how fast.
const timeout = 60 * time.Second

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	testutil.Eventually(t, timeout, what, cond)
}

// namespace creates a namespace of the case's own and deletes it after.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "conformance-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// createPod creates test-pod in ns, changed by mutate, and reports it Running and Ready, as a
// kubelet would (the Eviction API ignores the budgets of pending pods).
func createPod(t *testing.T, ns string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns, Labels: map[string]string{"app": "test-responder"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "test-container", Image: "busybox"}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p := &corev1.Pod{}
		if k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), p) == nil && len(p.Finalizers) > 0 {
			_ = k8s.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}
		_ = k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
	})
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func withResponder(name string, priority int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.EvictionResponders = append(p.Spec.EvictionResponders, corev1.EvictionResponder{Name: name, Priority: ptr.To(priority)})
	}
}

func withFinalizer(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, "prevent/deletion") }

func withSchedulingGroup(p *corev1.Pod) {
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("group")}
}

// createRequest creates an EvictionRequest of requester for the pod's name and uid.
func createRequest(t *testing.T, ns, name string, uid types.UID, requester string) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	r := &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "foo-", Namespace: ns},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: name, UID: uid}},
			Requester: requester,
			Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
	if err := k8s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// setIntent updates the request's intent.
func setIntent(t *testing.T, r *lifecyclev1alpha1.EvictionRequest, intent lifecyclev1alpha1.EvictionRequestIntent) {
	t.Helper()
	cur := getRequest(t, r)
	cur.Spec.Intent = intent
	if err := k8s.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

func getRequest(t *testing.T, r *lifecyclev1alpha1.EvictionRequest) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	cur := &lifecyclev1alpha1.EvictionRequest{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(r), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

// cond is a condition as upstream's tests match one: type, status, reason, and a part of the
// message.
type cond struct {
	Type    lifecyclev1alpha1.EvictionConditionType
	Status  metav1.ConditionStatus
	Reason  lifecyclev1alpha1.EvictionConditionReason
	Message string
}

// failed are the conditions of an Eviction (or request) that failed for reason.
func failed(reason lifecyclev1alpha1.EvictionConditionReason, message string) []cond {
	return []cond{
		{lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionTrue, reason, message},
		{lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonEvictionFailed, ""},
	}
}

// evicted are the conditions of an Eviction (or request) whose target went for reason.
func evicted(reason lifecyclev1alpha1.EvictionConditionReason, message string) []cond {
	return []cond{
		{lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonSucceeded, ""},
		{lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionTrue, reason, message},
	}
}

// awaiting are the conditions of an Eviction (or request) under way.
var awaiting = []cond{
	{lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction, ""},
	{lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction, ""},
}

// hasConditions reports whether conds holds every wanted condition, and what it holds.
func hasConditions(conds []metav1.Condition, want []cond) (bool, string) {
	var have []string
	for _, c := range conds {
		have = append(have, fmt.Sprintf("%s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message))
	}
	for _, w := range want {
		c := meta.FindStatusCondition(conds, string(w.Type))
		if c == nil || c.Status != w.Status || c.Reason != string(w.Reason) || !strings.Contains(c.Message, w.Message) {
			return false, strings.Join(have, ", ")
		}
	}
	return true, strings.Join(have, ", ")
}

// expectRequest waits for the request's conditions and observed generation.
func expectRequest(t *testing.T, r *lifecyclev1alpha1.EvictionRequest, generation int64, want []cond) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	var cur lifecyclev1alpha1.EvictionRequest
	eventually(t, fmt.Sprintf("request %s: generation %d observed, %v", r.Name, generation, want), func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(r), &cur); err != nil {
			return false, "", err
		}
		ok, have := hasConditions(cur.Status.Conditions, want)
		return ok && ptr.Deref(cur.Status.ObservedGeneration, 0) == generation, fmt.Sprintf("observedGeneration %v, %s", ptr.Deref(cur.Status.ObservedGeneration, 0), have), nil
	})
	return &cur
}

// expectEviction waits for the Eviction ns/name to satisfy check (which says what it saw).
func expectEviction(t *testing.T, ns, name, what string, check func(e *lifecyclev1alpha1.Eviction) (bool, string)) *lifecyclev1alpha1.Eviction {
	t.Helper()
	var e lifecyclev1alpha1.Eviction
	eventually(t, "Eviction "+name+": "+what, func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &e); err != nil {
			return false, "", err
		}
		ok, saw := check(&e)
		return ok, saw, nil
	})
	return &e
}

// states are the Eviction's target responders as "name=State" in their order.
func states(e *lifecyclev1alpha1.Eviction) string {
	var s []string
	for _, t := range e.Status.TargetResponders {
		s = append(s, fmt.Sprintf("%s(%d)=%s", t.Name, ptr.Deref(t.Priority, 0), t.State))
	}
	return strings.Join(s, " ")
}

// abStates are upstream's three responders' states, in the form states renders them.
func abStates(a, b, c lifecyclev1alpha1.ResponderStateType) string {
	return fmt.Sprintf("%s(1001)=%s %s(1000)=%s %s(100)=%s", responderA, a, responderB, b, imperative, c)
}

// responderStatus is the named responder's status entry; nil when none.
func responderStatus(e *lifecyclev1alpha1.Eviction, name string) *lifecyclev1alpha1.ResponderStatus {
	i := slices.IndexFunc(e.Status.Responders, func(r lifecyclev1alpha1.ResponderStatus) bool { return r.Name == name })
	if i < 0 {
		return nil
	}
	return &e.Status.Responders[i]
}

// markResponder is a responder's report on the Eviction (a server-side apply of its own entry,
// as upstream's tests write it): a heartbeat, an expected completion and a message, and the
// completion when complete.
func markResponder(t *testing.T, ns, eviction, fieldManager, responder string, complete bool) {
	t.Helper()
	rs := lifecycleapply.ResponderStatus().WithName(responder).WithHeartbeatTime(metav1.Now()).
		WithExpectedCompletionTime(metav1.NewTime(time.Now().Add(time.Hour))).WithMessage(responder)
	if complete {
		rs.WithCompletionTime(metav1.Now())
	}
	apply := lifecycleapply.Eviction(eviction, ns).WithStatus(lifecycleapply.EvictionStatus().WithResponders(rs))
	// The imperative evictor's entry is nodemaint's own: a test that stands in for it (as
	// upstream's stands in for upstream's responder) takes the fields over.
	force := responder == imperative
	if _, err := cs.LifecycleV1alpha1().Evictions(ns).ApplyStatus(context.Background(), apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: force}); err != nil {
		t.Fatal(err)
	}
}

// markSucceeded reports the pod Succeeded, as its kubelet would.
func markSucceeded(t *testing.T, pod *corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	cur := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = phase
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "test-container", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Now()}}}}
	if err := k8s.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

// deletePod deletes the pod and removes its finalizers: it is gone.
func deletePod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// blockingBudget creates a PodDisruptionBudget of the pods of test-responder whose status allows
// no disruption (no disruption controller runs here: its status is written as that controller's).
func blockingBudget(t *testing.T, ns string) *policyv1.PodDisruptionBudget {
	t.Helper()
	ctx := context.Background()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "test-pdb", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "test-responder"}},
		},
	}
	if err := k8s.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1, DisruptionsAllowed: 0}
	if err := k8s.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	return pdb
}

// wantLabels are an Eviction's labels for its requesters and upstream's three responders, and
// nodemaint's mark of its own Evictions (a difference on purpose: the controller writes only the
// Evictions it marked).
func wantLabels(requesters ...string) map[string]string {
	out := map[string]string{responderA: "responder", responderB: "responder", imperative: "responder",
		evictionrequest.ControllerLabel: controllerName}
	for _, r := range requesters {
		out[r] = "requester"
	}
	return out
}

// owners renders ownerReferences as "Kind/name/uid", sorted.
func owners(refs []metav1.OwnerReference) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.APIVersion+" "+r.Kind+"/"+r.Name+"/"+string(r.UID))
	}
	slices.Sort(out)
	return out
}

func ownerOf(rs ...*lifecyclev1alpha1.EvictionRequest) []string {
	var out []string
	for _, r := range rs {
		out = append(out, "lifecycle.k8s.io/v1alpha1 EvictionRequest/"+r.Name+"/"+string(r.UID))
	}
	slices.Sort(out)
	return out
}

// expectLooked waits for the controller's reconcile of the pod ns/name that started at or after
// since and ended: the evidence that it looked, before a test asserts that it wrote nothing.
func expectLooked(t *testing.T, ns, name string, since time.Time) {
	t.Helper()
	eventually(t, fmt.Sprintf("a look at %s/%s since %s", ns, name, since.Format(time.StampMilli)), func(context.Context) (bool, string, error) {
		r := logs.Reconciles("eviction", ns, name, since)
		return len(r) > 0, fmt.Sprint(r), nil
	})
}
