package eviction

// Beside kube-controller-manager's own Eviction controller (internal/controller/eviction/evictiondecide's coexist.go says
// why its field managers are how it shows): under --eviction-controller=auto, the controller
// looks in its cache for an EvictionRequest or Eviction the in-tree controllers wrote (the cache
// keeps those managed fields entries, internal/cachetrim) and, while one is there, writes nothing
// (evictiondecide.Observation.InTree). The change is reported once: a log line, the gauges, and an
// Event on the object that shows it.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
)

// inTreeIndex indexes under "true" the EvictionRequests and Evictions that an in-tree Eviction
// controller wrote (evictiondecide.InTreeManager).
const inTreeIndex = "evictioncontroller.intree"

// StandsAsideReason is the reason of the Event recorded on the object that shows the in-tree
// Eviction controller answering, when nodemaint's starts standing aside for it.
const StandsAsideReason = "EvictionControllerStandsAside"

// indexInTree adds inTreeIndex to the manager's cache.
func indexInTree(ctx context.Context, mgr manager.Manager) error {
	written := func(o client.Object) []string {
		if evictiondecide.InTreeManager(o.GetManagedFields()) != "" {
			return []string{"true"}
		}
		return nil
	}
	for _, obj := range []client.Object{&lifecyclev1alpha1.EvictionRequest{}, &lifecyclev1alpha1.Eviction{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, inTreeIndex, written); err != nil {
			return fmt.Errorf("indexing the %T the in-tree Eviction controller wrote: %w", obj, err)
		}
	}
	return nil
}

// inTree names what shows an in-tree Eviction controller answering in the cluster, from the cache:
// an EvictionRequest or an Eviction it wrote; "" when none. It reports a change once.
func (r *Reconciler) inTree(ctx context.Context) (string, error) {
	var shown client.Object
	// Read only, one of each at most: the cache's objects, not copies.
	var reqs lifecyclev1alpha1.EvictionRequestList
	if err := r.Client.List(ctx, &reqs, client.MatchingFields{inTreeIndex: "true"}, client.Limit(1), client.UnsafeDisableDeepCopy); err != nil {
		return "", err
	}
	if len(reqs.Items) > 0 {
		shown = &reqs.Items[0]
	} else {
		var evs lifecyclev1alpha1.EvictionList
		if err := r.Client.List(ctx, &evs, client.MatchingFields{inTreeIndex: "true"}, client.Limit(1), client.UnsafeDisableDeepCopy); err != nil {
			return "", err
		}
		if len(evs.Items) > 0 {
			shown = &evs.Items[0]
		}
	}
	what := ""
	if shown != nil {
		kind := "Eviction"
		if _, ok := shown.(*lifecyclev1alpha1.EvictionRequest); ok {
			kind = "EvictionRequest"
		}
		what = evictiondecide.InTreeMessage(evictiondecide.InTreeManager(shown.GetManagedFields()), kind, shown.GetNamespace(), shown.GetName())
	}
	if was, _ := r.inTreeSeen.Swap(what).(string); (was == "") != (what == "") {
		log := logf.FromContext(ctx)
		if what != "" {
			log.Info("kube-controller-manager's Eviction controller answers: this one stands aside, writing to no Eviction (its own included) and evicting no pod", "shownBy", what)
			inTreeAnswers.Set(1)
			// The Event's object is read only here too: the recorder reads its kind, name and UID.
			r.Recorder.Eventf(shown.(runtime.Object), nil, corev1.EventTypeNormal, StandsAsideReason, "StandAside",
				"kube-controller-manager's Eviction controller answers in the cluster (%s): nodemaint's Eviction controller writes to no Eviction and evicts no pod while it does", what)
		} else {
			log.Info("kube-controller-manager's Eviction controller shows no more: this one answers again")
			inTreeAnswers.Set(0)
		}
	}
	return what, nil
}
