package evictionrequest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestResponderSkipProcessing follows upstream's TestResponderSkipProcessing: the imperative
// responder leaves alone an Eviction not labelled for it, labelled for it as a requester, not
// observed by the controller yet, failed, evicted, on which it is inactive, or whose entry has its
// completion: it writes nothing to its entry. These Evictions are another party's (upstream's
// tests write their status as the controller would): nodemaint's imperative evictor answers only
// the Evictions of its own controller, so it writes nothing to any of them either.
func TestResponderSkipProcessing(t *testing.T) {
	active := func(state lifecyclev1alpha1.ResponderStateType, mutate ...func(*lifecyclev1alpha1.EvictionStatus)) func(time.Time) lifecyclev1alpha1.EvictionStatus {
		return func(now time.Time) lifecyclev1alpha1.EvictionStatus {
			st := lifecyclev1alpha1.EvictionStatus{
				ObservedGeneration: ptr.To[int64](1),
				TargetResponders:   []lifecyclev1alpha1.TargetResponder{{Name: imperative, Priority: ptr.To[int32](100), State: state}},
				Responders:         []lifecyclev1alpha1.ResponderStatus{{Name: imperative, StartTime: ptr.To(metav1.NewTime(now))}},
			}
			for _, m := range mutate {
				m(&st)
			}
			return st
		}
	}
	condition := func(t lifecyclev1alpha1.EvictionConditionType, reason lifecyclev1alpha1.EvictionConditionReason) func(*lifecyclev1alpha1.EvictionStatus) {
		return func(st *lifecyclev1alpha1.EvictionStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: string(t), Status: metav1.ConditionTrue, ObservedGeneration: 1,
				LastTransitionTime: metav1.Now(), Reason: string(reason), Message: "message"})
		}
	}
	for _, tc := range []struct {
		name     string
		role     lifecyclev1alpha1.EvictionParticipantRole
		status   func(time.Time) lifecyclev1alpha1.EvictionStatus
		complete bool
	}{
		// upstream: "should skip processing for a non-annotated eviction"
		{name: "non-annotated", status: active(lifecyclev1alpha1.ResponderStateActive)},
		// upstream: "should skip processing for incorrectly annotated eviction"
		{name: "incorrectly_annotated", role: lifecyclev1alpha1.EvictionParticipantRoleRequester, status: active(lifecyclev1alpha1.ResponderStateActive)},
		// upstream: "should skip processing for non observed eviction"
		{name: "non_observed", role: lifecyclev1alpha1.EvictionParticipantRoleResponder, status: active(lifecyclev1alpha1.ResponderStateActive, func(st *lifecyclev1alpha1.EvictionStatus) { st.ObservedGeneration = nil })},
		// upstream: "should skip processing for failed eviction"
		{name: "failed", role: lifecyclev1alpha1.EvictionParticipantRoleResponder, status: active(lifecyclev1alpha1.ResponderStateInactive,
			condition(lifecyclev1alpha1.EvictionConditionFailed, lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid))},
		// upstream: "should skip processing for evicted eviction"
		{name: "evicted", role: lifecyclev1alpha1.EvictionParticipantRoleResponder, status: active(lifecyclev1alpha1.ResponderStateInactive,
			condition(lifecyclev1alpha1.EvictionConditionTargetEvicted, lifecyclev1alpha1.EvictionConditionReasonPodDeleted))},
		// upstream: "should skip processing for inactive eviction"
		{name: "inactive", role: lifecyclev1alpha1.EvictionParticipantRoleResponder, status: func(now time.Time) lifecyclev1alpha1.EvictionStatus {
			return lifecyclev1alpha1.EvictionStatus{
				ObservedGeneration: ptr.To[int64](1),
				TargetResponders: []lifecyclev1alpha1.TargetResponder{
					{Name: "foo/bar", Priority: ptr.To[int32](1000), State: lifecyclev1alpha1.ResponderStateActive},
					{Name: imperative, Priority: ptr.To[int32](100), State: lifecyclev1alpha1.ResponderStateInactive},
				},
				Responders: []lifecyclev1alpha1.ResponderStatus{{Name: "foo/bar", StartTime: ptr.To(metav1.NewTime(now))}, {Name: imperative}},
			}
		}},
		// upstream: "should skip processing for eviction with completionTime"
		{name: "completionTime", role: lifecyclev1alpha1.EvictionParticipantRoleResponder, complete: true, status: active(lifecyclev1alpha1.ResponderStateActive, func(st *lifecyclev1alpha1.EvictionStatus) {
			st.Responders[0].CompletionTime = ptr.To(metav1.NewTime(st.Responders[0].StartTime.Add(time.Second)))
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			pod := createPod(t, ns)
			e := &lifecyclev1alpha1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: ns},
				Spec:       lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID}}},
			}
			if tc.role != "" {
				e.Labels = map[string]string{"app": "bar", imperative: string(tc.role)}
			}
			if err := k8s.Create(ctx, e); err != nil {
				t.Fatal(err)
			}
			e.Status = tc.status(time.Now())
			since := time.Now()
			if err := k8s.Status().Update(ctx, e); err != nil {
				t.Fatal(err)
			}
			expectLooked(t, ns, pod.Name, since)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(e), e); err != nil {
				t.Fatal(err)
			}
			rs := responderStatus(e, imperative)
			if rs == nil || rs.HeartbeatTime != nil || rs.ExpectedCompletionTime != nil || rs.Message != nil || (rs.CompletionTime != nil) != tc.complete {
				t.Errorf("the imperative responder's entry was written: %+v", rs)
			}
			if gone, err := podGone(ctx, pod); err != nil || gone {
				t.Errorf("the pod was evicted (%v, %v)", gone, err)
			}
		})
	}
}

