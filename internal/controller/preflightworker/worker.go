// Package preflightworker computes the preflights of Planning NodeMaintenances (status.preflight) off
// their reconciles: one worker, one snapshot of the controller's cache shared by every
// maintenance, made again on a change (Worker). The NodeMaintenance controller asks it for a
// maintenance's preflight at each reconcile (Worker.Status) and is told when one is computed.
package preflightworker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/drainpreflight"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// The preflight reads these from the cache (watched: list and watch); nodes, pods, namespaces,
// claims, volumes and DrainRules have their markers where the controllers read them too.
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets,verbs=list;watch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=list;watch

const (
	// Refresh is how often the preflight of a Planning maintenance is computed again
	// at most, when the cluster changed since.
	Refresh = 30 * time.Second
	// GatedRefresh is the same for a rollout that waits for its forecast to start (Gates).
	GatedRefresh = floor
	// floor is how often the snapshot of the cluster is made again at most.
	floor = 10 * time.Second
	// keep is how long the snapshot is kept with no preflight asked for.
	keep = 2 * Refresh
	// MaxNodes is how many selected nodes the controller computes the preflight of at
	// most; a maintenance that selects more has none in its status (`kubectl maintenance
	// preflight` computes any).
	MaxNodes = 1000
	// maxChecks bounds where one preflight places the displaced pods' replacements
	// (drainpreflight.Spec.MaxChecks): pod-node pairs, about a second of a core.
	maxChecks = 100_000_000
)

// Status is the preflight of a Planning maintenance's selected nodes (targets), as `kubectl
// maintenance preflight` computes it, and whether the reconcile should look again within
// Refresh; of a rollout that waits for its forecast too (Gates), though it cordons or drains.
// Nil when the maintenance is neither, selects no node or more than MaxNodes, or
// while its first preflight is computed (the status's own is kept while the spec is the same: a
// new replica, nodes selected anew). It is computed off the reconcile, by the worker, which
// asks for a reconcile once it is done (Ready). tooMany: the maintenance selects more than
// MaxNodes nodes, and this is the first time its spec is asked about.
func (p *Worker) Status(nm *nodemaintv1alpha1.NodeMaintenance, targets []string, now time.Time) (status *nodemaintv1alpha1.PreflightStatus, again, tooMany bool) {
	if maintenance.Phase(nm, false) != nodemaintv1alpha1.PhasePlanning && !Gates(nm) || len(targets) == 0 {
		p.Forget(nm.Name)
		return nil, false, false
	}
	if len(targets) > MaxNodes {
		return nil, false, p.tooMany(nm)
	}
	req := request{uid: nm.UID, name: nm.Name, generation: nm.Generation, spec: drainpreflight.Spec{
		IgnoreDrainLabel: nm.Spec.DrainLabelPolicy == nodemaintv1alpha1.DrainLabelPolicyIgnore, MaxChecks: maxChecks,
	}}
	if nm.Spec.PodSelector != nil {
		req.spec.PodSelector = maintenance.PodSelector(nm)
	}
	req.spec.Targets = slices.Sorted(slices.Values(targets))
	req.gates = Gates(nm)
	if nm.Spec.Rollout != nil {
		req.spec.MaxUnavailable = rollout.Budget(nm.Spec.Rollout.MaxUnavailable, len(targets))
	}
	old := nm.Status.Preflight
	res := p.result(req, now)
	if res == nil {
		if old != nil && nm.Status.ObservedGeneration == nm.Generation {
			return old, true, false
		}
		return nil, true, false
	}
	if old != nil && samePreflight(old, res) {
		return old, true, false
	}
	return res, true, false
}

// Gates reports whether the maintenance's rollout waits for a clean deadlock forecast before it
// starts (spec.rollout.preflight Block) and has not started: no node in its turn, none done.
// Its preflight is computed while it waits, whether it cordons or drains or not; once a node
// starts, the forecast no longer holds it.
func Gates(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	r := nm.Spec.Rollout
	if r == nil || r.Preflight != nodemaintv1alpha1.PreflightBlock || !nm.DeletionTimestamp.IsZero() {
		return false
	}
	st := nm.Status.Rollout
	return st == nil || len(st.InTurn) == 0 && st.NodesDone == 0
}

// samePreflight reports whether two preflights say the same but for their time: the status keeps
// the older, and is not written again for nothing.
func samePreflight(a, b *nodemaintv1alpha1.PreflightStatus) bool {
	x, y := *a, *b
	x.Time, y.Time = metav1.Time{}, metav1.Time{}
	return equality.Semantic.DeepEqual(x, y)
}

