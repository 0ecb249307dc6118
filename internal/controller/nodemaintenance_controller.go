package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/fairqueue"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// NodeMaintenanceReconciler keeps a NodeMaintenance's finalizer, status and Events: which nodes it
// selects, how many pods are pending and evacuating on each, its phase, and the Drained condition.
type NodeMaintenanceReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Evictions holds the refused evictions the node reconciler met, to report them.
	Evictions *drain.Evictions
	// OwnPods are nodemaint-controller's own pods (see NodeReconciler.OwnPods).
	OwnPods *OwnPods
	// Clock tells the time; nil is the real clock.
	Clock clock.PassiveClock
	// StatusBatchDelay is how long pod changes are gathered before the status is written again, so
	// that thousands of pods moving do not mean thousands of status writes. It is also the least
	// time between two status writes of one NodeMaintenance: node changes and the controller's own
	// writes reach it at once, and would otherwise write the status as fast as it changes.
	StatusBatchDelay time.Duration

	// statusWritten holds when this replica last wrote each NodeMaintenance's status
	// (types.NamespacedName → time.Time). Memory only: after a restart the first write just
	// happens.
	statusWritten sync.Map

	// active is when this replica became the leader: the node reconciler counts response timeouts
	// from it at the earliest, and so must the status that explains them.
	active activeSince
}

// +kubebuilder:rbac:groups=nodemaint.dev,resources=nodemaintenances,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=nodemaint.dev,resources=nodemaintenances/status,verbs=get;patch
// +kubebuilder:rbac:groups=nodemaint.dev,resources=nodemaintenances/finalizers,verbs=update

