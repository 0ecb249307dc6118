// Package evictor evicts pods through the Eviction API (policy/v1), so that PodDisruptionBudgets
// hold, and remembers each pod's refused evictions (Refusals) to back off per pod. The node
// controller's drain and KEP-4563's imperative evictor (internal/controller/eviction) evict through it, with
// one memory.
package evictor

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// Timeout bounds one eviction request: one can hang in the API server (e.g. on a budget it has
// not processed yet), and must not hold a worker for long.
const Timeout = 10 * time.Second

// Evictor evicts pods, one call at a time per pod.
type Evictor struct {
	// Client writes the evictions.
	Client client.SubResourceClientConstructor
	// Refusals remembers the refused evictions; shared by every Evictor of the controller.
	Refusals *Refusals
	// Slots bounds the evictions in flight; nil is unbounded.
	Slots *semaphore.Weighted
}

// Outcome is what became of an eviction.
type Outcome string

const (
	// Evicted: the API server accepted the eviction; the pod is terminating.
	Evicted Outcome = "evicted"
	// Gone: the pod was deleted, or replaced by a namesake, since it was read: nothing to evict.
	Gone Outcome = "gone"
	// Refused: a PodDisruptionBudget refused it (429); the pod backs off.
	Refused Outcome = "refused"
	// Failed: any other error (two budgets, a webhook, RBAC); the pod backs off.
	Failed Outcome = "failed"
)

// Result is an eviction's outcome, with the back-off of a refused or failed one.
type Result struct {
	Outcome Outcome
	// Message is the budget's own message for Refused ("The disruption budget web needs 1
	// healthy pods and has 1 currently"), the error's for Failed.
	Message string
	// Err is the error of Failed.
	Err error
	// Wait is how long the pod backs off (Refused, Failed).
	Wait time.Duration
	// Again: the pod's previous eviction was refused or failed too (its Events are not repeated).
	Again bool
}

// Evict evicts the pod, this pod and not a namesake created since (a UID precondition, which fails
// as a conflict), with the grace period given in seconds (nil: the pod's own
// terminationGracePeriodSeconds). A refusal or failure is remembered with the state of the budgets
// it met (budgets: "" when not known), and forgotten once the pod is evicted or gone.
func (e *Evictor) Evict(ctx context.Context, pod *corev1.Pod, grace *int64, now time.Time, budgets string) Result {
	_, _, again := e.Refusals.Refusal(pod.UID)
	err := e.evict(ctx, pod, grace)
	var res Result
	switch {
	case err == nil:
		res = Result{Outcome: Evicted}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		res = Result{Outcome: Gone}
	case apierrors.IsTooManyRequests(err):
		res = Result{Outcome: Refused, Message: refusalMessage(err)}
		res.Wait = e.Refusals.RefusedUnder(pod.UID, now, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, res.Message, budgets)
	default:
		res = Result{Outcome: Failed, Message: err.Error(), Err: err}
		res.Wait = e.Refusals.RefusedUnder(pod.UID, now, nodemaintv1alpha1.BlockedReasonEvictionFailed, res.Message, budgets)
	}
	if res.Outcome == Evicted || res.Outcome == Gone {
		e.Refusals.Done(pod.UID)
	}
	res.Again = again
	return res
}

func (e *Evictor) evict(ctx context.Context, pod *corev1.Pod, grace *int64) error {
	if e.Slots != nil {
		if err := e.Slots.Acquire(ctx, 1); err != nil {
			return err
		}
		defer e.Slots.Release(1)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return e.Client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}, GracePeriodSeconds: grace},
	})
}

// refusalMessage is the PodDisruptionBudget's own message from a refused eviction, e.g. "The
// disruption budget web needs 1 healthy pods and has 1 currently"; the error's where it has none.
func refusalMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, cause := range status.Status().Details.Causes {
			if cause.Type == policyv1.DisruptionBudgetCause {
				return cause.Message
			}
		}
	}
	return err.Error()
}