// Worker computes the preflights of Planning maintenances from one snapshot of the cluster
// as the controller's caches hold it (drainpreflight.Snapshot), in a worker of its own, one at a time,
// resting as long as it worked: never more than half a core, and never on a reconciler's
// worker. A maintenance's preflight is computed when its spec or its nodes change, and again
// when the cluster changed, at most every Refresh. The snapshot is made when a
// preflight is asked for and something changed since the last (an event of the caches: nodes
// but their heartbeats, pods, budgets, Deployments, ReplicaSets, autoscalers, claims, volumes,
// namespaces, DrainRules), at most every floor, and forgotten once none has been asked
// for over keep. Nothing is listed from the API server.
type Worker struct {
	sources []source
	// changes counts the caches' events since the start.
	changes atomic.Uint64
	// ready tells the NodeMaintenance controller that a maintenance's preflight is computed
	// (Ready).
	ready chan event.GenericEvent
	wake  chan struct{}
	// failed is when the worker last said why it could not compute a preflight (the worker's).
	failed time.Time

	mu       sync.Mutex
	snapshot *drainpreflight.Snapshot
	// seq is changes when the snapshot was made, at is when.
	seq uint64
	at  time.Time
	// asked is when a preflight was last asked for (to be computed).
	asked time.Time
	// queue names the maintenances whose preflight is asked for (pending), in order; results
	// are the preflights computed, by maintenance.
	queue   []string
	pending map[string]request
	results map[string]*computed
	// computing names the maintenance whose preflight the worker computes, out of the lock;
	// computingForgotten: it was forgotten meanwhile, and its preflight is not kept.
	computing          string
	computingForgotten bool
	// made and ran count the snapshots made and the preflights computed (preflightSnapshots
	// and preflightsComputed count those of every worker).
	made, ran int
}

// source is one kind of object of the cache the preflight reads.
type source struct {
	kind    string
	indexer toolscache.Indexer
	synced  func() bool
}

// request asks for the preflight of one maintenance's spec.
type request struct {
	uid        types.UID
	name       string
	generation int64
	spec       drainpreflight.Spec
	// seq is changes when it was asked for: its snapshot must be at least as recent.
	seq uint64
	// gates: a rollout waits for this forecast to start (Gates); it is computed again on a
	// change every GatedRefresh rather than every Refresh, so that it starts soon once clean.
	gates bool
}

// same reports whether two requests ask for the same preflight. The spec's podSelector is the
// maintenance's generation's, like its label policy.
func (a request) same(b request) bool {
	return a.uid == b.uid && a.generation == b.generation && slices.Equal(a.spec.Targets, b.spec.Targets) &&
		a.spec.MaxUnavailable == b.spec.MaxUnavailable && a.spec.IgnoreDrainLabel == b.spec.IgnoreDrainLabel
}

// computed is a computed preflight (status nil: more than MaxNodes nodes).
type computed struct {
	request
	status *nodemaintv1alpha1.PreflightStatus
	// seq is changes when its snapshot was made; at is when it was computed.
	seq uint64
	at  time.Time
}

// New watches the kinds the preflight reads in the manager's cache.
func New(ctx context.Context, mgr manager.Manager) (*Worker, error) {
	p := newWorker(nil)
	changed := func() { p.changes.Add(1) }
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}
	for _, obj := range []client.Object{&corev1.Node{}, &corev1.Pod{}, &policyv1.PodDisruptionBudget{}, &appsv1.Deployment{}, &appsv1.ReplicaSet{},
		&autoscalingv2.HorizontalPodAutoscaler{}, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &corev1.Namespace{}, &nodemaintv1alpha1.DrainRule{}} {
		kind := fmt.Sprintf("%T", obj)
		informer, err := observe.SharedInformer(ctx, mgr, obj)
		if err != nil {
			return nil, fmt.Errorf("watching %s for the preflight: %w", kind, err)
		}
		h := handler
		if _, ok := obj.(*corev1.Node); ok {
			h.UpdateFunc = func(old, new any) {
				if nodeChangedForPreflight(old, new) {
					changed()
				}
			}
		}
		if _, err := informer.AddEventHandler(h); err != nil {
			return nil, err
		}
		p.sources = append(p.sources, source{kind: kind, indexer: informer.GetIndexer(), synced: informer.HasSynced})
	}
	return p, nil
}

// newWorker computes preflights from the sources.
func newWorker(sources []source) *Worker {
	return &Worker{
		sources: sources, ready: make(chan event.GenericEvent, 1024), wake: make(chan struct{}, 1),
		pending: map[string]request{}, results: map[string]*computed{},
	}
}

