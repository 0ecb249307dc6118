package protocol

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/requester"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// The cache indexes of the EvictionRequest protocol (SetupIndexes).
const (
	// requestNodeIndex indexes nodemaint's EvictionRequests by their node (NodeLabel): an
	// index of the informer's store (Stores), read by pointer.
	requestNodeIndex = "nodemaint.dev/request-node"
	// requestPodIndex indexes nodemaint's EvictionRequests by their target pod's UID: a field
	// index of the cache, read with the client by the watches' mappings.
	requestPodIndex = "nodemaint.dev/request-pod-uid"
	// evictionPodIndex indexes every Eviction by its target pod's UID, whoever created it and
	// whatever its labels (an Eviction controller other than nodemaint's, the in-tree one or
	// another installation, answers nodemaint's requests with Evictions that need not carry
	// nodemaint's labels): an index of the informer's store (Stores), read by pointer.
	evictionPodIndex = "nodemaint.dev/eviction-pod-uid"
)

// Stores are the cache informers' stores of EvictionRequests and Evictions, whose indexes by node
// and by pod a node's observation reads by pointer. A node's reconcile, and a NodeMaintenance's
// for each of its nodes, read the node's requests and its requested pods' Evictions: through
// client.List, each read allocated a list by reflection and copied every object into it, which
// in a drain of 10,000 pods was over a third of what the controller allocated and, with the
// garbage collection that followed, about half of its CPU.
// observe.ProtocolStores reads them from a manager's cache.
type Stores struct {
	Requests, Evictions toolscache.Indexer
}

// SetupIndexes registers the indexes by which the controllers find nodemaint's EvictionRequests
// and their Evictions, so that a node's reconcile and an Eviction's event read the objects of
// their pods only, not all of a namespace's or the cluster's; once per manager, s its stores.
func SetupIndexes(ctx context.Context, mgr manager.Manager, s Stores) error {
	if err := s.Index(); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &lifecyclev1alpha1.EvictionRequest{}, requestPodIndex, func(o client.Object) []string {
		if r := ours(o); r != nil && r.Spec.Target.Pod != nil {
			return []string{string(r.Spec.Target.Pod.UID)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing EvictionRequests by pod: %w", err)
	}
	return nil
}

// ours is the object if it is one of nodemaint's EvictionRequests.
func ours(o any) *lifecyclev1alpha1.EvictionRequest {
	if r, ok := o.(*lifecyclev1alpha1.EvictionRequest); ok && r.Spec.Requester == names.Requester {
		return r
	}
	return nil
}

// Index adds the indexes a node's observation reads to the stores: nodemaint's requests by node,
// every Eviction by its target pod.
func (s Stores) Index() error {
	if err := s.Requests.AddIndexers(toolscache.Indexers{requestNodeIndex: func(o any) ([]string, error) {
		if r := ours(o); r != nil && r.Labels[requester.NodeLabel] != "" {
			return []string{r.Labels[requester.NodeLabel]}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("indexing EvictionRequests by node: %w", err)
	}
	if err := s.Evictions.AddIndexers(toolscache.Indexers{evictionPodIndex: func(o any) ([]string, error) {
		if e, ok := o.(*lifecyclev1alpha1.Eviction); ok && e.Spec.Target.Pod != nil {
			return []string{string(e.Spec.Target.Pod.UID)}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("indexing Evictions by pod: %w", err)
	}
	return nil
}

// NodeOfRequest maps one of nodemaint's EvictionRequests to its node.
func NodeOfRequest(_ context.Context, o client.Object) []reconcile.Request {
	if n := o.GetLabels()[requester.NodeLabel]; n != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
	}
	return nil
}

// NodesOfEviction maps an Eviction of a pod nodemaint requests to the nodes of nodemaint's
// EvictionRequests for its pod (NodeLabel): an Eviction's end, which lets a withdrawn request
// go, comes after its pod is gone, so the pod cannot say whose node it was. Whichever Eviction
// controller created the Eviction, and whatever its labels.
func NodesOfEviction(ctx context.Context, c client.Reader, o client.Object) []reconcile.Request {
	seen := map[string]bool{}
	var out []reconcile.Request
	requests := requestsOf(ctx, c, o.(*lifecyclev1alpha1.Eviction))
	for i := range requests {
		node := requests[i].Labels[requester.NodeLabel]
		if node == "" || seen[node] {
			continue
		}
		seen[node] = true
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: node}})
	}
	return out
}

// EvictionAnswerChanged passes the Eviction events that change what the drain reads of them
// (requester.AnswerChanged): not a responder's heartbeat that says nothing new.
func EvictionAnswerChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return requester.AnswerChanged(e.ObjectOld.(*lifecyclev1alpha1.Eviction), e.ObjectNew.(*lifecyclev1alpha1.Eviction))
	}}
}

// requestsOf are nodemaint's EvictionRequests for the Eviction's target pod, from the cache,
// uncopied: read only.
func requestsOf(ctx context.Context, c client.Reader, e *lifecyclev1alpha1.Eviction) []lifecyclev1alpha1.EvictionRequest {
	if e.Spec.Target.Pod == nil {
		return nil
	}
	var requests lifecyclev1alpha1.EvictionRequestList
	if err := c.List(ctx, &requests, client.InNamespace(e.Namespace), client.MatchingFields{requestPodIndex: string(e.Spec.Target.Pod.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	return requests.Items
}

// RequestOfEviction is nodemaint's EvictionRequest for the Eviction's target pod, from the
// cache (uncopied: read only); nil when nodemaint did not ask for the pod.
func RequestOfEviction(ctx context.Context, c client.Reader, e *lifecyclev1alpha1.Eviction) *lifecyclev1alpha1.EvictionRequest {
	if requests := requestsOf(ctx, c, e); len(requests) > 0 {
		return &requests[0]
	}
	return nil
}

// PodOfEviction reads the target pod of an Eviction of a pod nodemaint requests (whichever
// controller created it); nil for others.
func PodOfEviction(ctx context.Context, c client.Reader, o client.Object) *corev1.Pod {
	e := o.(*lifecyclev1alpha1.Eviction)
	if len(requestsOf(ctx, c, e)) == 0 {
		return nil
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Spec.Target.Pod.Name}, pod); err != nil || pod.Spec.NodeName == "" {
		return nil
	}
	return pod
}
