package deployment

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// The responder's metrics, recorded once its writes succeeded (see apply). Its work queue's are
// controller-runtime's, under the controller name deployment-evacuation
// (workqueue_queue_duration_seconds{name="deployment-evacuation"} and the others).

// surgesTotal counts surges by outcome: started, completed (the replacements became available),
// timed_out (they made no progress for the surge's patience: the responder gave the pods up to
// eviction), rolled_back (the Deployment can no longer surge, or the evacuation was withdrawn),
// overridden (someone scaled the Deployment during the surge) and invalid (an unusable surge
// record was dropped).
var surgesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodemaint_responder_surges_total",
	Help: "Surges of the Deployment evacuation responder by outcome: started, completed, timed_out, rolled_back, overridden, invalid.",
}, []string{"outcome"})

// answerDuration observes the time from an evacuation request to the responder's first answer.
var answerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "nodemaint_responder_answer_duration_seconds",
	Help:    "Time from a pod's evacuation request (EvacuationRequest) to the Deployment responder's first answer (EvacuationInitiated), by answer: accepted, declined.",
	Buckets: prometheus.ExponentialBuckets(0.05, 2, 14), // 50ms to about 7 minutes
}, []string{"answer"})

// registerMetrics registers the responder's metrics with controller-runtime's registry, once, when
// the responder is set up: a program that only uses Release (the plugin's cleanup) serves none.
var registerMetrics = sync.OnceFunc(func() {
	metrics.Registry.MustRegister(surgesTotal, answerDuration)
	// Every series from the start, at zero: a rate or increase() sees its first sample.
	for _, outcome := range []string{"started", "completed", "timed_out", "rolled_back", "overridden", "invalid"} {
		surgesTotal.WithLabelValues(outcome)
	}
	for _, answer := range []string{"accepted", "declined"} {
		answerDuration.WithLabelValues(answer)
	}
})

// answerLatency returns how long the pod's evacuation request waited for this answer, when it is
// the first (the pod as it was before the answer was written); ok is false otherwise.
func answerLatency(pod *corev1.Pod, now time.Time) (latency time.Duration, ok bool) {
	requested := deploymentdecide.RequestTime(pod)
	if evacuation.Condition(pod, evacuation.Initiated) != nil || requested.IsZero() {
		return 0, false
	}
	return max(0, now.Sub(requested)), true
}

// observeAnswer records the latency of a first answer.
func observeAnswer(status corev1.ConditionStatus, latency time.Duration) {
	answer := "accepted"
	if status == corev1.ConditionFalse {
		answer = "declined"
	}
	answerDuration.WithLabelValues(answer).Observe(latency.Seconds())
}