// nodeChangedForPreflight reports whether a node changed in what the preflight reads: not a
// kubelet's heartbeat.
func nodeChangedForPreflight(old, new any) bool {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := new.(*corev1.Node)
	return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Spec, n.Spec) ||
		!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable)
}

// result is the computed preflight of the request, when there is one of its spec; it asks for
// one when there is none, or when the cluster changed since and it is older than
// Refresh.
func (p *Worker) result(req request, now time.Time) *nodemaintv1alpha1.PreflightStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := p.results[req.name]
	refresh := Refresh
	if req.gates {
		refresh = GatedRefresh
	}
	if res != nil && res.same(req) && (res.seq == p.changes.Load() || now.Sub(res.at) < refresh) {
		return res.status
	}
	if queued, ok := p.pending[req.name]; !ok || !queued.same(req) {
		if !ok {
			p.queue = append(p.queue, req.name)
		}
		req.seq = p.changes.Load()
		p.pending[req.name] = req
		p.asked = now
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	if res != nil && res.same(req) {
		return res.status // until the new one is computed
	}
	return nil
}

// tooMany records that the maintenance selects more than MaxNodes nodes, and reports
// whether it is news for its spec.
func (p *Worker) tooMany(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if res := p.results[nm.Name]; res != nil && res.uid == nm.UID && res.generation == nm.Generation && res.status == nil {
		return false
	}
	p.results[nm.Name] = &computed{request: request{uid: nm.UID, name: nm.Name, generation: nm.Generation}}
	delete(p.pending, nm.Name)
	return true
}

// Ready tells the NodeMaintenance controller which maintenance's preflight is computed: a
// reconcile of it writes it to the status.
func (p *Worker) Ready() <-chan event.GenericEvent { return p.ready }

// Forget drops what is known of a maintenance's preflight: it is not Planning, or gone.
func (p *Worker) Forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.results, name)
	delete(p.pending, name)
	if p.computing == name {
		p.computingForgotten = true
	}
}

// NeedLeaderElection: only the leader reconciles, and asks for preflights.
func (*Worker) NeedLeaderElection() bool { return true }

// Start computes the preflights asked for, one at a time, until ctx is done.
func (p *Worker) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("preflight")
	for {
		start := time.Now()
		wait, err := p.step(start)
		preflightSeconds.Add(time.Since(start).Seconds())
		if err != nil {
			if start.Sub(p.failed) >= time.Minute {
				logger.Info("Preflights wait", "reason", err.Error())
				p.failed = start
			}
			wait = time.Second
		}
		var after <-chan time.Time
		switch {
		case err == nil && wait == 0:
			// Computed: rest as long as it took.
			after = time.After(time.Since(start))
		case wait > 0:
			after = time.After(wait)
		default:
			after = time.After(keep)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-after:
		case <-p.wake:
			if err == nil && wait == 0 {
				<-after // rest first
			}
		}
	}
}

// step computes the next preflight asked for, with the snapshot made again first if it
// predates what the request had seen. It returns 0 when it computed one, how long to wait when
// the snapshot may not be made again yet, and -1 when nothing is asked for (the snapshot is
// dropped once none was asked for over keep). The snapshot is made and the preflight
// computed without the lock: the reconciles that look up their preflight meanwhile do not wait.
func (p *Worker) step(now time.Time) (time.Duration, error) {
	p.mu.Lock()
	var req request
	for len(p.queue) > 0 && req.name == "" {
		name := p.queue[0]
		p.queue = p.queue[1:]
		if r, ok := p.pending[name]; ok {
			req = r
			delete(p.pending, name)
		}
	}
	if req.name == "" {
		if p.snapshot != nil && now.Sub(p.asked) >= keep {
			p.snapshot = nil
		}
		p.mu.Unlock()
		return -1, nil
	}
	snapshot, seq := p.snapshot, p.seq
	if snapshot != nil && seq < req.seq {
		// The snapshot predates what the request had seen.
		if wait := p.at.Add(floor).Sub(now); wait > 0 {
			p.putBack(req)
			p.mu.Unlock()
			return wait, nil
		}
		snapshot = nil
	}
	p.computing, p.computingForgotten = req.name, false
	p.mu.Unlock()

	if snapshot == nil {
		var err error
		if snapshot, seq, err = p.make(); err != nil {
			p.mu.Lock()
			p.computing = ""
			p.putBack(req)
			p.mu.Unlock()
			return 0, err
		}
		p.mu.Lock()
		p.snapshot, p.seq, p.at = snapshot, seq, now
		p.made++
		p.mu.Unlock()
		preflightSnapshots.Inc()
	}
	status := statusOf(snapshot.Run(req.spec), now)
	preflightsComputed.Inc()

	p.mu.Lock()
	defer p.mu.Unlock()
	p.ran++
	forgotten := p.computingForgotten
	p.computing = ""
	if forgotten {
		return 0, nil // not Planning any more, or gone
	}
	p.results[req.name] = &computed{request: req, status: status, seq: seq, at: now}
	select {
	case p.ready <- event.GenericEvent{Object: &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: req.name}}}:
	default: // the reconcile's Refresh looks again
	}
	return 0, nil
}

