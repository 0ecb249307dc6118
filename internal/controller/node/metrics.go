package node

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The node controller's metrics, served with controller-runtime's on the metrics endpoint
// (docs/user-guide.md#metrics lists them).

// evictionsTotal counts evictions by result: evicted, refused (429, a PodDisruptionBudget),
// failed, or deleted (drainTimeoutAction Delete).
var evictionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodemaint_evictions_total",
	Help: "Evictions of pods on nodes under maintenance, by result: evicted, refused (PodDisruptionBudget), failed, deleted (drainTimeoutAction Delete).",
}, []string{"result"})

// outOfServiceTaints counts the node.kubernetes.io/out-of-service taints nodemaint applied.
var outOfServiceTaints = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "nodemaint_out_of_service_taints_total",
	Help: "node.kubernetes.io/out-of-service taints applied by nodemaint to nodes shut down with pods stuck terminating (spec.shutdown).",
})

func init() {
	metrics.Registry.MustRegister(evictionsTotal, outOfServiceTaints)
	// Every series from the start, at zero: a rate or increase() sees its first sample.
	for _, result := range []string{"evicted", "refused", "failed", "deleted"} {
		evictionsTotal.WithLabelValues(result)
	}
}
