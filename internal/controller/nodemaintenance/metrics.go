package nodemaintenance

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/nodemaintenance/nodemaintenancedecide"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/controller/protocol"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// The NodeMaintenance controller's metrics, served with controller-runtime's on the metrics
// endpoint (docs/user-guide.md#metrics lists them). None has a pod or node name as a label: the
// histograms are recorded when a status is written, and the state of each NodeMaintenance is read
// from the status it wrote, at scrape time (maintenanceCollector), so the series of a deleted
// maintenance go with it.

// drainDuration observes how long drains take, from drain requested to Drained.
var drainDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "nodemaint_drain_duration_seconds",
	Help:    "Time from a NodeMaintenance's drain request until it is Drained.",
	Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1s to about 2h
})

// nodeDrainDuration observes how long the drain of each node took.
var nodeDrainDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "nodemaint_node_drain_duration_seconds",
	Help:    "Time from the start of a node's drain (the NodeMaintenance's drainStartTime, or the node's turn in a rollout) until no targeted pod and no volume of a drained pod is left on it, for the nodes status.nodes listed with pods or volumes left.",
	Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1s to about 2h
})

// observeNodeDrains records the drain of each node the status written (cur) no longer reports
// with pods or volumes left while the status it replaced (old) did, and which is still selected
// and left with nothing (decisions). Each is seen once: the next write replaces a status that no
// longer lists it.
func observeNodeDrains(old, cur *nodemaintv1alpha1.NodeMaintenance, decisions []nodemaintenancedecide.NodeDecision, now time.Time) {
	if old.Status.DrainStartTime == nil {
		return
	}
	since := map[string]time.Time{}
	if r := old.Status.Rollout; r != nil {
		for _, t := range r.InTurn {
			since[t.Name] = t.Since.Time
		}
	}
	for _, d := range decisions {
		was, listed := old.Status.Nodes[d.Name]
		if !listed || was.PodsPendingEvacuation == 0 && was.VolumesAttached == 0 || d.Report.Pending > 0 || d.Report.VolumesAttached > 0 {
			continue
		}
		if is, ok := cur.Status.Nodes[d.Name]; ok && (is.PodsPendingEvacuation > 0 || is.VolumesAttached > 0) {
			continue
		}
		start := old.Status.DrainStartTime.Time
		if t, ok := since[d.Name]; ok && t.After(start) {
			start = t
		}
		nodeDrainDuration.Observe(max(0, now.Sub(start).Seconds()))
	}
}

// evacuationAnswers observes how long owners take to answer nodemaint's evacuation requests.
var evacuationAnswers = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "nodemaint_evacuation_answer_duration_seconds",
	Help:    "Time from nodemaint's evacuation request on a pod (EvacuationRequest) to its owner's first answer (EvacuationInitiated), whoever the owner, by answer: accepted, declined. In whole seconds, those of the conditions' lastTransitionTime. Under the EvictionRequest protocol, from the EvictionRequest's arrival to a responder made active on the pod's Eviction (accepted) or the Eviction failed with no responder that moved the pod (declined).",
	Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1s to about 34 minutes
}, []string{"answer"})

func init() {
	metrics.Registry.MustRegister(drainDuration, nodeDrainDuration, evacuationAnswers, statusMetrics)
	// Every series from the start, at zero: a rate or increase() sees its first sample.
	for _, answer := range []string{"accepted", "declined"} {
		evacuationAnswers.WithLabelValues(answer)
	}
}

