package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// podWritesPerNode bounds the pod writes (evacuation requests, evictions) one node's reconcile
// has in flight at once.
const podWritesPerNode = 10

// evictCurrent evicts the pods of the current order group whose owners did not accept in time,
// through the Eviction API so that PodDisruptionBudgets hold. A refused eviction backs off for
// that pod only. It returns when the drain should look again.
func (r *NodeReconciler) evictCurrent(ctx context.Context, plan drain.Plan, intent maintenance.NodeIntent, now time.Time) (time.Duration, error) {
	var (
		mu   sync.Mutex
		next requeue
		errs []error
	)
	later := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		next.after(d)
	}
	policy := r.active.policy(policyOf(intent))
	// Like kubectl drain, the pods of a node are evicted in parallel (EvictionSlots bounds the
	// evictions in flight across all nodes): one at a time, a node of 100 pods held a worker for
	// minutes on a loaded API server while the other nodes waited their turn.
	var g errgroup.Group
	g.SetLimit(podWritesPerNode)
	for _, c := range plan.Current {
		pod := c.Pod
		d := drain.Decide(c, now, policy)
		if !d.Evict {
			later(d.RecheckAfter)
			continue
		}
		if wait := r.Evictions.Wait(pod.UID, now); wait > 0 {
			later(wait)
			continue
		}
		g.Go(func() error {
			gone, refusal, err := r.evict(ctx, pod)
			switch {
			case gone:
				// Deleted or replaced by a namesake since the cache saw it: nothing to evict.
				r.Evictions.Done(pod.UID)
			case err != nil:
				evictionsTotal.WithLabelValues("failed").Inc()
				if _, _, before := r.Evictions.Refusal(pod.UID); !before {
					r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, nodemaintv1alpha1.BlockedReasonEvictionFailed, "Evict", "node maintenance: %v", err)
				}
				later(r.Evictions.Refused(pod.UID, now, nodemaintv1alpha1.BlockedReasonEvictionFailed, err.Error()))
				mu.Lock()
				errs = append(errs, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err))
				mu.Unlock()
			case refusal != "":
				evictionsTotal.WithLabelValues("refused").Inc()
				if _, _, before := r.Evictions.Refusal(pod.UID); !before {
					r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "EvictionRefused", "Evict", "node maintenance: %s", refusal)
				}
				later(r.Evictions.Refused(pod.UID, now, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, refusal))
				log.FromContext(ctx).V(1).Info("eviction refused", "pod", client.ObjectKeyFromObject(pod), "reason", refusal)
			default:
				evictionsTotal.WithLabelValues("evicted").Inc()
				r.Evictions.Done(pod.UID)
				log.FromContext(ctx).Info("evicted pod", "pod", client.ObjectKeyFromObject(pod), "source", c.Class.Source)
			}
			return nil
		})
	}
	_ = g.Wait()
	return next.d, errors.Join(errs...)
}

// evict asks the Eviction API to evict the pod, this pod and not a namesake created since (a UID
// precondition). A refusal (429, a PodDisruptionBudget) is not an error: it returns the budget's
// own message. gone says the pod was no longer there to evict.
func (r *NodeReconciler) evict(ctx context.Context, pod *corev1.Pod) (gone bool, refusal string, err error) {
	if r.EvictionSlots != nil {
		if err := r.EvictionSlots.Acquire(ctx, 1); err != nil {
			return false, "", err
		}
		defer r.EvictionSlots.Release(1)
	}
	// An eviction can hang in the API server (e.g. on a budget it has not processed yet); it must
	// not hold a worker for long.
	ctx, cancel := context.WithTimeout(ctx, evictionTimeout)
	defer cancel()
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	}
	err = r.Client.SubResource("eviction").Create(ctx, pod, eviction)
	switch {
	case err == nil:
		return false, "", nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Conflict: the UID precondition failed, a namesake replaced the pod. The next
		// reconcile, from the cache, decides about the namesake.
		return true, "", nil
	case apierrors.IsTooManyRequests(err):
		return false, refusalMessage(err), nil
	}
	return false, "", err
}

// refusalMessage is the PodDisruptionBudget's own message from a refused eviction, e.g. "The
// disruption budget web needs 1 healthy pods and has 1 currently".
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

// evictionTimeout bounds one eviction request.
const evictionTimeout = 10 * time.Second

// deleteLeft deletes the pods a drain still waits for, bypassing PodDisruptionBudgets: the admin
// asked for it with drainTimeoutAction Delete, and the drain timed out. Skipped pods stay.
func (r *NodeReconciler) deleteLeft(ctx context.Context, node *corev1.Node, plan drain.Plan) error {
	var errs []error
	for _, group := range [][]drain.Classified{plan.Current, plan.Later, plan.WaitCompleted} {
		for _, c := range group {
			if c.Pod.DeletionTimestamp != nil || c.Class.Protected != "" {
				continue
			}
			// The UID precondition deletes this pod and never a namesake created since.
			if err := r.Client.Delete(ctx, c.Pod, client.Preconditions{UID: &c.Pod.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				errs = append(errs, err)
				continue
			}
			evictionsTotal.WithLabelValues("deleted").Inc()
			r.Recorder.Eventf(c.Pod, node, corev1.EventTypeWarning, "DeletedAfterDrainTimeout", "Delete",
				"deleted, bypassing PodDisruptionBudgets: the drain of node %s timed out and drainTimeoutAction is Delete", node.Name)
		}
	}
	return errors.Join(errs...)
}
