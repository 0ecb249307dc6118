package eviction

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
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
	// descResponderState is 1 for each responder of an Eviction, labelled with its state.
	descResponderState = prometheus.NewDesc("evictionrequest_controller_responder_state",
		"The state of each responder for the Eviction.",
		[]string{"namespace", "eviction", "target_name", "target_type", "responder", "state"}, nil)
	// descRequesterIntent is 1 for each EvictionRequest, labelled with its requester and intent.
	descRequesterIntent = prometheus.NewDesc("evictionrequest_controller_requester_intent",
		"The intent and target of the EvictionRequest.",
		[]string{"namespace", "evictionrequest", "target_name", "target_type", "requester", "intent"}, nil)
	// descTargetResponders counts an Eviction's responders.
	descTargetResponders = prometheus.NewDesc("evictionrequest_controller_target_responders",
		"The number of available responders for the target.",
		[]string{"namespace", "eviction", "target_name", "target_type"}, nil)
)

// upstreamGauges is the one collector of upstream's gauges in the process, registered once; each
// Eviction controller gives it its cache and name (SetupWithManager) and says when it starts
// reconciling, as leader (Reconcile).
var upstreamGauges = &gaugesCollector{}

// registerUpstreamMetrics registers upstream's gauges with controller-runtime's registry, once.
var registerUpstreamMetrics = sync.OnceFunc(func() { metrics.Registry.MustRegister(upstreamGauges) })

// gaugesCollector reports upstream's gauges from the cache when Prometheus scrapes, as
// kube-state-metrics does: nothing kept per series, so a drain of 10,000 pods holds no 40,000
// series between scrapes (in scenario L the series and their bookkeeping were 27 MB of a 149 MB
// heap), and nothing is left of an object gone. Each Eviction controller of the process reports
// its own Evictions; the requests, which every controller's cache holds, are listed from the first
// that leads.
type gaugesCollector struct {
	mu      sync.Mutex
	sources []*gaugesSource
}

// gaugesSource is one Eviction controller: its cache, its name (its Evictions' mark), and
// whether it reconciles (leads).
type gaugesSource struct {
	reader  client.Reader
	name    string
	leading atomic.Bool
}

// add makes the collector report from reader the Evictions of the controller named, once it
// leads.
func (c *gaugesCollector) add(reader client.Reader, name string) *gaugesSource {
	s := &gaugesSource{reader: reader, name: name}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources = append(c.sources, s)
	return s
}

// collectTimeout bounds the lists of one scrape (from the cache: they take far less).
const collectTimeout = 5 * time.Second

// Describe implements prometheus.Collector.
func (c *gaugesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descResponderState
	ch <- descRequesterIntent
	ch <- descTargetResponders
}

// Collect implements prometheus.Collector.
func (c *gaugesCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := slices.Clone(c.sources)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	requestsListed := false
	for _, s := range sources {
		if !s.leading.Load() {
			continue
		}
		if err := s.collect(ctx, ch, !requestsListed); err != nil {
			// Not an invalid metric, which would fail the whole scrape: the others still count.
			log.Log.WithName("metrics").Error(err, "listing EvictionRequests and Evictions for their metrics", "controller", s.name)
		}
		requestsListed = true
	}
}

// sample sends one sample of a gauge.
func sample(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// collect sends the gauges of the source's own Evictions and, with requests, of every request.
// Read only: the cache's objects, not copies.
func (s *gaugesSource) collect(ctx context.Context, ch chan<- prometheus.Metric, requests bool) error {
	if requests {
		var list lifecyclev1alpha1.EvictionRequestList
		if err := s.reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
		for i := range list.Items {
			q := &list.Items[i]
			if q.Spec.Target.Pod == nil || q.DeletionTimestamp != nil {
				continue
			}
			sample(ch, descRequesterIntent, 1, q.Namespace, q.Name, q.Spec.Target.Pod.Name, "pod", q.Spec.Requester, string(q.Spec.Intent))
		}
	}
	var evictions lifecyclev1alpha1.EvictionList
	if err := s.reader.List(ctx, &evictions, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	for i := range evictions.Items {
		e := &evictions.Items[i]
		if !evictiondecide.Ours(e, s.name) || e.Spec.Target.Pod == nil {
			continue
		}
		for _, t := range e.Status.TargetResponders {
			sample(ch, descResponderState, 1, e.Namespace, e.Name, e.Spec.Target.Pod.Name, "pod", t.Name, string(t.State))
		}
		sample(ch, descTargetResponders, float64(len(e.Status.TargetResponders)), e.Namespace, e.Name, e.Spec.Target.Pod.Name, "pod")
	}
	return nil
}