// The descriptions of the gauges maintenanceCollector computes from each NodeMaintenance's status.
var (
	descNodes = prometheus.NewDesc("nodemaint_maintenance_nodes",
		"Nodes of a NodeMaintenance by state (selected, cordoned, pending, drained, out_of_service), with the maintenance's phase.",
		[]string{"maintenance", "phase", "state"}, nil)
	descPods = prometheus.NewDesc("nodemaint_maintenance_pods",
		"Pods on a NodeMaintenance's nodes (the nodes in their turn, in a rollout) by state: pending_evacuation (targeted pods still there), evacuating (their owners accepted the evacuation), skipped (left running).",
		[]string{"maintenance", "state"}, nil)
	descBlocked = prometheus.NewDesc("nodemaint_maintenance_pods_blocked",
		"Pods held on a NodeMaintenance's nodes by reason (PodDisruptionBudget, WaitingForOwner, Terminating, ...), over the nodes status.nodes lists.",
		[]string{"maintenance", "reason"}, nil)
	descVolumes = prometheus.NewDesc("nodemaint_maintenance_volumes_attached",
		"Volumes of drained pods still attached to a NodeMaintenance's nodes.",
		[]string{"maintenance"}, nil)
	descDrainStart = prometheus.NewDesc("nodemaint_maintenance_drain_start_timestamp_seconds",
		"When the controller first saw drain requested on the NodeMaintenance (status.drainStartTime), in seconds since the epoch.",
		[]string{"maintenance"}, nil)
	descDrainTimeout = prometheus.NewDesc("nodemaint_maintenance_drain_timeout_seconds",
		"The NodeMaintenance's spec.drainTimeout, when it has one.",
		[]string{"maintenance"}, nil)
	descCondition = prometheus.NewDesc("nodemaint_maintenance_condition",
		"The NodeMaintenance's status conditions: 1 for the condition's status, 0 for the two others.",
		[]string{"maintenance", "type", "status"}, nil)
	descRollout = prometheus.NewDesc("nodemaint_maintenance_rollout_nodes",
		"Nodes of a NodeMaintenance's rollout by state: done, failed (released as failed), in_turn, blocked (in turn, past drainTimeout, left cordoned: maxBlockedNodes), waiting.",
		[]string{"maintenance", "state"}, nil)
	descHalted = prometheus.NewDesc("nodemaint_maintenance_rollout_halted",
		"1 while the NodeMaintenance's rollout starts no new node (RolloutHalted=True), 0 otherwise.",
		[]string{"maintenance"}, nil)
)

// statusMetrics is the one maintenanceCollector of the process, registered once; the
// NodeMaintenance reconciler gives it its reader and leadership (see setSource).
var statusMetrics = &maintenanceCollector{}

// maintenanceCollector reports the state of each NodeMaintenance, as its status says, when
// Prometheus scrapes: nothing to keep up to date, and nothing left of a deleted maintenance.
// Only the leader reports it (a standby's cache may not even hold the NodeMaintenances), so
// aggregations over replicas do not count a maintenance twice.
type maintenanceCollector struct {
	src atomic.Pointer[collectorSource]
}

type collectorSource struct {
	reader client.Reader
	active *observe.ActiveSince
}

// setSource makes the collector read the NodeMaintenances with reader while active says this
// replica leads.
func (c *maintenanceCollector) setSource(reader client.Reader, active *observe.ActiveSince) {
	c.src.Store(&collectorSource{reader: reader, active: active})
}

// collectTimeout bounds the list of NodeMaintenances of one scrape (from the cache: it takes
// far less).
const collectTimeout = 5 * time.Second

// Describe implements prometheus.Collector.
func (c *maintenanceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodes, descPods, descBlocked, descVolumes, descDrainStart, descDrainTimeout, descCondition, descRollout, descHalted} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *maintenanceCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src.Load()
	if src == nil || src.active.Since().IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := src.reader.List(ctx, &list); err != nil {
		// Not an invalid metric, which would fail the whole scrape: the others still count.
		log.Log.WithName("metrics").Error(err, "listing NodeMaintenances for their metrics")
		return
	}
	for i := range list.Items {
		maintenanceMetrics(&list.Items[i], ch)
	}
}

