package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/ownwrites"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// writeRequests writes a plan of EvictionRequests (protocol.Writes' WithdrawRequests, then
// its RequestRequests), each write with an optimistic lock on the request seen. A request that comes to
// ask for its pod's eviction is an Event on the pod, as a pod condition's request is.
func (r *Reconciler) writeRequests(ctx context.Context, plan requester.Writes, seen *requester.Observed, pods []*corev1.Pod) error {
	if seen == nil {
		return nil
	}
	byName := map[types.NamespacedName]*lifecyclev1alpha1.EvictionRequest{}
	for i := range seen.Requests {
		byName[client.ObjectKeyFromObject(&seen.Requests[i])] = &seen.Requests[i]
	}
	podOf := map[types.UID]*corev1.Pod{}
	for _, pod := range pods {
		podOf[pod.UID] = pod
	}
	var c requestWriteCounts
	requested := func(req *lifecyclev1alpha1.EvictionRequest) {
		if pod := podOf[req.Spec.Target.Pod.UID]; pod != nil {
			sinkOf(r.Recorder).requested(pod)
		}
	}
	var g errgroup.Group
	g.SetLimit(podWritesPerNode)
	for _, want := range plan.Update {
		orig := byName[client.ObjectKeyFromObject(want)]
		g.Go(func() error {
			err := r.Client.Patch(ctx, want, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
			if want.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
				c.record(err, &c.withdrawn)
				return nil
			}
			c.record(err, &c.asked)
			if err == nil && orig.Spec.Intent != want.Spec.Intent {
				requested(want)
			}
			return nil
		})
	}
	r.deleteRequests(ctx, &g, plan.Delete, &c)
	// Requests that stay, given their pod as owner (requester.PodOwner), so that the
	// garbage collector removes them with it.
	for _, want := range plan.Adopt {
		orig := byName[client.ObjectKeyFromObject(want)]
		g.Go(func() error {
			c.record(r.Client.Patch(ctx, want, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})), &c.adopted)
			return nil
		})
	}
	r.createRequests(ctx, &g, seen.Node, plan.Create, &c, requested)
	_ = g.Wait()
	if c.created+c.asked+c.withdrawn+c.deleted+c.adopted > 0 {
		log.FromContext(ctx).Info("EvictionRequests updated", "created", c.created, "askedAgain", c.asked, "withdrawn", c.withdrawn, "deleted", c.deleted, "adopted", c.adopted)
	}
	return errors.Join(c.errs...)
}

// deleteRequests sends the deletes of EvictionRequests on g, each once: one deleted by an
// earlier reconcile that the cache still shows is not deleted again.
func (r *Reconciler) deleteRequests(ctx context.Context, g *errgroup.Group, reqs []*lifecyclev1alpha1.EvictionRequest, c *requestWriteCounts) {
	deleted, created := r.recentRequests()
	for _, req := range reqs {
		if deleted.Recently(req.UID) {
			continue
		}
		g.Go(func() error {
			err := r.Client.Delete(ctx, req, client.Preconditions{UID: &req.UID})
			if err == nil || apierrors.IsNotFound(err) {
				deleted.Sent(req.UID)
				// The pod may be asked again (the drain stopped and started): a new request.
				created.Forget(req.Spec.Target.Pod.UID)
			}
			c.record(err, &c.deleted)
			return nil
		})
	}
}

// createRequests sends the creates of the node's EvictionRequests on g, each once per pod: one
// created by an earlier reconcile that the cache does not show yet is not created again. Only as
// many as the Eviction controller's backlog admits are sent (the others wait for the look the
// backlog wakes the node for: their pods are not asked yet, and their response timeout does not
// run). requested tells of each one created.
func (r *Reconciler) createRequests(ctx context.Context, g *errgroup.Group, node string, reqs []*lifecyclev1alpha1.EvictionRequest, c *requestWriteCounts,
	requested func(*lifecyclev1alpha1.EvictionRequest)) {
	_, created := r.recentRequests()
	var targets []types.NamespacedName
	reqs = slices.DeleteFunc(slices.Clone(reqs), func(req *lifecyclev1alpha1.EvictionRequest) bool { return created.Recently(req.Spec.Target.Pod.UID) })
	for _, req := range reqs {
		targets = append(targets, types.NamespacedName{Namespace: req.Namespace, Name: req.Spec.Target.Pod.Name})
	}
	admitted := r.Backlog.Admit(node, targets)
	if admitted < len(reqs) {
		log.FromContext(ctx).V(1).Info("EvictionRequests wait for the Eviction controller's backlog", "admitted", admitted, "waiting", len(reqs)-admitted)
	}
	for i, req := range reqs[:admitted] {
		g.Go(func() error {
			err := r.Client.Create(ctx, req)
			if err == nil || apierrors.IsAlreadyExists(err) {
				created.Sent(req.Spec.Target.Pod.UID)
			}
			if err != nil {
				// No new request for the Eviction controller to look at.
				r.Backlog.Done(targets[i])
			}
			c.record(err, &c.created)
			if err == nil {
				requested(req)
			}
			return nil
		})
	}
}

// requestWriteCounts counts one node's writes of EvictionRequests by what they did, and keeps the
// errors of those that failed but for a stale view (dropped, see observe.Stale) or a request
// that exists already.
type requestWriteCounts struct {
	mu                                          sync.Mutex
	errs                                        []error
	created, asked, withdrawn, deleted, adopted int
}