// Reconcile implements reconcile.Reconciler for NodeMaintenances.
func (r *NodeMaintenanceReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	now := clockOrReal(r.Clock).Now()
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	if err := r.Client.Get(ctx, req.NamespacedName, nm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, nm)
	}
	if !controllerutil.ContainsFinalizer(nm, nodemaintv1alpha1.Finalizer) {
		orig := nm.DeepCopy()
		controllerutil.AddFinalizer(nm, nodemaintv1alpha1.Finalizer)
		if err := r.Client.Patch(ctx, nm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return requeueOnConflict(err)
		}
	}

	nodes, sel, total, err := selectedNodes(ctx, r.Client, nm)
	if err != nil {
		return reconcile.Result{}, err
	}
	status, err := r.observe(ctx, nm, nodes, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	meta.SetStatusCondition(&status.Conditions, nodesSelectedCondition(nm, sel, len(nodes), total))
	setSpecValid(nm, &status)
	// While a drain is under way, what blocks it may change with no event (an eviction refused,
	// a response timeout run out): look again now and then.
	var result reconcile.Result
	if nm.Spec.Drain && len(nodes) > 0 && meta.IsStatusConditionFalse(status.Conditions, nodemaintv1alpha1.ConditionDrained) {
		result.RequeueAfter = drainStatusRefresh
	}
	if equality.Semantic.DeepEqual(nm.Status, status) {
		return result, nil
	}
	if wait := r.statusWriteWait(req.NamespacedName, now); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	orig := nm.DeepCopy()
	nm.Status = status
	if err := r.Client.Status().Patch(ctx, nm, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.statusWritten.Store(req.NamespacedName, clockOrReal(r.Clock).Now())
	r.recordTransitions(orig, nm, now)
	r.recordSpecValid(orig, nm)
	return result, nil
}

// statusWriteWait is how long the status of key must wait before it is written again: at least
// StatusBatchDelay after the last write.
func (r *NodeMaintenanceReconciler) statusWriteWait(key types.NamespacedName, now time.Time) time.Duration {
	last, ok := r.statusWritten.Load(key)
	if !ok {
		return 0
	}
	return max(0, last.(time.Time).Add(r.StatusBatchDelay).Sub(now))
}

// drainStatusRefresh is how often the status of a drain under way is computed again.
const drainStatusRefresh = 5 * time.Second

// observe computes the status from the cache. It counts every selected node in the totals, and
// details only the nodes with something to report, within bounds (see listNodes).
func (r *NodeMaintenanceReconciler) observe(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance, nodes []*corev1.Node, now time.Time) (nodemaintv1alpha1.NodeMaintenanceStatus, error) {
	status := nodemaintv1alpha1.NodeMaintenanceStatus{
		ObservedGeneration: nm.Generation,
		SelectedNodes:      int32(len(nodes)),
		Conditions:         append([]metav1.Condition(nil), nm.Status.Conditions...),
		DrainStartTime:     nm.Status.DrainStartTime,
	}
	switch {
	case !nm.Spec.Drain:
		status.DrainStartTime = nil
	case status.DrainStartTime == nil:
		status.DrainStartTime = &metav1.Time{Time: now.Truncate(time.Second)}
	}
	// By name, so that the nodes and pods the status names do not change from one look to the next.
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	reports := make([]nodeReport, 0, len(nodes))
	var (
		left    []string
		skipped skippedPods
	)
	for _, node := range nodes {
		pods, err := podsOnNode(ctx, r.Client, node.Name)
		if err != nil {
			return status, err
		}
		var nms []*nodemaintv1alpha1.NodeMaintenance
		if nm.Spec.Drain {
			if nms, err = maintenancesSelecting(ctx, r.Client, node); err != nil {
				return status, err
			}
		}
		plan, err := planNode(ctx, r.Client, node, pods, planOptions{ownPods: r.OwnPods, ignoreDrainLabel: maintenance.IgnoreDrainLabel(nms)})
		if err != nil {
			return status, err
		}
		ns := nodemaintv1alpha1.NodeMaintenanceNodeStatus{
			PodsPendingEvacuation: int32(plan.Pending()),
			PodsSkipped:           int32(len(plan.Skipped)),
			OutOfService:          node.Annotations[nodemaintv1alpha1.OutOfServiceAnnotation] != "",
		}
		skipped.add(plan)
		if nm.Spec.Drain && plan.Pending() == 0 {
			n, err := attachedVolumes(ctx, r.Client, node, pods)
			if err != nil {
				return status, err
			}
			ns.VolumesAttached = int32(n)
		}
		for _, group := range [][]drain.Classified{plan.Current, plan.Later, plan.WaitCompleted} {
			for _, c := range group {
				if len(left) < maxBlockedNames {
					left = append(left, c.Pod.Namespace+"/"+c.Pod.Name)
				}
			}
		}
		for _, group := range [][]drain.Classified{plan.Current, plan.Later, plan.WaitCompleted} {
			for _, c := range group {
				if evacuation.Accepted(c.Pod) {
					ns.PodsEvacuating++
				}
			}
		}
		if nm.Spec.Drain {
			intent := maintenance.Intent(nms, func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase {
				return maintenance.Phase(nm, false)
			})
			ns.Blocked = boundBlocked(drain.Blocked(plan, intent.Drain, r.active.policy(policyOf(intent)), r.Evictions, now))
		}
		reports = append(reports, nodeReport{name: node.Name, status: ns})
		status.PodsPendingEvacuation += ns.PodsPendingEvacuation
		status.PodsEvacuating += ns.PodsEvacuating
		status.PodsSkipped += ns.PodsSkipped
		status.VolumesAttached += ns.VolumesAttached
		switch {
		case ns.PodsPendingEvacuation > 0:
			status.NodesPending++
		case nm.Spec.Drain && ns.VolumesAttached == 0:
			status.NodesDrained++
		}
		if ns.OutOfService {
			status.NodesOutOfService++
		}
	}
	status.Nodes, status.NodesNotListed = listNodes(reports, nodemaintv1alpha1.MaxStatusNodes, nodemaintv1alpha1.MaxStatusNodesBytes)
	volumes := status.VolumesAttached
	// A maintenance that selects no node has drained nothing: it is never Drained (a typo in a
	// node name must not read as done).
	drained := nm.Spec.Drain && len(nodes) > 0 && status.PodsPendingEvacuation == 0 && volumes == 0
	status.Phase = maintenance.Phase(nm, drained)

	cond := metav1.Condition{Type: nodemaintv1alpha1.ConditionDrained, ObservedGeneration: nm.Generation}
	switch {
	case !nm.Spec.Drain:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, nodemaintv1alpha1.ReasonDrainNotRequested, "spec.drain is false"
	case len(nodes) == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, nodemaintv1alpha1.ReasonNoNodesSelected, "the nodeSelector selects no node: nothing is drained"
	case drained:
		cond.Status, cond.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrained
		cond.Message = fmt.Sprintf("every targeted pod is gone from the %d selected nodes", len(nodes)) + skipped.note(status.PodsSkipped)
	case status.PodsPendingEvacuation == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonVolumesAttached
		cond.Message = fmt.Sprintf("every targeted pod is gone; %d volumes of drained pods are still attached", volumes) + skipped.note(status.PodsSkipped)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonPodsPending
		cond.Message = fmt.Sprintf("%d pods pending evacuation (%d evacuating by their owners) on %d nodes",
			status.PodsPendingEvacuation, status.PodsEvacuating, status.NodesPending) + skipped.note(status.PodsSkipped)
	}
	meta.SetStatusCondition(&status.Conditions, cond)

	timedOut := metav1.Condition{Type: nodemaintv1alpha1.ConditionDrainTimedOut, ObservedGeneration: nm.Generation,
		Status: metav1.ConditionFalse, Reason: nodemaintv1alpha1.ReasonWithinDrainTimeout}
	nmAt := nm.DeepCopy()
	nmAt.Status.DrainStartTime = status.DrainStartTime
	deadline := maintenance.DrainDeadline(nmAt)
	switch {
	case nm.Spec.DrainTimeout == nil || !nm.Spec.Drain || !maintenance.Usable(nm):
		meta.RemoveStatusCondition(&status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut)
	case drained || now.Before(deadline):
		meta.SetStatusCondition(&status.Conditions, timedOut)
	default:
		timedOut.Status, timedOut.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrainTimedOut
		timedOut.Message = fmt.Sprintf("not drained %s after drain started: %d pods and %d volumes left on %d nodes",
			nm.Spec.DrainTimeout.Duration, status.PodsPendingEvacuation, volumes, status.NodesPending)
		if len(left) > 0 {
			timedOut.Message += ", among them " + strings.Join(left, ", ")
		}
		if nm.Spec.DrainTimeoutAction == nodemaintv1alpha1.DrainTimeoutActionDelete {
			timedOut.Message += "; deleting them (drainTimeoutAction Delete)"
		}
		meta.SetStatusCondition(&status.Conditions, timedOut)
	}
	return status, nil
}

// nodesSelectedCondition says whether the selector selects no node, which is likely a mistake
// (the maintenance then does nothing), or every node of a cluster of several, which is likely a
// mistake too (the whole cluster is cordoned and drained).
func nodesSelectedCondition(nm *nodemaintv1alpha1.NodeMaintenance, sel maintenance.Selector, selected, total int) metav1.Condition {
	c := metav1.Condition{Type: nodemaintv1alpha1.ConditionNodesSelected, ObservedGeneration: nm.Generation}
	switch {
	case sel.Err() != nil:
		c.Status, c.Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonInvalidNodeSelector
		c.Message = fmt.Sprintf("the nodeSelector selects no node: %v", sel.Err())
	case selected == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, nodemaintv1alpha1.ReasonNoNodesSelected, "the nodeSelector selects no node"
	case selected == total && total > 1:
		c.Status, c.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonAllNodesSelected
		c.Message = fmt.Sprintf("the nodeSelector selects every node of the cluster (%d nodes)", selected)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, nodemaintv1alpha1.ReasonNodesSelected
		c.Message = fmt.Sprintf("the nodeSelector selects %d nodes", selected)
	}
	return c
}

// recordTransitions emits Events for phase and Drained changes, and for a selector that selects
// no node or every node.
func (r *NodeMaintenanceReconciler) recordTransitions(old, cur *nodemaintv1alpha1.NodeMaintenance, now time.Time) {
	if old.Status.Phase != cur.Status.Phase {
		r.Recorder.Eventf(cur, nil, corev1.EventTypeNormal, "Phase"+string(cur.Status.Phase), "Reconcile",
			"phase %s on %d nodes", cur.Status.Phase, cur.Status.SelectedNodes)
	}
	if old.Status.ObservedGeneration != cur.Status.ObservedGeneration || old.Status.SelectedNodes != cur.Status.SelectedNodes {
		switch c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionNodesSelected); {
		case c == nil:
		case c.Reason == nodemaintv1alpha1.ReasonInvalidNodeSelector, c.Reason == nodemaintv1alpha1.ReasonNoNodesSelected, c.Reason == nodemaintv1alpha1.ReasonAllNodesSelected:
			r.Recorder.Eventf(cur, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s", c.Message)
		}
	}
	if !meta.IsStatusConditionTrue(old.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut) &&
		meta.IsStatusConditionTrue(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut) {
		c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut)
		r.Recorder.Eventf(cur, nil, corev1.EventTypeWarning, nodemaintv1alpha1.ReasonDrainTimedOut, "Drain", "%s", c.Message)
	}
	was := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
	is := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
	if is != nil && is.Status == metav1.ConditionTrue && (was == nil || was.Status != metav1.ConditionTrue) {
		r.Recorder.Eventf(cur, nil, corev1.EventTypeNormal, nodemaintv1alpha1.ReasonDrained, "Drain", "%s", is.Message)
		if start := cur.Status.DrainStartTime; start != nil {
			drainDuration.Observe(now.Sub(start.Time).Seconds())
		}
	}
}

