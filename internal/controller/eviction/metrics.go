package eviction

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
)

// standingAside is 1 while the Eviction controller (--eviction-controller=auto) stands aside for
// another Eviction controller that answers in the cluster (Reconciler.answering), 0 otherwise.
var standingAside = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "nodemaint_eviction_controller_standing_aside",
	Help: "1 while nodemaint's Eviction controller (--eviction-controller=auto) creates no Eviction because another Eviction controller answers in the cluster (the in-tree one, or another nodemaint installation); 0 otherwise.",
})

// inTreeAnswers is 1 while the Eviction controller (--eviction-controller=auto) sees
// kube-controller-manager's Eviction controller answering in the cluster (Reconciler.inTree) and
// writes nothing, 0 otherwise.
var inTreeAnswers = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "nodemaint_eviction_controller_in_tree_answers",
	Help: "1 while nodemaint's Eviction controller (--eviction-controller=auto) sees kube-controller-manager's evictionrequest-controller answering in the cluster (an EvictionRequest or Eviction it wrote) and writes to no Eviction, its own included; 0 otherwise.",
})

// registerMetrics registers the controller's metrics with controller-runtime's registry, once.
var registerMetrics = sync.OnceFunc(func() { metrics.Registry.MustRegister(standingAside, inTreeAnswers) })

// gauge is a gauge's value of a condition.
func gauge(on bool) float64 {
	if on {
		return 1
	}
	return 0
}

// FieldManager is the field manager of the named Eviction controller's writes: the Evictions'
// managedFields tell which controller wrote them.
func FieldManager(name string) string {
	return "nodemaint-eviction-controller/" + name
}

// The gauges of upstream's evictionrequest-controller (kubernetes/kubernetes
// pkg/controller/evictionrequest/metrics, KEP-4563 "Monitoring Requirements"), under its names and
// labels, so that dashboards and alerts written for kube-controller-manager's read nodemaint's:
// they describe the Evictions nodemaint's controller manages and the requests it answers, and
// their series go with those objects.
var (
	// responderState is 1 for each responder of an Eviction, labelled with its state.
	responderState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictionrequest_controller_responder_state",
		Help: "The state of each responder for the Eviction.",
	}, []string{"namespace", "eviction", "target_name", "target_type", "responder", "state"})
	// requesterIntent is 1 for each EvictionRequest, labelled with its requester and intent.
	requesterIntent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictionrequest_controller_requester_intent",
		Help: "The intent and target of the EvictionRequest.",
	}, []string{"namespace", "evictionrequest", "target_name", "target_type", "requester", "intent"})
	// targetResponders counts an Eviction's responders.
	targetResponders = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictionrequest_controller_target_responders",
		Help: "The number of available responders for the target.",
	}, []string{"namespace", "eviction", "target_name", "target_type"})
)

// registerUpstreamMetrics registers upstream's gauges with controller-runtime's registry, once.
var registerUpstreamMetrics = sync.OnceFunc(func() {
	metrics.Registry.MustRegister(responderState, requesterIntent, targetResponders)
})

// reported are the label values of the series of upstream's gauges reported for one target pod,
// by gauge: deleted one by one when they go (a partial-match delete would scan every series of a
// gauge at each look, in a drain of thousands of pods).
type reported map[*prometheus.GaugeVec][][]string

// report sets upstream's gauges for the target's requests and the controller's own Evictions, as
// the decision leaves them (wanted, by name: the statuses it writes), and deletes the series
// reported at the last look that are gone (r.metrics).
func (r *Reconciler) report(target types.NamespacedName, obs evictiondecide.Observation, wanted map[string]*lifecyclev1alpha1.Eviction) {
	now := reported{}
	set := func(g *prometheus.GaugeVec, v float64, labels ...string) {
		g.WithLabelValues(labels...).Set(v)
		now[g] = append(now[g], labels)
	}
	for i := range obs.Requests {
		q := &obs.Requests[i]
		if q.Spec.Target.Pod == nil || q.DeletionTimestamp != nil {
			continue
		}
		set(requesterIntent, 1, q.Namespace, q.Name, q.Spec.Target.Pod.Name, "pod", q.Spec.Requester, string(q.Spec.Intent))
	}
	for i := range obs.Evictions {
		e := &obs.Evictions[i]
		if !evictiondecide.Ours(e, r.Name) || e.Spec.Target.Pod == nil {
			continue
		}
		if w := wanted[e.Name]; w != nil {
			e = w
		}
		for _, t := range e.Status.TargetResponders {
			set(responderState, 1, e.Namespace, e.Name, e.Spec.Target.Pod.Name, "pod", t.Name, string(t.State))
		}
		set(targetResponders, float64(len(e.Status.TargetResponders)), e.Namespace, e.Name, e.Spec.Target.Pod.Name, "pod")
	}
	if v, ok := r.metrics.Load(target); ok {
		for g, was := range v.(reported) {
			for _, labels := range was {
				if !slices.ContainsFunc(now[g], func(l []string) bool { return slices.Equal(l, labels) }) {
					g.DeleteLabelValues(labels...)
				}
			}
		}
	}
	if len(now) == 0 {
		r.metrics.Delete(target)
		return
	}
	r.metrics.Store(target, now)
}
