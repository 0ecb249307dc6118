package evictionrequest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestEvictionRequestValidation follows upstream's TestEvictionRequestValidation: a request for
// a pod that does not exist, that has another UID, or that is in a scheduling group ends Failed
// with reason EvictionInvalid and TargetEvicted False (EvictionFailed), its observedGeneration
// set; once withdrawn, it keeps those conditions and observes its new generation.
func TestEvictionRequestValidation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		createPod bool
		mutate    []func(*corev1.Pod)
		uid       types.UID // the request's target UID; "": the pod's
		message   string
	}{
		// upstream: TestEvictionRequestValidation "pod not found"
		{name: "pod_not_found", uid: "55fcee67-c0cb-409d-b610-c16d9d765b7b", message: "not found"},
		// upstream: TestEvictionRequestValidation "pod UID mismatch"
		{name: "pod_UID_mismatch", createPod: true, uid: "55fcee67-c0cb-409d-b610-c16d9d765b7b", message: "UID mismatch"},
		// upstream: TestEvictionRequestValidation "pod with schedulingGroup"
		{name: "pod_with_schedulingGroup", createPod: true, mutate: []func(*corev1.Pod){withSchedulingGroup}, message: "references a SchedulingGroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t)
			uid := tc.uid
			if tc.createPod {
				pod := createPod(t, ns, tc.mutate...)
				if uid == "" {
					uid = pod.UID
				}
			}
			r := createRequest(t, ns, podName, uid, requester1)
			want := failed(lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid, tc.message)
			first := expectRequest(t, r, 1, want)

			setIntent(t, r, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
			second := expectRequest(t, r, 2, want)
			// The conditions are kept as they were: the same transitions, only observed again.
			for _, c := range first.Status.Conditions {
				now := meta.FindStatusCondition(second.Status.Conditions, c.Type)
				if now == nil || now.Status != c.Status || now.Reason != c.Reason || !now.LastTransitionTime.Equal(&c.LastTransitionTime) {
					t.Errorf("condition %s changed once the request was withdrawn: %+v, was %+v", c.Type, now, c)
				}
			}
			if err := k8s.List(context.Background(), &lifecyclev1alpha1.EvictionList{}, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			var evs lifecyclev1alpha1.EvictionList
			if err := k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if len(evs.Items) > 0 {
				t.Errorf("an invalid request got an Eviction: %s", evs.Items[0].Name)
			}
		})
	}
}

// TestEvictionValidation follows upstream's TestEvictionValidation "pod with schedulingGroup":
// there, an Eviction created by someone else than the controller, of a pod in a scheduling group,
// ends Failed with EvictionInvalid. nodemaint differs on purpose: it writes only the Evictions it
// created (marked with its label), and leaves a pod another party's Eviction names to that party,
// so the Eviction stays as its creator wrote it.
func TestEvictionValidation(t *testing.T) {
	ns := namespace(t)
	pod := createPod(t, ns, withSchedulingGroup)
	since := time.Now()
	e := &lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "evict-", Namespace: ns},
		Spec: lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{
			Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID},
		}},
	}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	expectLooked(t, ns, pod.Name, since)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(e), e); err != nil {
		t.Fatal(err)
	}
	if len(e.Status.Conditions) > 0 || e.Status.ObservedGeneration != nil {
		t.Errorf("nodemaint wrote another party's Eviction: %+v", e.Status)
	}
}

// processCase is one of upstream's TestEvictionRequestEvictionProcess cases.
type processCase struct {
	name                               string
	deletePod, terminatePod            bool
	cancelEviction, createNewRequester bool
	completeWithoutTermination         bool
	responderLastUpdateMissing         bool
	wantReason                         lifecyclev1alpha1.EvictionConditionReason
	wantMessage                        string
}