// recentRequests are the records of the EvictionRequests this replica deleted and created.
func (r *Reconciler) recentRequests() (deleted, created *ownwrites.Recent) {
	r.requestsOnce.Do(func() { r.requestsDeleted, r.requestsCreated = ownwrites.NewRecent(), ownwrites.NewRecent() })
	return r.requestsDeleted, r.requestsCreated
}

// record counts a write that succeeded in what.
func (c *requestWriteCounts) record(err error, what *int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		*what++
	case observe.Stale(err) || apierrors.IsAlreadyExists(err):
	default:
		c.errs = append(c.errs, err)
	}
}

// nodeGone removes what the protocol left of a node that is gone (deleted under maintenance:
// drained, then deleted; an autoscaler's scale-down): the protocol's writes of a decision with
// nothing to ask or withdraw. Under the EvictionRequest protocol, its requests whose pods are
// gone are deleted and the rest are given their pod as owner, so that the garbage collector
// removes them with their pods (which the pod garbage collector deletes, their node gone). A
// pod's deletion brings this reconcile (nodeOfPod maps it to its node, gone or not), as does a
// request's change (nodeOfRequest).
func (r *Reconciler) nodeGone(ctx context.Context, node string) (reconcile.Result, error) {
	p := r.Observer.Protocol
	if p.EvictionRequests == nil {
		return reconcile.Result{}, nil
	}
	seen, pods, err := p.EvictionRequests.ObserveGone(ctx, node)
	if err != nil || seen == nil {
		return reconcile.Result{}, err
	}
	w := p.Writes(seen, pods, nodedecide.Decision{}, r.Observer.Now())
	return reconcile.Result{}, r.writeRequests(ctx, w.WithdrawRequests, seen, pods)
}

// patchPods sets nodemaint's evacuation request with the message *reason on the pods, or
// withdraws it when reason is nil. Each write applies to the pod as observed only
// (evacuation.ConditionPatch, RemoveConditionPatch: its UID and resourceVersion), so a request
// never reaches a pod created since under the same name nor overwrites another requester's
// request set since the read, and a withdrawal removes nodemaint's own request only, the one it
// saw. A write refused as stale (evacuation.Stale) is dropped, and the version of the pod it was
// decided from remembered (r.conflicts): while the cache still shows that version, the pod's
// write is not sent again, since it would be refused the same way. It returns how soon the node
// is to be looked at again for the writes not done: observe.StaleRequeue after a refusal (the
// cache is usually a moment behind), cacheBehindRecheck while a pod is still behind from an
// earlier one (the cache is further behind), 0 when every write was done.
func (r *Reconciler) patchPods(ctx context.Context, pods []*corev1.Pod, reason *string, now time.Time) (time.Duration, error) {
	var (
		mu      sync.Mutex
		errs    []error
		done    int
		again   time.Duration
		skipped bool
		behind  = r.conflicts()
	)
	defer func() {
		if done > 0 && reason != nil {
			log.FromContext(ctx).Info("evacuation requests updated", "requested", done)
		} else if done > 0 {
			log.FromContext(ctx).Info("evacuation requests updated", "withdrawn", done)
		}
	}()
	// In parallel: one patch after the other, the requests for a node of 100 pods took seconds
	// on a loaded API server, and its owners only start moving pods once they have them.
	var g errgroup.Group
	g.SetLimit(podWritesPerNode)
	for _, orig := range pods {
		if behind.Behind(orig) {
			skipped = true
			continue
		}
		// The patch names the one condition (merged by type); the pod the API server returns
		// is read into a new object, which the record of writes keeps.
		var patch client.Patch
		if reason != nil {
			cond := maintenance.EvacuationRequest(*reason)
			cond.LastTransitionTime = metav1.NewTime(now)
			if c := evacuation.Condition(orig, evacuation.Request); c != nil && c.Status == cond.Status {
				cond.LastTransitionTime = c.LastTransitionTime
			}
			patch = evacuation.ConditionPatch(orig, cond)
		} else {
			patch = evacuation.RemoveConditionPatch(orig, evacuation.Request)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: orig.Namespace, Name: orig.Name}}
		before := orig.ResourceVersion
		g.Go(func() error {
			err := r.Client.Status().Patch(ctx, pod, patch)
			if err == nil {
				r.Observer.Written.Wrote(before, pod)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case evacuation.Stale(err):
				behind.Met(orig)
				again = recheck.Soonest(again, observe.StaleRequeue)
			case err != nil:
				errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
			default:
				done++
				if reason != nil {
					sinkOf(r.Recorder).requested(orig)
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	if skipped {
		again = recheck.Soonest(again, cacheBehindRecheck)
	}
	return again, errors.Join(errs...)
}

// cacheBehindRecheck is how soon a node is looked at again while the cache still shows a pod at
// the version a write of it was refused at: long enough not to spin on a cache a minute behind,
// short against the wait for an answer.
const cacheBehindRecheck = time.Second

// conflicts is the record of the pods' versions the writes were refused at.
func (r *Reconciler) conflicts() *ownwrites.Conflicts {
	r.conflictsOnce.Do(func() { r.podConflicts = ownwrites.NewConflicts() })
	return r.podConflicts
}
