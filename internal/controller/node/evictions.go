package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/evictor"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/internal/requester"
)

// podWritesPerNode bounds the pod writes (evacuation requests, evictions) one node's reconcile
// has in flight at once.
const podWritesPerNode = 10

// evictPods evicts the pods the decision names (their owners did not accept in time), through
// the Eviction API so that PodDisruptionBudgets hold. A refused eviction backs off for that pod
// only, whether it was refused (a budget) or failed (any other error): it returns the earliest
// back-off, when the drain should look again, the evictions the API server forbade (denied: RBAC,
// or a webhook's 403, for the maintenances' Events), and an error only when a pod could not be
// read before its eviction. Each pod is read again from the API server first, with what answers
// for it in the protocol (see overtaken); seen is what the protocol observed of the node.
// grace are the grace periods the decision gives (nodedecide.Decision.GracePeriods): a pod it
// does not name gets its own.
func (r *Reconciler) evictPods(ctx context.Context, pods []drain.Classified, grace map[types.UID]int64, seen *requester.Observed, now time.Time) (time.Duration, error, error) {
	var (
		mu     sync.Mutex
		wait   time.Duration
		errs   []error
		denied []error
	)
	sink := sinkOf(r.Recorder)
	// Like kubectl drain, the pods of a node are evicted in parallel (EvictionSlots bounds the
	// evictions in flight across all nodes): one at a time, a node of 100 pods held a worker for
	// minutes on a loaded API server while the other nodes waited their turn.
	var g errgroup.Group
	g.SetLimit(podWritesPerNode)
	for _, c := range pods {
		pod := c.Pod
		g.Go(func() error {
			switch why, err := r.overtaken(ctx, pod, seen); {
			case err != nil:
				mu.Lock()
				errs = append(errs, fmt.Errorf("reading pod %s/%s before its eviction: %w", pod.Namespace, pod.Name, err))
				mu.Unlock()
				return nil
			case why != "":
				// The cache shows the change soon, and the next decision with it.
				log.FromContext(ctx).Info("not evicting pod: changed since the decision", "pod", client.ObjectKeyFromObject(pod), "why", why)
				return nil
			}
			res := r.evictor().Evict(ctx, pod, gracePeriod(grace, pod), now, "")
			mu.Lock()
			defer mu.Unlock()
			switch res.Outcome {
			case evictor.Gone:
				// Deleted or replaced by a namesake since the cache saw it: nothing to evict.
			case evictor.Failed:
				// The pod's alone: it backs off and is reported (EvictionFailed), and the node's
				// other pods and timers go on. An error returned here would put the whole node
				// into the work queue's back-off, up to 1,000s, for a pod that may fail for good
				// (two budgets select it, a webhook refuses it).
				evictionsTotal.WithLabelValues("failed").Inc()
				sink.evictionFailed(pod, res.Err, !res.Again)
				wait = recheck.Soonest(wait, res.Wait)
				log.FromContext(ctx).Error(res.Err, "eviction failed", "pod", client.ObjectKeyFromObject(pod))
				if apierrors.IsForbidden(res.Err) {
					denied = append(denied, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, res.Err))
				}
			case evictor.Refused:
				evictionsTotal.WithLabelValues("refused").Inc()
				sink.evictionRefused(pod, res.Message, !res.Again)
				wait = recheck.Soonest(wait, res.Wait)
				log.FromContext(ctx).V(1).Info("eviction refused", "pod", client.ObjectKeyFromObject(pod), "reason", res.Message)
			default:
				evictionsTotal.WithLabelValues("evicted").Inc()
				log.FromContext(ctx).Info("evicted pod", "pod", client.ObjectKeyFromObject(pod), "source", c.Class.Source)
			}
			return nil
		})
	}
	_ = g.Wait()
	return wait, errors.Join(denied...), errors.Join(errs...)
}

// overtaken reads the pod from the API server, answered as its protocol has it there
// (protocol.Protocol's Live: the pod's own conditions, or its Eviction), and says why it must not
// be evicted after all (drain.Overtaken), "" when it still must. The decision was taken from the
// cache, which lags the API server: an owner's answer written just before the response timeout
// ran out may not be in it yet, and evicting the pod then would take its workload below its
// replicas for nothing (the owner is surging a replacement). A GET or two per eviction, which
// only pods nobody answered get.
func (r *Reconciler) overtaken(ctx context.Context, pod *corev1.Pod, seen *requester.Observed) (string, error) {
	if r.APIReader == nil {
		return "", nil
	}
	live, err := r.Observer.Protocol.Live(ctx, r.APIReader, pod, seen)
	if err != nil {
		return "", err
	}
	return drain.Overtaken(live), nil
}

// evictor evicts through the Eviction API, with the refusal memory the reconcilers share.
func (r *Reconciler) evictor() *evictor.Evictor {
	return &evictor.Evictor{Client: r.Client, Refusals: r.Observer.Refusals, Slots: r.EvictionSlots}
}

// deletePods deletes the pods a drain still waits for, bypassing PodDisruptionBudgets: the admin
// asked for it with drainTimeoutAction Delete, and the drain timed out. The UID precondition
// deletes each pod and never a namesake created since; grace gives the grace periods, as to
// evictPods.
func (r *Reconciler) deletePods(ctx context.Context, node *corev1.Node, pods []drain.Classified, grace map[types.UID]int64) error {
	var errs []error
	for _, c := range pods {
		opts := []client.DeleteOption{client.Preconditions{UID: &c.Pod.UID}}
		if g := gracePeriod(grace, c.Pod); g != nil {
			opts = append(opts, client.GracePeriodSeconds(*g))
		}
		switch err := r.Client.Delete(ctx, c.Pod, opts...); {
		case observe.Stale(err):
		case apierrors.IsForbidden(err):
			// The permission was revoked since it was last asked: asked again at once, and
			// until then no other deletion is tried.
			r.Observer.PodDeletion.Forbidden()
			return errors.Join(append(errs, err)...)
		case err != nil:
			errs = append(errs, err)
		default:
			evictionsTotal.WithLabelValues("deleted").Inc()
			sinkOf(r.Recorder).deleted(c.Pod, node)
		}
	}
	return errors.Join(errs...)
}

// gracePeriod is the pod's grace period among those of a decision, nil when it names none (the
// pod's own terminationGracePeriodSeconds).
func gracePeriod(grace map[types.UID]int64, pod *corev1.Pod) *int64 {
	if g, ok := grace[pod.UID]; ok {
		return &g
	}
	return nil
}