// putBack queues the request again, first, unless a newer one of the maintenance is queued.
func (p *Worker) putBack(req request) {
	if _, ok := p.pending[req.name]; ok {
		return
	}
	p.queue, p.pending[req.name] = append([]string{req.name}, p.queue...), req
}

// make makes a snapshot from the caches, once every one is filled, and says the changes it has
// seen.
func (p *Worker) make() (*drainpreflight.Snapshot, uint64, error) {
	for _, s := range p.sources {
		if !s.synced() {
			return nil, 0, fmt.Errorf("the cache of %s is not filled yet", s.kind)
		}
	}
	// Read before the objects: a change while they are read makes the snapshot out of date.
	seq := p.changes.Load()
	var c drainpreflight.Cluster
	c.NamespaceLabels = map[string]map[string]string{}
	for _, s := range p.sources {
		for _, o := range s.indexer.List() {
			switch o := o.(type) {
			case *corev1.Node:
				c.Nodes = append(c.Nodes, o)
			case *corev1.Pod:
				c.Pods = append(c.Pods, o)
			case *policyv1.PodDisruptionBudget:
				c.PodDisruptionBudgets = append(c.PodDisruptionBudgets, o)
			case *appsv1.Deployment:
				c.Deployments = append(c.Deployments, o)
			case *appsv1.ReplicaSet:
				c.ReplicaSets = append(c.ReplicaSets, o)
			case *autoscalingv2.HorizontalPodAutoscaler:
				c.HorizontalPodAutoscalers = append(c.HorizontalPodAutoscalers, o)
			case *corev1.PersistentVolumeClaim:
				c.PersistentVolumeClaims = append(c.PersistentVolumeClaims, o)
			case *corev1.PersistentVolume:
				c.PersistentVolumes = append(c.PersistentVolumes, o)
			case *corev1.Namespace:
				c.NamespaceLabels[o.Name] = o.Labels
			case *nodemaintv1alpha1.DrainRule:
				c.DrainRules = append(c.DrainRules, o)
			}
		}
	}
	return drainpreflight.NewSnapshot(c), seq, nil
}

// statusOf is the status of a preflight report: what blocks and what is lost, worst first,
// then by node, within the CRD's bounds.
func statusOf(report drainpreflight.Report, now time.Time) *nodemaintv1alpha1.PreflightStatus {
	assumption := report.Assumption
	if report.NotPlaced != "" {
		assumption += "; " + report.NotPlaced
	}
	out := &nodemaintv1alpha1.PreflightStatus{Time: metav1.NewTime(now.Truncate(time.Second)), Assumption: few.Cut(assumption, 512),
		Deadlocks: int32(report.Deadlocks)}
	var findings []nodemaintv1alpha1.PreflightFinding
	for _, n := range report.Nodes {
		switch n.Verdict {
		case drainpreflight.Blocks:
			out.NodesBlocked++
		case drainpreflight.Loses:
			out.NodesLosing++
		}
		for _, f := range n.Findings {
			if f.Severity != drainpreflight.Blocks && f.Severity != drainpreflight.Loses {
				continue
			}
			findings = append(findings, nodemaintv1alpha1.PreflightFinding{
				Node: n.Name, Severity: string(f.Severity), Reason: f.Reason, Object: few.Cut(f.Object, 512), Message: few.Cut(f.Message, 512),
				Pods: f.Pods[:min(len(f.Pods), 5)], Count: int32(len(f.Pods)),
			})
		}
	}
	sort.SliceStable(findings, func(i, j int) bool {
		if findings[i].Severity != findings[j].Severity {
			return findings[i].Severity == string(drainpreflight.Blocks)
		}
		if a, b := nodemaintv1alpha1.DeadlockReason(findings[i].Reason), nodemaintv1alpha1.DeadlockReason(findings[j].Reason); a != b {
			return a
		}
		return findings[i].Node < findings[j].Node
	})
	if len(findings) > nodemaintv1alpha1.MaxPreflightFindings {
		out.FindingsNotListed = int32(len(findings) - nodemaintv1alpha1.MaxPreflightFindings)
		findings = findings[:nodemaintv1alpha1.MaxPreflightFindings]
	}
	out.Findings = findings
	return out
}
