package observe

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// Reports are the node controller's last decisions about each node as a NodeMaintenance's status
// reports them (nodedecide.Report), so that the NodeMaintenance controller reports what the node
// controller decided instead of deciding every selected node's pods again at each status write.
//
// A report holds for a node as long as what it was decided from still is: the node as the node
// controller's watch sees it (NodeChanged) and, of each maintenance selecting the node, what the
// node's decision reads of it (its generation, deletion, phase, the node's turn, the verdict on
// control-plane nodes). A report that does not hold is not used: the NodeMaintenance controller
// then decides that node itself, as the node controller would. Memory only: after a restart the
// node controller's first looks fill it again, and until then each node is decided as before.
type Reports struct {
	mu      sync.Mutex
	reports map[string]report
	// queue is the NodeMaintenance controller's work queue, given by its Source; nil before.
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	delay time.Duration
}

// report is one node's report and what it was decided from.
type report struct {
	node         nodeBasis
	maintenances []maintenanceBasis
	report       nodedecide.Report
}

// NewReports returns an empty store of reports.
func NewReports() *Reports {
	return &Reports{reports: map[string]report{}}
}

// Put records the node controller's decision about node, made with the maintenances selecting it
// (acting and beyond the bound). When the report changed, the maintenances it concerns (those
// that select the node, or that its annotation names) are reconciled, after the Source's delay.
func (r *Reports) Put(node *corev1.Node, selecting []*nodemaintv1alpha1.NodeMaintenance, rep nodedecide.Report) {
	if r == nil {
		return
	}
	next := report{node: basisOfNode(node), report: rep, maintenances: basisOfMaintenances(node, selecting)}
	r.mu.Lock()
	prev, had := r.reports[node.Name]
	r.reports[node.Name] = next
	queue, delay := r.queue, r.delay
	r.mu.Unlock()
	if queue == nil || had && equality.Semantic.DeepEqual(prev.report, rep) {
		return
	}
	seen := map[string]bool{}
	enqueue := func(name string) {
		if !seen[name] {
			seen[name] = true
			queue.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, delay)
		}
	}
	for _, m := range next.maintenances {
		enqueue(m.name)
	}
	for _, e := range maintenance.NodeEntries(node) {
		enqueue(e.Name)
	}
}

// Of returns the node controller's report about node, if it was decided from the node as it is
// and from the maintenances selecting it as they are.
func (r *Reports) Of(node *corev1.Node, selecting []*nodemaintv1alpha1.NodeMaintenance) (nodedecide.Report, bool) {
	if r == nil {
		return nodedecide.Report{}, false
	}
	r.mu.Lock()
	rep, ok := r.reports[node.Name]
	r.mu.Unlock()
	ok = ok && rep.node.equal(basisOfNode(node)) && slices.EqualFunc(rep.maintenances, basisOfMaintenances(node, selecting), maintenanceBasis.equal)
	if ok {
		reportsRead.WithLabelValues(reportFromNodeController).Inc()
	} else {
		reportsRead.WithLabelValues(reportDecidedAgain).Inc()
	}
	return rep.report, ok
}

// Forget drops the report of a node that is gone.
func (r *Reports) Forget(node string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.reports, node)
	r.mu.Unlock()
}

// Source is the NodeMaintenance controller's source of changed reports: each change enqueues the
// maintenances concerned after delay, so that the changes of a moment are reported by one write.
func (r *Reports) Source(delay time.Duration) source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.queue, r.delay = q, delay
		return nil
	})
}

// nodeBasis is what of a node its decision is made from, as the node controller's watch tells it
// (NodeChanged compares it): a report decided from a node of another basis is outdated. The maps and
// slices are the node's own, never changed (cache objects, or the reconciler's copy).
type nodeBasis struct {
	labels, annotations map[string]string
	spec                corev1.NodeSpec
	condition           *corev1.NodeCondition
	ready               bool
	bootID              string
	volumes             []corev1.AttachedVolume
}

func basisOfNode(n *corev1.Node) nodeBasis {
	return nodeBasis{labels: n.Labels, annotations: n.Annotations, spec: n.Spec, condition: MaintenanceCondition(n),
		ready: nodedecide.NodeReady(n), bootID: n.Status.NodeInfo.BootID, volumes: n.Status.VolumesAttached}
}

func (b nodeBasis) equal(o nodeBasis) bool {
	return b.ready == o.ready && b.bootID == o.bootID &&
		equality.Semantic.DeepEqual(b.labels, o.labels) &&
		equality.Semantic.DeepEqual(b.annotations, o.annotations) &&
		equality.Semantic.DeepEqual(b.spec, o.spec) &&
		equality.Semantic.DeepEqual(b.condition, o.condition) &&
		equality.Semantic.DeepEqual(b.volumes, o.volumes)
}

// maintenanceBasis is what a node's decision reads of one maintenance selecting it, as far as the
// node controller's watch of NodeMaintenances tells (maintenanceIntentChanged): its spec (by
// generation), its deletion, its phase, the node's turn in its rollout, and its verdict on
// control-plane nodes (not its drainStartTime: each node's drain starts on its own).
type maintenanceBasis struct {
	name       string
	uid        types.UID
	generation int64
	deleting   bool
	phase      nodemaintv1alpha1.Phase
	turn       *nodemaintv1alpha1.NodeTurn
	refused    bool
}

// basisOfMaintenances is the basis of each maintenance selecting the node, by name.
func basisOfMaintenances(node *corev1.Node, nms []*nodemaintv1alpha1.NodeMaintenance) []maintenanceBasis {
	b := make([]maintenanceBasis, 0, len(nms))
	for _, nm := range nms {
		m := maintenanceBasis{name: nm.Name, uid: nm.UID, generation: nm.Generation, deleting: !nm.DeletionTimestamp.IsZero(),
			phase: maintenance.Phase(nm, false), refused: rollout.Refused(nm, node)}
		if t := rollout.Turn(nm, node.Name); t != nil {
			turn := *t
			m.turn = &turn
		}
		b = append(b, m)
	}
	slices.SortFunc(b, func(x, y maintenanceBasis) int { return cmp.Compare(x.name, y.name) })
	return b
}

func (b maintenanceBasis) equal(o maintenanceBasis) bool {
	return b.name == o.name && b.uid == o.uid && b.generation == o.generation && b.deleting == o.deleting &&
		b.phase == o.phase && b.refused == o.refused &&
		equality.Semantic.DeepEqual(b.turn, o.turn)
}

// The sources of the node reports a NodeMaintenance's status is made from.
const (
	reportFromNodeController = "node-controller"
	reportDecidedAgain       = "decided-again"
)

// reportsRead counts the node reports read for NodeMaintenances' statuses, by where they came from.
var reportsRead = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodemaint_status_node_reports_total",
	Help: "Node reports read for NodeMaintenances' statuses, by source: node-controller (the node controller's last decision, still current) or decided-again (none current: the node and its pods decided again for the status).",
}, []string{"source"})

func init() {
	metrics.Registry.MustRegister(reportsRead)
	reportsRead.WithLabelValues(reportFromNodeController)
	reportsRead.WithLabelValues(reportDecidedAgain)
}