// TestEvictionRequestEvictionProcess follows upstream's TestEvictionRequestEvictionProcess: one
// Eviction per pod, pod-1-<pod>, with its requesters and responders as labels, owned by its
// requests; the responders in order of priority, the next Active when one completes; the
// conditions copied to the requests; the Eviction kept once its pod is terminal or deleted
// (PodTerminal, PodDeleted), a silent last responder Interrupted after a grace; a cancellation
// (CanceledDueToNoRequesters) and the next Eviction, pod-2-<pod>, for the same request or another;
// NoFurtherResponder when every responder completed without the pod going, then pod-2-<pod>.
func TestEvictionRequestEvictionProcess(t *testing.T) {
	for _, tc := range []processCase{
		// upstream: "should evict - pod termination"
		{name: "should_evict_for_pod_termination", terminatePod: true, wantReason: lifecyclev1alpha1.EvictionConditionReasonPodTerminal, wantMessage: "terminal"},
		// upstream: "should evict - pod deletion"
		{name: "should_evict_for_pod_deletion", deletePod: true, wantReason: lifecyclev1alpha1.EvictionConditionReasonPodDeleted, wantMessage: "deleted"},
		// upstream: "should cancel eviction, and allow for triggering it again via the same eviction request"
		{name: "should_cancel_eviction_and_trigger_it_again_via_the_same_request", cancelEviction: true, deletePod: true,
			wantReason: lifecyclev1alpha1.EvictionConditionReasonPodDeleted, wantMessage: "deleted"},
		// upstream: "should cancel eviction, and allow for triggering it again via different eviction request"
		{name: "should_cancel_eviction_and_trigger_it_again_via_another_request", cancelEviction: true, deletePod: true, createNewRequester: true,
			wantReason: lifecyclev1alpha1.EvictionConditionReasonPodDeleted, wantMessage: "deleted"},
		// upstream: "complete responders without pod termination fails eviction, but recovers with a new eviction"
		{name: "complete_responders_without_pod_termination_fails_then_recovers", terminatePod: true, completeWithoutTermination: true,
			wantReason: lifecyclev1alpha1.EvictionConditionReasonPodTerminal, wantMessage: "terminal"},
		// upstream: "should evict with pod termination, but last responder update fails"
		{name: "should_evict_for_pod_termination_last_responder_silent", terminatePod: true, responderLastUpdateMissing: true,
			wantReason: lifecyclev1alpha1.EvictionConditionReasonPodTerminal, wantMessage: "terminal"},
	} {
		t.Run(tc.name, func(t *testing.T) { evictionProcess(t, tc) })
	}
}