// finalize removes the finalizer once no node advertises the maintenance any more: the node
// reconciler has then restored the nodes and withdrawn the maintenance's evacuation requests.
func (r *NodeMaintenanceReconciler) finalize(ctx context.Context, nm *nodemaintv1alpha1.NodeMaintenance) (reconcile.Result, error) {
	r.statusWritten.Delete(client.ObjectKeyFromObject(nm))
	if !controllerutil.ContainsFinalizer(nm, nodemaintv1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	nodes, err := nodesAdvertising(ctx, r.Client, nm.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(nodes) > 0 {
		log.FromContext(ctx).V(1).Info("waiting for nodes to be restored", "nodes", len(nodes))
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	orig := nm.DeepCopy()
	controllerutil.RemoveFinalizer(nm, nodemaintv1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, nm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return requeueOnConflict(err)
	}
	return reconcile.Result{}, nil
}

func requeueOnConflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return reconcile.Result{}, err
}

// SetupWithManager registers the NodeMaintenance controller. Node changes reach it at once; pod
// changes are batched by StatusBatchDelay.
func (r *NodeMaintenanceReconciler) SetupWithManager(mgr manager.Manager, concurrency int) error {
	if err := r.active.start(mgr); err != nil {
		return err
	}
	c := mgr.GetClient()
	return builder.ControllerManagedBy(mgr).
		Named("nodemaintenance").
		For(&nodemaintv1alpha1.NodeMaintenance{}).
		Watches(&corev1.Node{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return maintenancesOfNode(ctx, c, o.(*corev1.Node))
			}),
			builder.WithPredicates(nodeChanged())).
		Watches(&corev1.Pod{},
			delayedMapHandler(r.StatusBatchDelay, func(ctx context.Context, o client.Object) []reconcile.Request {
				pod := o.(*corev1.Pod)
				if pod.Spec.NodeName == "" {
					return nil
				}
				node := &corev1.Node{}
				if err := c.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err != nil {
					return nil
				}
				return maintenancesOfNode(ctx, c, node)
			}),
			builder.WithPredicates(podChanged())).
		WithOptions(fairqueue.Options(concurrency)).
		Complete(r)
}
