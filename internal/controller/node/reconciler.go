// Package node holds the node controller: it makes one node and its pods what the
// NodeMaintenances selecting it want together (Reconciler).
package node

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/controller/protocol"
	"github.com/nodemaint/nodemaint/internal/evictionbacklog"
	"github.com/nodemaint/nodemaint/internal/ownwrites"
	"github.com/nodemaint/nodemaint/internal/recheck"
	"github.com/nodemaint/nodemaint/internal/requester"
)

// Reconciler makes one node and its pods what the NodeMaintenances selecting it want together:
// cordoned while any of them cordons it, a PreferNoSchedule taint while it is only planned, the
// UnderMaintenance condition and the maintenances annotation, and the EvacuationRequest condition on
// its targeted pods while any of them drains it. When none wants anything any more, it restores what
// nodemaint changed and nothing else.
//
// A reconcile observes the node (observer), decides (nodedecide.Decide, pure) and applies the
// decision: the writes, in the order the decision needs them, and their Events, the Events for
// the application owners of the pods the drain waits on last (tellAppOwners).
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Observer reads what a reconcile decides from (shared with the NodeMaintenance
	// reconciler: setup.Controllers builds it once); the writes use its refusal memory, record
	// of pods' writes, protocol, permission to delete pods and clock.
	Observer *observe.Observer
	// EvictionSlots bounds the evictions in flight across all nodes; nil is unbounded.
	EvictionSlots *semaphore.Weighted
	// Backlog paces the creation of EvictionRequests to the Eviction controller of this process
	// (evictionbacklog); nil: not paced.
	Backlog *evictionbacklog.Backlog
	// requestsDeleted and requestsCreated remember the EvictionRequests this replica deleted
	// (by the request's UID) and created (by its pod's) while the cache may not show it yet, so
	// that each is sent once.
	requestsDeleted, requestsCreated *ownwrites.Recent
	requestsOnce                     sync.Once
	// podConflicts remembers the pods' versions their writes were refused at (conflicts).
	podConflicts  *ownwrites.Conflicts
	conflictsOnce sync.Once
	// told remembers the Events for application owners recorded lately (tellAppOwners).
	told     *tellings
	toldOnce sync.Once
	// APIReader reads from the API server, not the cache: a pod is read again, with what answers
	// for it, right before its eviction (drain.Overtaken). Nil: not read again.
	APIReader client.Reader
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// Deleting pods (drainTimeoutAction Delete) is not among the markers: the default install does
// not grant it; the opt-in ClusterRole of config/pod-deletion does (see permissions.PodDeletion).
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=nodemaint.dev,resources=nodemaintenances,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile implements reconcile.Reconciler for nodes.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); apierrors.IsNotFound(err) {
		r.Observer.Reports.Forget(req.Name)
		return r.nodeGone(ctx, req.Name)
	} else if err != nil {
		return reconcile.Result{}, err
	}
	o := r.Observer
	v, err := o.View(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	obs, seen, err := o.Observe(ctx, v, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := o.Now()
	d := nodedecide.Decide(obs, now)
	// The NodeMaintenance reconciler reports this decision in the statuses (observe.Reports).
	o.Reports.Put(node, slices.Concat(obs.Maintenances, obs.Beyond), d.Report)
	res, err := r.apply(ctx, obs, d, o.Protocol.Writes(seen, obs.Pods, d, now), seen, now)
	if apierrors.IsForbidden(err) {
		sinkOf(r.Recorder).forbidden(node, obs.Maintenances, err)
	}
	return res, err
}

// apply carries the decision out, the protocol's writes w of its requests included: a straight
// list of writes, the same for every protocol. Withdrawals come first: the node's annotation stops
// naming a maintenance only once its requests are withdrawn, so the finalizer can rely on it.
// Requests, deletions and evictions come only once the node is written cordoned. A write that
// meets a conflict or an object gone was decided from a stale cache (see observe.Stale): it is dropped,
// never retried blind.
func (r *Reconciler) apply(ctx context.Context, obs nodedecide.Observation, d nodedecide.Decision, w protocol.Writes, seen *requester.Observed, now time.Time) (reconcile.Result, error) {
	next := d.RecheckAfter
	sink := sinkOf(r.Recorder)
	if d.ShutdownNotConfirmed {
		sink.shutdownNotConfirmed(obs.Node, d.Intent.OutOfServiceGrace)
	}
	again, err := r.patchPods(ctx, w.Withdraw, nil, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	// Writes not done, refused or held back as stale: looked at again when patchPods says, since
	// the change that made them stale may be one no watch of this reconciler lets through (a
	// kubelet's report).
	next = recheck.Soonest(next, again)
	if err := r.writeRequests(ctx, w.WithdrawRequests, seen, obs.Pods); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.writeNode(ctx, obs, d); err != nil {
		return observe.Settle(err)
	}
	if !d.Intent.Drain {
		return reconcile.Result{RequeueAfter: next}, nil
	}
	again, err = r.patchPods(ctx, w.Request, &w.Reason, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	next = recheck.Soonest(next, again)
	if err := r.writeRequests(ctx, w.RequestRequests, seen, obs.Pods); err != nil {
		return reconcile.Result{}, err
	}
	if r.Backlog.Queued(obs.Node.Name) {
		next = recheck.Soonest(next, backlogRecheck)
	}
	if err := r.deletePods(ctx, obs.Node, d.Delete, d.GracePeriods); err != nil {
		return reconcile.Result{}, err
	}
	wait, denied, err := r.evictPods(ctx, d.Evict, d.GracePeriods, seen, now)
	if denied != nil {
		// Said where the admin looks, as a forbidden write of the node is; the pods back off and
		// are reported each on its own, and the node's other work goes on.
		sink.forbidden(obs.Node, obs.Maintenances, denied)
	}
	if err != nil {
		// The work queue's back-off retries; a RequeueAfter next to an error is ignored.
		return reconcile.Result{}, err
	}
	next = r.tellAppOwners(ctx, obs.Node, d, recheck.Soonest(next, wait), now)
	return reconcile.Result{RequeueAfter: next}, nil
}

// writeNode writes the node's spec and annotations, then its UnderMaintenance condition, as the
// decision wants them, and emits the Events of the change.
func (r *Reconciler) writeNode(ctx context.Context, obs nodedecide.Observation, d nodedecide.Decision) error {
	if d.NodeChanged {
		want := obs.Node.DeepCopy()
		want.Spec, want.Annotations = *d.Node.Spec.DeepCopy(), maps.Clone(d.Node.Annotations)
		// The optimistic lock keeps the taint list and annotations of others intact.
		if err := r.Client.Patch(ctx, want, client.MergeFromWithOptions(obs.Node, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		if d.Change.Reverted {
			log.FromContext(ctx).Info("node was uncordoned during maintenance; cordoned it again", "maintenances", maintenanceNames(d.Intent))
		}
		if d.Change.OutOfService {
			outOfServiceTaints.Inc()
			log.FromContext(ctx).Info("node is shut down with pods stuck terminating; tainted out-of-service")
		}
		sinkOf(r.Recorder).nodeWritten(obs.Node, obs.Maintenances, d)
	}
	if d.ConditionChanged {
		// A strategic merge patch of the conditions alone, merged by type: the kubelet's stay as
		// they are.
		want := obs.Node.DeepCopy()
		want.Status.Conditions = slices.Clone(d.Node.Status.Conditions)
		return r.Client.Status().Patch(ctx, want, client.StrategicMergeFrom(obs.Node))
	}
	return nil
}

// backlogRecheck is when a node whose requests wait for room in the Eviction controller's backlog
// looks again if the backlog has not woken it before (it wakes the nodes in turn as room comes).
const backlogRecheck = 30 * time.Second
