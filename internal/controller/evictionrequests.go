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

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/evictionrequest"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictionrequests,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictions,verbs=get;list;watch

// observeRequests reads, under the EvictionRequest protocol, nodemaint's EvictionRequests of the
// node and the Evictions of its pods, and returns the pods as answered by them
// (evictionrequest.Answer). Under the pod condition protocol it returns the pods as they are and
// nil.
func (o *observer) observeRequests(ctx context.Context, node *corev1.Node, pods []*corev1.Pod) ([]*corev1.Pod, *evictionrequest.Observed, error) {
	if o.protocol != nodemaintv1alpha1.EvacuationProtocolEvictionRequest {
		return pods, nil, nil
	}
	er := &evictionrequest.Observed{Node: node.Name, Evictions: map[types.UID]*lifecyclev1alpha1.Eviction{},
		PodConditionsLeft: evictionrequest.PodConditionsLeft(pods)}
	var reqs lifecyclev1alpha1.EvictionRequestList
	if err := o.client.List(ctx, &reqs, client.MatchingFields{requestNodeIndex: node.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing EvictionRequests: %w", err)
	}
	er.Requests = reqs.Items
	// The Evictions naming nodemaint as a requester (the Eviction controller labels them so) of
	// the node's pods and of the requests' pods, looked up by pod: listing a namespace's
	// Evictions for every node reconcile copied all of them (1,000 in the benchmark's scenario
	// M) each time, and was half of the controller's CPU.
	uids := make(map[types.UID]bool, len(pods)+len(er.Requests))
	for _, pod := range pods {
		uids[pod.UID] = true
	}
	for _, r := range er.Requests {
		if r.Spec.Target.Pod != nil {
			uids[r.Spec.Target.Pod.UID] = true
		}
	}
	for uid := range uids {
		var evs lifecyclev1alpha1.EvictionList
		if err := o.client.List(ctx, &evs, client.MatchingFields{evictionPodIndex: string(uid)}); err != nil {
			return nil, nil, fmt.Errorf("listing Evictions: %w", err)
		}
		for i := range evs.Items {
			er.Evictions[uid] = &evs.Items[i]
		}
	}
	return evictionrequest.Answer(pods, *er), er, nil
}

// writeRequests writes the protocol's part of the decision: first (before the node) the
// withdrawals, deletions and adoptions; then, once the node is cordoned (create true), the requests.
func (r *NodeReconciler) writeRequests(ctx context.Context, plan evictionrequest.Plan, observed *evictionrequest.Observed, pods []*corev1.Pod, create bool) error {
	byName := map[types.NamespacedName]*lifecyclev1alpha1.EvictionRequest{}
	for i := range observed.Requests {
		byName[client.ObjectKeyFromObject(&observed.Requests[i])] = &observed.Requests[i]
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
	var g errgroup.Group
	g.SetLimit(podWritesPerNode)
	if !create {
		for _, want := range plan.Update {
			if want.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
				continue
			}
			orig := byName[client.ObjectKeyFromObject(want)]
			g.Go(func() error {
				record(r.Client.Patch(ctx, want, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})), &withdrawn)
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
	} else {
		for _, want := range plan.Update {
			if want.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
				continue
			}
			orig := byName[client.ObjectKeyFromObject(want)]
			g.Go(func() error {
				err := r.Client.Patch(ctx, want, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
				record(err, &asked)
				if err == nil && orig.Spec.Intent != want.Spec.Intent {
					if pod := podOf[want.Spec.Target.Pod.UID]; pod != nil {
						eventSink{r.Recorder}.requested(pod)
					}
				}
				return nil
			})
		}
		for _, req := range plan.Create {
			g.Go(func() error {
				err := r.Client.Create(ctx, req)
				record(err, &created)
				if err == nil {
					if pod := podOf[req.Spec.Target.Pod.UID]; pod != nil {
						eventSink{r.Recorder}.requested(pod)
					}
				}
				return nil
			})
		}
	}
	_ = g.Wait()
	if created+asked+withdrawn+deleted+adopted > 0 {
		log.FromContext(ctx).Info("EvictionRequests updated", "created", created, "askedAgain", asked, "withdrawn", withdrawn, "deleted", deleted, "adopted", adopted)
	}
	return errors.Join(errs...)
}

// nodeGone removes, under the EvictionRequest protocol, what nodemaint left of a node that is gone
// (deleted under maintenance: drained, then deleted; an autoscaler's scale-down): its
// EvictionRequests (NodeLabel) whose pods are gone, and the rest are given their pod as owner,
// so that the garbage collector removes them with their pods (which the pod garbage collector
// deletes, their node gone). The same evictionrequest.Decide as for a node, with nothing to ask
// or withdraw. A pod's deletion brings this reconcile (nodeOfPod maps it to its node, gone or
// not), as does a request's change (nodeOfRequest).
func (r *NodeReconciler) nodeGone(ctx context.Context, node string) (reconcile.Result, error) {
	if r.Protocol != nodemaintv1alpha1.EvacuationProtocolEvictionRequest {
		return reconcile.Result{}, nil
	}
	obs := evictionrequest.Observed{Node: node, Evictions: map[types.UID]*lifecyclev1alpha1.Eviction{}}
	var reqs lifecyclev1alpha1.EvictionRequestList
	if err := r.Client.List(ctx, &reqs, client.MatchingFields{requestNodeIndex: node}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing EvictionRequests: %w", err)
	}
	if len(reqs.Items) == 0 {
		return reconcile.Result{}, nil
	}
	obs.Requests = reqs.Items
	var pods []*corev1.Pod
	for _, req := range reqs.Items {
		target := req.Spec.Target.Pod
		if target == nil {
			continue
		}
		pod := &corev1.Pod{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: target.Name}, pod)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return reconcile.Result{}, err
		case pod.UID != target.UID:
			continue
		}
		pods = append(pods, pod)
		var evs lifecyclev1alpha1.EvictionList
		if err := r.Client.List(ctx, &evs, client.MatchingFields{evictionPodIndex: string(pod.UID)}); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing Evictions: %w", err)
		}
		for i := range evs.Items {
			obs.Evictions[pod.UID] = &evs.Items[i]
		}
	}
	now := clockOrReal(r.Clock).Now()
	plan := evictionrequest.Decide(obs, pods, nil, nil, "", now)
	return reconcile.Result{}, r.writeRequests(ctx, plan, &obs, pods, false)
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