// imperativeEntry waits for the imperative evictor's entry on the Eviction ns/name to have
// started and heartbeaten, with an expected completion and a completion as wanted, and a message
// containing message.
func imperativeEntry(t *testing.T, ns, name string, expected, completed bool, message string) *lifecyclev1alpha1.ResponderStatus {
	t.Helper()
	var out *lifecyclev1alpha1.ResponderStatus
	expectEviction(t, ns, name, fmt.Sprintf("the imperative evictor says %q (expected completion %v, completed %v)", message, expected, completed), func(e *lifecyclev1alpha1.Eviction) (bool, string) {
		rs := responderStatus(e, imperative)
		if rs == nil {
			return false, "no entry"
		}
		out = rs
		return rs.StartTime != nil && rs.HeartbeatTime != nil && (rs.ExpectedCompletionTime != nil) == expected && (rs.CompletionTime != nil) == completed &&
				strings.Contains(ptr.Deref(rs.Message, ""), message),
			fmt.Sprintf("start %v heartbeat %v expected %v completion %v message %q", rs.StartTime, rs.HeartbeatTime, rs.ExpectedCompletionTime, rs.CompletionTime, ptr.Deref(rs.Message, ""))
	})
	return out
}

// TestResponderEviction follows upstream's TestResponderEviction, on an Eviction of nodemaint's
// controller (the only ones its imperative evictor answers): the imperative evictor evicts the pod
// through the Eviction API, says the pod is being terminated gracefully with its expected
// completion, and completes once the pod terminated; a budget that refuses the eviction shows as a
// failed attempt, counted; a cancellation stops it.
//
// Where upstream's responder tries a refused eviction again after an exponential back-off
// (attempts=2 while the budget still refuses), nodemaint's tries again once the budget's status
// changed and allows it, and not before (the API server would refuse it again): a difference on
// purpose.
func TestResponderEviction(t *testing.T) {
	for _, tc := range []struct {
		name           string
		budget, cancel bool
	}{
		// upstream: "normal eviction"
		{name: "normal_eviction"},
		// upstream: "pdb stalls eviction"
		{name: "pdb_stalls_eviction", budget: true},
		// upstream: "pdb stalls eviction and cancels eviction"
		{name: "pdb_stalls_eviction_and_cancels_eviction", budget: true, cancel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			pod := createPod(t, ns, func(p *corev1.Pod) { p.Finalizers = []string{"eviction-responder/test"} })
			var pdb client.Object
			if tc.budget {
				pdb = blockingBudget(t, ns)
			}
			r := createRequest(t, ns, pod.Name, pod.UID, requester1)
			name := "pod-1-" + pod.Name
			if tc.budget {
				imperativeEntry(t, ns, name, false, false, "pod deletion via the /eviction subresource failed (attempts=1)")
				if tc.cancel {
					setIntent(t, r, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
					expectEviction(t, ns, name, "canceled", func(e *lifecyclev1alpha1.Eviction) (bool, string) {
						return len(e.Status.TargetResponders) == 1 && e.Status.TargetResponders[0].State == lifecyclev1alpha1.ResponderStateCanceled, states(e)
					})
					since := time.Now()
					if err := k8s.Delete(ctx, pdb); err != nil {
						t.Fatal(err)
					}
					// The budget's deletion brings a look at the pod whose eviction it refused.
					expectLooked(t, ns, pod.Name, since)
					if rs := imperativeEntry(t, ns, name, false, false, "(attempts=1)"); rs.CompletionTime != nil {
						t.Errorf("the canceled imperative evictor completed: %+v", rs)
					}
					cur := &corev1.Pod{}
					if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil || cur.DeletionTimestamp != nil {
						t.Errorf("the pod was evicted after the cancellation (%v)", err)
					}
					return
				}
				if err := k8s.Delete(ctx, pdb); err != nil {
					t.Fatal(err)
				}
			}
			imperativeEntry(t, ns, name, true, false, "pod has been been marked for deletion via the /eviction subresource and is being terminated gracefully")
			markSucceeded(t, pod, corev1.PodSucceeded)
			imperativeEntry(t, ns, name, true, true, `pod has been deleted and fully terminated (pod phase="Succeeded")`)
		})
	}
}

// TestThirdPartyTerminationDetection follows upstream's TestThirdPartyTerminationDetection: the
// imperative evictor, active on a pod that someone else deletes or that terminates, completes,
// saying so. Here its eviction is refused by a budget first, so that the pod is still there when
// the third party acts (upstream's case writes an Eviction of the controller's itself).
func TestThirdPartyTerminationDetection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delete  bool
		message string
	}{
		// upstream: "pod deleted"
		{name: "pod_deleted", delete: true, message: "pod has been deleted and fully terminated"},
		// upstream: "pod terminated"
		{name: "pod_terminated", message: `pod has been fully terminated (pod phase="Failed")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t)
			blockingBudget(t, ns)
			pod := createPod(t, ns)
			createRequest(t, ns, pod.Name, pod.UID, requester1)
			name := "pod-1-" + pod.Name
			imperativeEntry(t, ns, name, false, false, "(attempts=1)")
			if tc.delete {
				deletePod(t, pod)
			} else {
				markSucceeded(t, pod, corev1.PodFailed)
			}
			imperativeEntry(t, ns, name, true, true, tc.message)
		})
	}
}

func podGone(ctx context.Context, pod *corev1.Pod) (bool, error) {
	err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
	if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	return err != nil, nil
}
