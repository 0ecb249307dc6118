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

// registerMetrics registers the controller's metrics with controller-runtime's registry, once.
var registerMetrics = sync.OnceFunc(func() { metrics.Registry.MustRegister(standingAside) })

// FieldManager is the field manager of the named Eviction controller's writes: the Evictions'
// managedFields tell which controller wrote them.
func FieldManager(name string) string {
	return "nodemaint-eviction-controller/" + name
}
