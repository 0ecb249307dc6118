package preflightworker

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// preflightWork counts what the preflights of Planning maintenances cost: the snapshots of the
// cluster made from the cache, the preflights computed, and the CPU seconds of both.
var (
	preflightSnapshots = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodemaint_preflight_snapshots_total",
		Help: "Snapshots of the cluster made from the controller's cache for the preflights of Planning maintenances (at most one every 10s, when something changed).",
	})
	preflightsComputed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodemaint_preflights_total",
		Help: "Preflights of Planning maintenances computed (status.preflight).",
	})
	preflightSeconds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodemaint_preflight_seconds_total",
		Help: "Time the preflight worker spent making snapshots and computing preflights, in seconds (it rests as long after each).",
	})
)

func init() {
	metrics.Registry.MustRegister(preflightSnapshots, preflightsComputed, preflightSeconds)
}