// maintenanceMetrics sends the gauges of one NodeMaintenance, from its status.
func maintenanceMetrics(nm *nodemaintv1alpha1.NodeMaintenance, ch chan<- prometheus.Metric) {
	s := &nm.Status
	name := nm.Name
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{name}, labels...)...)
	}
	phase := string(s.Phase)
	cordoned := int32(0)
	switch {
	case s.Rollout != nil:
		cordoned = s.Rollout.NodesInTurn
	case maintenance.Cordons(s.Phase):
		cordoned = s.SelectedNodes
	}
	gauge(descNodes, float64(s.SelectedNodes), phase, "selected")
	gauge(descNodes, float64(cordoned), phase, "cordoned")
	gauge(descNodes, float64(s.NodesPending), phase, "pending")
	gauge(descNodes, float64(s.NodesDrained), phase, "drained")
	gauge(descNodes, float64(s.NodesOutOfService), phase, "out_of_service")
	gauge(descPods, float64(s.PodsPendingEvacuation), "pending_evacuation")
	gauge(descPods, float64(s.PodsEvacuating), "evacuating")
	gauge(descPods, float64(s.PodsSkipped), "skipped")
	gauge(descVolumes, float64(s.VolumesAttached))
	blocked := map[string]int32{}
	for _, n := range s.Nodes {
		for _, b := range n.Blocked {
			blocked[b.Reason] += b.Count
		}
	}
	for reason, n := range blocked {
		gauge(descBlocked, float64(n), reason)
	}
	if s.DrainStartTime != nil {
		gauge(descDrainStart, float64(s.DrainStartTime.Unix()))
	}
	if nm.Spec.DrainTimeout != nil {
		gauge(descDrainTimeout, nm.Spec.DrainTimeout.Duration.Seconds())
	}
	for _, cond := range s.Conditions {
		for _, st := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
			v := 0.0
			if cond.Status == st {
				v = 1
			}
			gauge(descCondition, v, cond.Type, string(st))
		}
	}
	if r := s.Rollout; r != nil {
		gauge(descRollout, float64(r.NodesDone), "done")
		gauge(descRollout, float64(r.NodesFailed), "failed")
		gauge(descRollout, float64(r.NodesInTurn), "in_turn")
		gauge(descRollout, float64(r.NodesBlocked), "blocked")
		gauge(descRollout, float64(r.NodesWaiting), "waiting")
		halted := 0.0
		for _, cond := range s.Conditions {
			if cond.Type == nodemaintv1alpha1.ConditionRolloutHalted && cond.Status == metav1.ConditionTrue {
				halted = 1
			}
		}
		gauge(descHalted, halted)
	}
}

// watchAnswers records evacuationAnswers from the pod changes the cache sees, on the leader only
// (a runnable of mgr's leader election): an answer is a change of the owner's, which nodemaint
// does not write, and the times are the pod's own (the conditions' lastTransitionTime), so a
// change seen late or after a restart still measures the owner.
func watchAnswers(mgr manager.Manager) error {
	return onUpdates(mgr, &corev1.Pod{}, func(_ context.Context, old, cur *corev1.Pod) {
		if answer, latency, ok := firstAnswer(old, cur); ok {
			evacuationAnswers.WithLabelValues(answer).Observe(latency.Seconds())
		}
	})
}

// watchEvictionAnswers records evacuationAnswers from the Eviction changes the cache sees, on the
// leader only, under the EvictionRequest protocol: there the owners answer on the pod's Eviction
// (requester.FirstAnswer), not on the pod, and the time counts from nodemaint's request.
func watchEvictionAnswers(mgr manager.Manager) error {
	c := mgr.GetClient()
	return onUpdates(mgr, &lifecyclev1alpha1.Eviction{}, func(ctx context.Context, old, cur *lifecyclev1alpha1.Eviction) {
		if accepted, latency, ok := requester.FirstAnswer(old, cur, protocol.RequestOfEviction(ctx, c, cur)); ok {
			evacuationAnswers.WithLabelValues(answerLabel(accepted)).Observe(latency.Seconds())
		}
	})
}

// onUpdates calls f with every update of an object of obj's kind that the cache sees, while mgr
// is the leader (a runnable of its leader election).
func onUpdates[T client.Object](mgr manager.Manager, obj T, f func(ctx context.Context, old, cur T)) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		informer, err := mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur any) {
				o, ok1 := old.(T)
				n, ok2 := cur.(T)
				if ok1 && ok2 {
					f(ctx, o, n)
				}
			},
		})
		if err != nil {
			return err
		}
		<-ctx.Done()
		return informer.RemoveEventHandler(reg)
	}))
}

func answerLabel(accepted bool) string {
	if accepted {
		return "accepted"
	}
	return "declined"
}

// firstAnswer reports the answer the pod's owner gave to nodemaint's evacuation request between
// old and cur, when it is the first to this request, and how long after the request it came.
func firstAnswer(old, cur *corev1.Pod) (answer string, latency time.Duration, ok bool) {
	if evacuation.Condition(old, evacuation.Initiated) != nil || !evacuation.RequestedBy(cur, evacuation.ReasonNodeMaintenance) {
		return "", 0, false
	}
	c := evacuation.Condition(cur, evacuation.Initiated)
	switch {
	case c == nil:
		return "", 0, false
	case c.Status == corev1.ConditionTrue:
		answer = "accepted"
	case c.Status == corev1.ConditionFalse:
		answer = "declined"
	default:
		return "", 0, false
	}
	requested := evacuation.Condition(cur, evacuation.Request).LastTransitionTime
	return answer, max(0, c.LastTransitionTime.Sub(requested.Time)), true
}