func evictionProcess(t *testing.T, tc processCase) {
	ns := namespace(t)
	mutate := []func(*corev1.Pod){withFinalizer, withResponder(responderB, 1000), withResponder(responderA, 1001)}
	if tc.completeWithoutTermination {
		// The third responder, nodemaint's imperative evictor, evicts the pod as it becomes
		// Active: where upstream's case runs the controller alone and completes that responder
		// itself, a budget keeps nodemaint's from evicting the pod before this test completes
		// its turn as upstream's does.
		blockingBudget(t, ns)
	}
	pod := createPod(t, ns, mutate...)
	r := createRequest(t, ns, pod.Name, pod.UID, requester1)
	requests := []*lifecyclev1alpha1.EvictionRequest{r}
	generation := int64(1)

	expectRequest(t, r, generation, awaiting)
	name := "pod-1-" + pod.Name
	expectEviction(t, ns, name, "created for the pod", func(e *lifecyclev1alpha1.Eviction) (bool, string) {
		want := lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: pod.Name, UID: pod.UID}}
		return equality.Semantic.DeepEqual(e.Spec.Target, want), fmt.Sprintf("%+v", e.Spec.Target.Pod)
	})
	var evs lifecyclev1alpha1.EvictionList
	if err := k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 {
		t.Fatalf("%d Evictions of one pod, want 1", len(evs.Items))
	}
	labels := wantLabels(requester1)
	progress := func(name string, a, b, c lifecyclev1alpha1.ResponderStateType, started string) {
		t.Helper()
		expectEviction(t, ns, name, abStates(a, b, c), func(e *lifecyclev1alpha1.Eviction) (bool, string) {
			conds, have := hasConditions(e.Status.Conditions, awaiting)
			ok := states(e) == abStates(a, b, c) && conds && ptr.Deref(e.Status.ObservedGeneration, 0) == 1 &&
				equality.Semantic.DeepEqual(e.Labels, labels) && slices.Equal(owners(e.OwnerReferences), ownerOf(requests...)) &&
				slices.ContainsFunc(e.Status.Requesters, func(q lifecyclev1alpha1.Requester) bool {
					return q.Name == requests[len(requests)-1].Spec.Requester && q.Intent == lifecyclev1alpha1.RequesterIntentEviction
				})
			for _, n := range []string{responderA, responderB, imperative} {
				rs := responderStatus(e, n)
				ok = ok && rs != nil && (n != started || rs.StartTime != nil)
			}
			return ok, fmt.Sprintf("%s; %s; labels %v; owners %v; requesters %v", states(e), have, e.Labels, owners(e.OwnerReferences), e.Status.Requesters)
		})
	}
	// The first responder, of the highest priority, is Active.
	progress(name, lifecyclev1alpha1.ResponderStateActive, lifecyclev1alpha1.ResponderStateInactive, lifecyclev1alpha1.ResponderStateInactive, responderA)
	if len(evs.Items[0].Status.Requesters) > 1 {
		t.Errorf("requesters %v, want one", evs.Items[0].Status.Requesters)
	}
	markResponder(t, ns, name, fieldManagerA, responderA, false)
	markResponder(t, ns, name, fieldManagerA, responderA, true)
	// The second is Active once the first completed.
	progress(name, lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateActive, lifecyclev1alpha1.ResponderStateInactive, responderB)
	markResponder(t, ns, name, fieldManagerB, responderB, false)

	switch {
	case tc.cancelEviction:
		setIntent(t, r, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
		generation = 2
		canceled := failed(lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters, "No active requesters")
		expectEviction(t, ns, name, "canceled", func(e *lifecyclev1alpha1.Eviction) (bool, string) {
			ok, have := hasConditions(e.Status.Conditions, canceled)
			want := abStates(lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateCanceled, lifecyclev1alpha1.ResponderStateInactive)
			return ok && states(e) == want && ptr.Deref(e.Status.ObservedGeneration, 0) == 1, states(e) + "; " + have
		})
		// The same conditions are copied to the request.
		expectRequest(t, r, generation, canceled)
		if tc.createNewRequester {
			r2 := createRequest(t, ns, pod.Name, pod.UID, requester2)
			requests = append(requests, r2)
			labels = wantLabels(requester1, requester2)
			r, generation = r2, 1
		} else {
			setIntent(t, r, lifecyclev1alpha1.EvictionRequestIntentEviction)
			generation = 3
		}
	case tc.completeWithoutTermination:
		markResponder(t, ns, name, fieldManagerB, responderB, true)
		expectEviction(t, ns, name, "the imperative evictor Active", func(e *lifecyclev1alpha1.Eviction) (bool, string) {
			want := abStates(lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateActive)
			return states(e) == want, states(e)
		})
		markResponder(t, ns, name, fieldManagerC, imperative, true)
		expectEviction(t, ns, name, "every responder completed without evicting: NoFurtherResponder", func(e *lifecyclev1alpha1.Eviction) (bool, string) {
			ok, have := hasConditions(e.Status.Conditions, failed(lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder, "completed without evicting"))
			want := abStates(lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateCompleted)
			return ok && states(e) == want && ptr.Deref(e.Status.ObservedGeneration, 0) == 1, states(e) + "; " + have
		})
	}

	if tc.cancelEviction || tc.completeWithoutTermination {
		// The failed Eviction stays; the next one, pod-2-<pod>, starts over.
		name = "pod-2-" + pod.Name
		progress(name, lifecyclev1alpha1.ResponderStateActive, lifecyclev1alpha1.ResponderStateInactive, lifecyclev1alpha1.ResponderStateInactive, responderA)
		expectEviction(t, ns, "pod-1-"+pod.Name, "the failed Eviction kept, without AwaitingEviction", func(e *lifecyclev1alpha1.Eviction) (bool, string) {
			_, have := hasConditions(e.Status.Conditions, nil)
			for _, c := range e.Status.Conditions {
				if c.Reason == string(lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction) {
					return false, have
				}
			}
			return true, have
		})
		markResponder(t, ns, name, fieldManagerA, responderA, true)
	}
	progress(name, lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateActive, lifecyclev1alpha1.ResponderStateInactive, responderB)

	switch {
	case tc.deletePod:
		deletePod(t, pod)
	case tc.terminatePod:
		markSucceeded(t, pod, corev1.PodSucceeded)
	}
	wantStates := abStates(lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateInterrupted, lifecyclev1alpha1.ResponderStateInactive)
	if !tc.responderLastUpdateMissing {
		// The active responder reports its completion after it saw the pod go, within the
		// controller's grace.
		markResponder(t, ns, name, fieldManagerB, responderB, true)
		wantStates = abStates(lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateCompleted, lifecyclev1alpha1.ResponderStateInactive)
	}
	want := evicted(tc.wantReason, tc.wantMessage)
	expectEviction(t, ns, name, fmt.Sprintf("kept, %s", tc.wantReason), func(e *lifecyclev1alpha1.Eviction) (bool, string) {
		ok, have := hasConditions(e.Status.Conditions, want)
		ok = ok && states(e) == wantStates && ptr.Deref(e.Status.ObservedGeneration, 0) == 1 &&
			equality.Semantic.DeepEqual(e.Labels, labels) && slices.Equal(owners(e.OwnerReferences), ownerOf(requests...))
		return ok, fmt.Sprintf("%s; %s; labels %v; owners %v", states(e), have, e.Labels, owners(e.OwnerReferences))
	})
	// The same conditions are copied to the request.
	expectRequest(t, r, generation, want)
}
