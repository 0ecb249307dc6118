package evictor

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// budgetRefusal is the API server's 429 for an eviction a PodDisruptionBudget refuses.
func budgetRefusal() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 1 healthy pods and has 1 currently"}}
	return err
}

// TestEvictOutcomes: each answer of the eviction subresource is one outcome; refusals and
// failures are remembered with their reason and back off, and an eviction or a pod gone forgets
// them.
func TestEvictOutcomes(t *testing.T) {
	now := time.Unix(1000, 0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "uid-1"}}
	for _, tc := range []struct {
		name    string
		answer  error
		want    Outcome
		reason  string
		message string
	}{
		{"accepted", nil, Evicted, "", ""},
		{"budget", budgetRefusal(), Refused, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, "The disruption budget web needs 1 healthy pods and has 1 currently"},
		{"two budgets", apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")), Failed, nodemaintv1alpha1.BlockedReasonEvictionFailed, "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."},
		{"gone", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web-1"), Gone, "", ""},
		{"namesake", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "web-1", errors.New("uid precondition")), Gone, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked *policyv1.Eviction
			c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				SubResourceCreate: func(_ context.Context, _ client.Client, sub string, _ client.Object, ev client.Object, _ ...client.SubResourceCreateOption) error {
					if sub == "eviction" {
						asked = ev.(*policyv1.Eviction)
					}
					return tc.answer
				},
			}).Build()
			refusals := NewRefusals(time.Second, time.Minute)
			refusals.Refused(pod.UID, now, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, "an earlier refusal")
			res := (&Evictor{Client: c, Refusals: refusals}).Evict(t.Context(), pod, nil, now, "v1")
			if asked == nil || asked.DeleteOptions == nil || *asked.DeleteOptions.Preconditions.UID != pod.UID {
				t.Fatalf("eviction %+v: want the pod's UID as precondition", asked)
			}
			if res.Outcome != tc.want {
				t.Errorf("outcome %s, want %s", res.Outcome, tc.want)
			}
			if res.Message != tc.message {
				t.Errorf("message %q, want %q", res.Message, tc.message)
			}
			if !res.Again {
				t.Errorf("result %+v not to be tried again, want again", res)
			}
			reason, msg, remembered := refusals.Refusal(pod.UID)
			if remembered != (tc.reason != "") {
				t.Errorf("refusal remembered %v, want %v", remembered, tc.reason != "")
			}
			if reason != tc.reason {
				t.Errorf("refusal remembered with reason %q, want %q", reason, tc.reason)
			}
			if remembered && msg != tc.message {
				t.Errorf("refusal remembered with message %q, want %q", msg, tc.message)
			}
			if remembered && res.Wait != 2*time.Second {
				t.Errorf("a second refusal backs off %v, want 2s", res.Wait)
			}
			if remembered {
				if of := refusals.Of(nil); of != nil {
					t.Errorf("refusals of no pods %v, want none", of)
				}
			}
		})
	}
}

// TestEvictGracePeriod: the eviction carries the grace period it is given (a maintenance's
// evictionGracePeriodSeconds), and none when given none (the pod's own).
func TestEvictGracePeriod(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "uid-1"}}
	ten := int64(10)
	for _, grace := range []*int64{nil, &ten} {
		var asked *policyv1.Eviction
		c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
			SubResourceCreate: func(_ context.Context, _ client.Client, _ string, _ client.Object, ev client.Object, _ ...client.SubResourceCreateOption) error {
				asked = ev.(*policyv1.Eviction)
				return nil
			},
		}).Build()
		(&Evictor{Client: c, Refusals: NewRefusals(time.Second, time.Minute)}).Evict(t.Context(), pod, grace, time.Unix(1000, 0), "")
		if got := asked.DeleteOptions.GracePeriodSeconds; (got == nil) != (grace == nil) || got != nil && *got != *grace {
			t.Errorf("grace period %v, want %v", got, grace)
		}
	}
}
