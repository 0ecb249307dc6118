package evictiondecide

// Beside kube-controller-manager's own Eviction controllers (KEP-4563: the
// evictionrequest-controller of kubernetes/kubernetes#137133 and the imperative eviction responder
// of #137396). Neither shows itself but by what it writes: kube-controller-manager publishes
// which controllers it runs nowhere in the API (--controllers is read through its own /configz
// only), the controllers hold no Lease of their own (kube-controller-manager's leader Lease is
// there whichever run), and the Evictions the evictionrequest-controller creates carry no mark of
// their creator (their labels name requesters and responders only, KEP-4563 "Label
// Generation"). What they write, they write with Server-Side Apply under their controller names
// as field managers, and the evictionrequest-controller writes early and everywhere: the status
// of every EvictionRequest at its first look (its observedGeneration, valid target or not), and
// every Eviction whoever created it (the KEP: an Eviction of another user "will be adopted";
// a second one of a pod it marks Failed). So those field managers in the managedFields of an
// EvictionRequest or an Eviction are how nodemaint's controller knows that the in-tree one
// answers; and since the in-tree one writes every Eviction, nodemaint's then writes none, its
// own included (handOver), and gives it the first look at every new request (awaitInTree).

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaint/nodemaint/internal/recheck"
)

const (
	// InTreeController is the field manager (its controller name in kube-controller-manager) of
	// the in-tree evictionrequest-controller's writes: Evictions, their status, and the status of
	// EvictionRequests.
	InTreeController = "evictionrequest-controller"
	// InTreeResponder is the field manager of the in-tree imperative-eviction.k8s.io/evictor's
	// writes (its status in the Evictions).
	InTreeResponder = "imperative-eviction-responder-controller"
)

// InTreeGrace is how long, with --eviction-controller=auto, nodemaint's controller leaves a pod's
// first request to an in-tree controller before it creates the pod's Eviction: the in-tree
// controller writes the request's status at its first look (an informer event and one API call
// later, milliseconds), and from then on nodemaint's stands aside in the whole cluster. Without
// the wait both would create an Eviction of the same new request at once, and the in-tree one
// would write nodemaint's (adopt it, or mark it a duplicate).
const InTreeGrace = 2 * time.Second

// InTreeManager returns the in-tree Eviction controllers' field manager (InTreeController or
// InTreeResponder) among an object's managed fields; "" when neither wrote it.
func InTreeManager(managed []metav1.ManagedFieldsEntry) string {
	for _, m := range managed {
		if m.Manager == InTreeController || m.Manager == InTreeResponder {
			return m.Manager
		}
	}
	return ""
}

// handOver: while an in-tree controller answers in the cluster (obs.InTree), nodemaint's writes
// nothing: no Eviction, no status of one (its own included: the in-tree controller has adopted,
// or will adopt, them), no status of a request, no collection (the in-tree controller keeps its
// Evictions for the garbage collector), and no eviction (the in-tree imperative responder
// evicts). It looks again every YieldRecheck, in case the in-tree controller went away.
func handOver(obs Observation) (Decision, bool) {
	if obs.InTree == "" {
		return Decision{}, false
	}
	return Decision{StandAside: inTreeMessage(obs.InTree), RecheckAfter: YieldRecheck}, true
}

// awaitInTree: with obs.InTreeGrace, a live pod of which no Eviction exists waits until the
// oldest request asking for its eviction is InTreeGrace old (by its creationTimestamp; each wait
// at most InTreeGrace, however the clocks differ) before its Eviction is created: meanwhile an
// in-tree controller would have answered it. Nothing of the pod is written meanwhile.
func (d *Decision) awaitInTree(obs Observation, now time.Time) {
	if obs.InTreeGrace <= 0 || obs.Pod == nil {
		return
	}
	var oldest *metav1.Time
	for i := range obs.Requests {
		r := &obs.Requests[i]
		if r.Spec.Target.Pod == nil || r.Spec.Target.Pod.UID != obs.Pod.UID || !wantsEviction(r) {
			continue
		}
		if oldest == nil || r.CreationTimestamp.Before(oldest) {
			oldest = &r.CreationTimestamp
		}
	}
	if oldest == nil {
		return
	}
	if left := min(oldest.Add(obs.InTreeGrace).Sub(now), obs.InTreeGrace); left > 0 {
		d.StandAside = awaitInTreeMessage(obs.InTreeGrace)
		d.RecheckAfter = recheck.Soonest(d.RecheckAfter, left)
	}
}

// inTreeMessage says why the controller writes nothing: an in-tree controller answers (inTree:
// what shows it).
func inTreeMessage(inTree string) string {
	return "kube-controller-manager's Eviction controller answers in the cluster (" + inTree + "): nodemaint's writes to no Eviction"
}

func awaitInTreeMessage(grace time.Duration) string {
	return "a new request: left " + grace.String() + " to an in-tree Eviction controller before an Eviction is created"
}

// InTreeMessage names the in-tree Eviction controller that wrote an object (manager, from
// InTreeManager), and the object (kind namespace/name).
func InTreeMessage(manager, kind, namespace, name string) string {
	return manager + " wrote " + kind + " " + namespace + "/" + name
}
