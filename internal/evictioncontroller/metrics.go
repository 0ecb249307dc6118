package evictioncontroller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
