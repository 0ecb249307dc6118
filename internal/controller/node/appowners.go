package node

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/recheck"
)

// The Events for application owners (nodedecide.AppOwnerEvents) need the budgets that select a
// held pod and the workload that owns it: both from the cache (a ReplicaSet's owner references
// name its Deployment), read only for the holds of a decision (at most nodedecide.MaxHolds).
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch

// appOwnerRefresh is how often an Event for an application's owner is recorded again while what
// it says lasts: the events recorder counts the repeats in the one Event's series (it ends a
// series not observed for 6 minutes, after which a repeat would be a new Event).
const appOwnerRefresh = 5 * time.Minute

// maxTold bounds the Events for application owners remembered as recorded (tellings).
const maxTold = 10_000

// tellAppOwners records the Events for application owners of the decision's holds, each at most
// once per appOwnerRefresh (within one Event and series per object, maintenance and reason), and
// returns when the node is to be looked at again (next, or sooner for the refresh while a hold
// lasts). Reading the budgets and owners fails only as a cache read does: the Events wait for the
// next look.
func (r *Reconciler) tellAppOwners(ctx context.Context, node *corev1.Node, d nodedecide.Decision, next time.Duration, now time.Time) time.Duration {
	if len(d.Holds) == 0 {
		return next
	}
	holders, err := r.holders(ctx, d.Holds)
	if err != nil {
		log.FromContext(ctx).V(1).Info("not telling application owners: reading their budgets and workloads", "err", err.Error())
		return next
	}
	sink := sinkOf(r.Recorder)
	told := r.tellings()
	for _, ev := range nodedecide.AppOwnerEvents(node.Name, d.Holds, holders, now) {
		if told.due(ev.Key(), now) {
			sink.appOwner(ev)
		}
	}
	return recheck.Soonest(next, appOwnerRefresh)
}

// holders reads the budgets and top owners of the holds' pods from the cache.
func (r *Reconciler) holders(ctx context.Context, holds []nodedecide.Hold) (nodedecide.Holders, error) {
	h := nodedecide.Holders{Budgets: map[types.UID][]*policyv1.PodDisruptionBudget{}, Owners: map[types.UID]*corev1.ObjectReference{}}
	budgets := map[string][]policyv1.PodDisruptionBudget{} // by namespace
	for _, hold := range holds {
		pod := hold.Pod
		if _, done := h.Owners[pod.UID]; done {
			continue
		}
		owner, err := r.topOwner(ctx, pod)
		if err != nil {
			return h, err
		}
		h.Owners[pod.UID] = owner
		if hold.Reason != nodedecide.ReasonBudgetBlocksDrain {
			continue
		}
		pdbs, ok := budgets[pod.Namespace]
		if !ok {
			var list policyv1.PodDisruptionBudgetList
			if err := r.Client.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
				return h, err
			}
			pdbs = list.Items
			budgets[pod.Namespace] = pdbs
		}
		for _, pdb := range evictiondecide.SelectBudgets(pod, pdbs) {
			h.Budgets[pod.UID] = append(h.Budgets[pod.UID], &pdb)
		}
	}
	return h, nil
}

// topOwner is the workload that owns the pod, as far as the pod's controller reference and, for a
// ReplicaSet, the ReplicaSet's own lead: a Deployment's pods name their Deployment. Nil for a
// bare pod.
func (r *Reconciler) topOwner(ctx context.Context, pod *corev1.Pod) (*corev1.ObjectReference, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil, nil
	}
	if ref.Kind == "ReplicaSet" && ref.APIVersion == appsv1.SchemeGroupVersion.String() {
		rs := &appsv1.ReplicaSet{}
		switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, rs); {
		case client.IgnoreNotFound(err) != nil:
			return nil, err
		case err == nil && rs.UID == ref.UID:
			if up := metav1.GetControllerOf(rs); up != nil {
				ref = up
			}
		}
	}
	return &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}, nil
}

// tellings remembers when each Event for application owners was last recorded, by
// nodedecide.AppOwnerEvent.Key.
type tellings struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (r *Reconciler) tellings() *tellings {
	r.toldOnce.Do(func() { r.told = &tellings{at: map[string]time.Time{}} })
	return r.told
}

// due reports whether the Event of key is to be recorded now, and if so remembers it: not
// recorded within appOwnerRefresh. At most maxTold are remembered; past them, only once those
// older than the refresh are forgotten.
func (t *tellings) due(key string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.at[key]; ok && now.Sub(at) < appOwnerRefresh {
		return false
	}
	if len(t.at) >= maxTold {
		for k, at := range t.at {
			if now.Sub(at) >= appOwnerRefresh {
				delete(t.at, k)
			}
		}
		if len(t.at) >= maxTold {
			return false
		}
	}
	t.at[key] = now
	return true
}
