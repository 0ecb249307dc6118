package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// evictionsTotal counts evictions by result: evicted, refused (429, a PodDisruptionBudget) or
// failed.
var evictionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodemaint_evictions_total",
	Help: "Evictions of pods on nodes under maintenance, by result: evicted, refused (PodDisruptionBudget), failed.",
}, []string{"result"})

// drainDuration observes how long drains take, from drain requested to Drained.
var drainDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "nodemaint_drain_duration_seconds",
	Help:    "Time from a NodeMaintenance's drain request until it is Drained.",
	Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1s to about 2h
})

func init() { metrics.Registry.MustRegister(evictionsTotal, drainDuration) }
