package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/evictionrequest"
	"github.com/nodemaint/nodemaint/internal/nodeaction"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// writeRequests writes a plan of EvictionRequests (requestWrites' withdrawRequests, then its
// requestRequests), each write with an optimistic lock on the request seen. A request that comes to
// ask for its pod's eviction is an Event on the pod, as a pod condition's request is.
func (r *NodeReconciler) writeRequests(ctx context.Context, plan evictionrequest.Plan, seen *evictionrequest.Observed, pods []*corev1.Pod) error {
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
	var (
		mu                                 sync.Mutex
		errs                               []error
		created, asked, withdrawn, deleted int
		adopted                            int
	)
	record := func(err error, what *int) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			*what++
		case stale(err) || apierrors.IsAlreadyExists(err):
		default:
			errs = append(errs, err)
		}
	}
	requested := func(req *lifecyclev1alpha1.EvictionRequest) {
		if pod := podOf[req.Spec.Target.Pod.UID]; pod != nil {
			eventSink{r.Recorder}.requested(pod)
		}
	}
	var g errgroup.Group
	g.SetLimit(podWritesPerNode)
	for _, want := range plan.Update {
		orig := byName[client.ObjectKeyFromObject(want)]
		g.Go(func() error {
			err := r.Client.Patch(ctx, want, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
			if want.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
				record(err, &withdrawn)
				return nil
			}
			record(err, &asked)
			if err == nil && orig.Spec.Intent != want.Spec.Intent {
				requested(want)
			}
			return nil
		})
	}
	for _, req := range plan.Delete {
		g.Go(func() error {
			record(r.Client.Delete(ctx, req, client.Preconditions{UID: &req.UID}), &deleted)
			return nil
		})
	}
	// Requests that stay, given their pod as owner (evictionrequest.PodOwner), so that the
	// garbage collector removes them with it.
	for _, want := range plan.Adopt {
		orig := byName[client.ObjectKeyFromObject(want)]
		g.Go(func() error {
			record(r.Client.Patch(ctx, want, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})), &adopted)
			return nil
		})
	}
	for _, req := range plan.Create {
		g.Go(func() error {
			err := r.Client.Create(ctx, req)
			record(err, &created)
			if err == nil {
				requested(req)
			}
			return nil
		})
	}
	_ = g.Wait()
	if created+asked+withdrawn+deleted+adopted > 0 {
		log.FromContext(ctx).Info("EvictionRequests updated", "created", created, "askedAgain", asked, "withdrawn", withdrawn, "deleted", deleted, "adopted", adopted)
	}
	return errors.Join(errs...)
}

// nodeGone removes what the protocol left of a node that is gone (deleted under maintenance:
// drained, then deleted; an autoscaler's scale-down): the protocol's writes of a decision with
// nothing to ask or withdraw. Under the EvictionRequest protocol, its requests whose pods are
// gone are deleted and the rest are given their pod as owner, so that the garbage collector
// removes them with their pods (which the pod garbage collector deletes, their node gone). A
// pod's deletion brings this reconcile (nodeOfPod maps it to its node, gone or not), as does a
// request's change (nodeOfRequest).
func (r *NodeReconciler) nodeGone(ctx context.Context, node string) (reconcile.Result, error) {
	p := r.protocol()
	seen, pods, err := p.observeGone(ctx, node)
	if err != nil || seen == nil {
		return reconcile.Result{}, err
	}
	w := p.writes(seen, pods, nodeaction.Decision{}, clockOrReal(r.Clock).Now())
	return reconcile.Result{}, r.writeRequests(ctx, w.withdrawRequests, seen, pods)
}

// The cache indexes of the EvictionRequest protocol (indexEvictionRequests).
const (
	// requestNodeIndex indexes nodemaint's EvictionRequests by their node (NodeLabel).
	requestNodeIndex = "nodemaint.dev/request-node"
	// requestPodIndex indexes nodemaint's EvictionRequests by their target pod's UID.
	requestPodIndex = "nodemaint.dev/request-pod-uid"
	// evictionPodIndex indexes the Evictions naming nodemaint as a requester by their target
	// pod's UID.
	evictionPodIndex = "nodemaint.dev/eviction-pod-uid"
)

// indexEvictionRequests registers the indexes by which the node controller finds its
// EvictionRequests and their Evictions, so that a node's reconcile and an Eviction's event read
// the objects of their pods only, not all of a namespace's or the cluster's.
func indexEvictionRequests(ctx context.Context, mgr manager.Manager) error {
	ours := func(o client.Object) *lifecyclev1alpha1.EvictionRequest {
		if r := o.(*lifecyclev1alpha1.EvictionRequest); r.Spec.Requester == names.Requester {
			return r
		}
		return nil
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &lifecyclev1alpha1.EvictionRequest{}, requestNodeIndex, func(o client.Object) []string {
		if r := ours(o); r != nil && r.Labels[evictionrequest.NodeLabel] != "" {
			return []string{r.Labels[evictionrequest.NodeLabel]}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing EvictionRequests by node: %w", err)
	}
	if err := idx.IndexField(ctx, &lifecyclev1alpha1.EvictionRequest{}, requestPodIndex, func(o client.Object) []string {
		if r := ours(o); r != nil && r.Spec.Target.Pod != nil {
			return []string{string(r.Spec.Target.Pod.UID)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing EvictionRequests by pod: %w", err)
	}
	if err := idx.IndexField(ctx, &lifecyclev1alpha1.Eviction{}, evictionPodIndex, func(o client.Object) []string {
		e := o.(*lifecyclev1alpha1.Eviction)
		if _, ours := e.Labels[names.Requester]; ours && e.Spec.Target.Pod != nil {
			return []string{string(e.Spec.Target.Pod.UID)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing Evictions by pod: %w", err)
	}
	return nil
}

// nodeOfRequest maps one of nodemaint's EvictionRequests to its node.
func nodeOfRequest(_ context.Context, o client.Object) []reconcile.Request {
	if n := o.GetLabels()[evictionrequest.NodeLabel]; n != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
	}
	return nil
}

// nodesOfEviction maps an Eviction naming nodemaint as a requester to the nodes of nodemaint's
// EvictionRequests for its pod (NodeLabel): an Eviction's end, which lets a withdrawn request
// go, comes after its pod is gone, so the pod cannot say whose node it was.
func nodesOfEviction(ctx context.Context, c client.Reader, o client.Object) []reconcile.Request {
	e := o.(*lifecyclev1alpha1.Eviction)
	if _, ours := e.Labels[names.Requester]; !ours || e.Spec.Target.Pod == nil {
		return nil
	}
	var requests lifecyclev1alpha1.EvictionRequestList
	if err := c.List(ctx, &requests, client.InNamespace(e.Namespace), client.MatchingFields{requestPodIndex: string(e.Spec.Target.Pod.UID)}); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []reconcile.Request
	for i := range requests.Items {
		node := requests.Items[i].Labels[evictionrequest.NodeLabel]
		if node == "" || seen[node] {
			continue
		}
		seen[node] = true
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: node}})
	}
	return out
}

// podOfEviction reads the target pod of an Eviction naming nodemaint as a requester; nil for
// others.
func podOfEviction(ctx context.Context, c client.Reader, o client.Object) *corev1.Pod {
	e := o.(*lifecyclev1alpha1.Eviction)
	if _, ours := e.Labels[names.Requester]; !ours || e.Spec.Target.Pod == nil {
		return nil
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Spec.Target.Pod.Name}, pod); err != nil || pod.Spec.NodeName == "" {
		return nil
	}
	return pod
}
