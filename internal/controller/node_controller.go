package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// NodeReconciler makes one node and its pods what the NodeMaintenances selecting it want together:
// cordoned while any of them cordons it, a PreferNoSchedule taint while it is only planned, the
// UnderMaintenance condition and the maintenances annotation, and the EvacuationRequest condition on
// its targeted pods while any of them drains it. When none wants anything any more, it restores what
// nodemaint changed and nothing else.
type NodeReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Evictions remembers refused evictions; shared with the NodeMaintenance reconciler, which
	// reports them.
	Evictions *drain.Evictions
	// EvictionSlots bounds the evictions in flight across all nodes; nil is unbounded.
	EvictionSlots *semaphore.Weighted
	// OwnPods are nodemaint-controller's own pods: asked to move like any other, never evicted
	// or deleted. Nil: none.
	OwnPods *OwnPods
	// Clock tells the time; nil is the real clock. A reconcile reads it once and decides, writes
	// and schedules its next look from that one instant.
	Clock clock.PassiveClock

	// active is when this replica became the leader: response timeouts count from then at the
	// earliest.
	active activeSince
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=delete
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=nodemaint.dev,resources=nodemaintenances,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile implements reconcile.Reconciler for nodes.
func (r *NodeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	nms, err := maintenancesSelecting(ctx, r.Client, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	defer func() { r.reportForbidden(node, nms, err) }()
	pods, err := podsOnNode(ctx, r.Client, node.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	plan, err := planNode(ctx, r.Client, node, pods, planOptions{ownPods: r.OwnPods, ignoreDrainLabel: maintenance.IgnoreDrainLabel(nms)})
	if err != nil {
		return reconcile.Result{}, err
	}
	volumes := 0
	if plan.Pending() == 0 {
		if volumes, err = attachedVolumes(ctx, r.Client, node, pods); err != nil {
			return reconcile.Result{}, err
		}
	}
	intent := maintenance.Intent(nms, func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase {
		p := maintenance.Phase(nm, false)
		if p == nodemaintv1alpha1.PhaseDrain && plan.Pending() == 0 && volumes == 0 {
			return nodemaintv1alpha1.PhaseDrainComplete
		}
		return p
	})
	now := clockOrReal(r.Clock).Now()
	var next requeue
	oos, wait, noEvidence := outOfService(node, pods, intent, now)
	next.after(wait)
	if noEvidence != "" {
		r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, "ShutdownNotConfirmed", "Taint", "%s", noEvidence)
	}

	// Withdrawals first: the node's annotation stops naming a maintenance only once its requests
	// are withdrawn, so the finalizer can rely on it.
	current := map[types.UID]bool{}
	for _, c := range plan.Current {
		current[c.Pod.UID] = true
	}
	if err := r.syncPods(ctx, pods, intent, current, false); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.syncNode(ctx, node, intent, nms, oos, now); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		if apierrors.IsNotFound(err) {
			// The node was deleted since the cache saw it: nothing is left to do for it.
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	// A complete cordon is a prerequisite of the drain (KEP-4212): no pod is asked to move, and
	// none is evicted or deleted, before the node is unschedulable, or a replacement could land
	// right back on it. syncNode has cordoned it (or failed and returned).
	if !intent.Drain || !node.Spec.Unschedulable {
		return next.result(), nil
	}
	if err := r.syncPods(ctx, pods, intent, current, true); err != nil {
		return reconcile.Result{}, err
	}
	if !intent.DeleteAt.IsZero() {
		if wait := intent.DeleteAt.Sub(now); wait > 0 {
			next.after(wait)
		} else if err := r.deleteLeft(ctx, node, plan); err != nil {
			return reconcile.Result{}, err
		}
	}
	wait, err = r.evictCurrent(ctx, plan, intent, now)
	if err != nil {
		// The work queue's back-off retries; a RequeueAfter next to an error is ignored.
		return reconcile.Result{}, err
	}
	next.after(wait)
	return next.result(), nil
}

// reportForbidden makes a permission error (a role narrowed below what config/rbac grants)
// visible where the admin looks, as a Warning Event on the maintenances of the node; otherwise it
// would show only as a maintenance that makes no progress and an error in the controller's log.
func (r *NodeReconciler) reportForbidden(node *corev1.Node, nms []*nodemaintv1alpha1.NodeMaintenance, err error) {
	if err == nil || !apierrors.IsForbidden(err) {
		return
	}
	for _, nm := range nms {
		r.Recorder.Eventf(nm, node, corev1.EventTypeWarning, "Forbidden", "Reconcile",
			"node %s: nodemaint is not allowed to do its work, check its RBAC: %v", node.Name, err)
	}
}

// requeue keeps the earliest time a reconcile must look again.
type requeue struct{ d time.Duration }

func (q *requeue) after(d time.Duration) {
	if d > 0 && (q.d == 0 || d < q.d) {
		q.d = d
	}
}

func (q *requeue) result() reconcile.Result { return reconcile.Result{RequeueAfter: q.d} }

// syncPods withdraws nodemaint's EvacuationRequest from the pods that are not drained now and,
// when request is true, sets it on the pods drained now (the current order group) while the node
// is drained. It never touches another requester's request.
func (r *NodeReconciler) syncPods(ctx context.Context, pods []corev1.Pod, intent maintenance.NodeIntent, current map[types.UID]bool, request bool) error {
	var (
		mu                   sync.Mutex
		errs                 []error
		requested, withdrawn int
	)
	defer func() {
		if requested+withdrawn > 0 {
			log.FromContext(ctx).Info("evacuation requests updated", "requested", requested, "withdrawn", withdrawn)
		}
	}()
	// In parallel: one patch after the other, the requests for a node of 100 pods took seconds
	// on a loaded API server, and its owners only start moving pods once they have them.
	var g errgroup.Group
	g.SetLimit(podWritesPerNode)
	for i := range pods {
		pod := &pods[i]
		orig := pod.DeepCopy()
		cur := evacuation.Condition(pod, evacuation.Request)
		ours := cur != nil && cur.Reason == evacuation.ReasonNodeMaintenance
		changed := false
		switch want := intent.Drain && current[pod.UID]; {
		case want && !request:
		case want && (cur == nil || cur.Status != corev1.ConditionTrue || ours):
			changed = evacuation.SetCondition(pod, maintenance.EvacuationRequest(intent.Reason))
		case !want && ours:
			changed = evacuation.RemoveCondition(pod, evacuation.Request)
		}
		if !changed {
			continue
		}
		g.Go(func() error {
			err := r.Client.Status().Patch(ctx, pod, client.StrategicMergeFrom(orig))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
			case evacuation.RequestedBy(pod, evacuation.ReasonNodeMaintenance):
				requested++
				if drain.Unanswerable(pod) && !evacuation.RequestedBy(orig, evacuation.ReasonNodeMaintenance) {
					r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "BarePod", "RequestEvacuation",
						"evacuation requested for node maintenance; this pod has no controller: once evicted it will not be recreated")
				}
			default:
				withdrawn++
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// syncNode patches the node's spec.unschedulable, taint, annotations and condition.
func (r *NodeReconciler) syncNode(ctx context.Context, node *corev1.Node, intent maintenance.NodeIntent, nms []*nodemaintv1alpha1.NodeMaintenance, outOfService bool, now time.Time) error {
	logger := log.FromContext(ctx)
	orig := node.DeepCopy()
	wasCordonedByUs := false
	for _, e := range maintenance.ParseEntries(node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation]) {
		wasCordonedByUs = wasCordonedByUs || maintenance.Cordons(e.Phase)
	}

	cordoned, uncordoned, reverted := false, false, false
	switch {
	case intent.Cordon && !node.Spec.Unschedulable:
		node.Spec.Unschedulable = true
		setAnnotation(node, nodemaintv1alpha1.CordonedAnnotation, "true")
		cordoned, reverted = true, wasCordonedByUs
	case !intent.Cordon && node.Annotations[nodemaintv1alpha1.CordonedAnnotation] != "":
		uncordoned = node.Spec.Unschedulable
		node.Spec.Unschedulable = false
		delete(node.Annotations, nodemaintv1alpha1.CordonedAnnotation)
	}
	if len(intent.Entries) > 0 {
		setAnnotation(node, nodemaintv1alpha1.MaintenancesAnnotation, maintenance.FormatEntries(intent.Entries))
	} else {
		delete(node.Annotations, nodemaintv1alpha1.MaintenancesAnnotation)
	}
	node.Spec.Taints = withTaint(node.Spec.Taints, corev1.Taint{
		Key: nodemaintv1alpha1.PlannedMaintenanceTaint, Effect: corev1.TaintEffectPreferNoSchedule,
	}, intent.PlannedTaint)
	hadOutOfService := node.Annotations[nodemaintv1alpha1.OutOfServiceAnnotation] != ""
	if outOfService || hadOutOfService {
		node.Spec.Taints = withTaint(node.Spec.Taints, outOfServiceTaint, outOfService)
	}
	if outOfService {
		setAnnotation(node, nodemaintv1alpha1.OutOfServiceAnnotation, "true")
	} else {
		delete(node.Annotations, nodemaintv1alpha1.OutOfServiceAnnotation)
	}

	if !equality.Semantic.DeepEqual(orig.Spec, node.Spec) || !equality.Semantic.DeepEqual(orig.Annotations, node.Annotations) {
		// The optimistic lock keeps the taint list and annotations of others intact.
		if err := r.Client.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		names := maintenanceNames(intent)
		switch {
		case reverted:
			logger.Info("node was uncordoned during maintenance; cordoned it again", "maintenances", names)
			r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, "UncordonReverted", "Cordon",
				"node was uncordoned while NodeMaintenance %s keeps it cordoned; cordoned it again", names)
			for _, nm := range nms {
				if maintenance.Cordons(maintenance.Phase(nm, false)) {
					r.Recorder.Eventf(nm, node, corev1.EventTypeWarning, "UncordonReverted", "Cordon",
						"node %s was uncordoned during the maintenance; cordoned it again", node.Name)
				}
			}
		case cordoned:
			r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, "Cordoned", "Cordon", "cordoned for NodeMaintenance %s", names)
		case uncordoned:
			r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, "Uncordoned", "Uncordon", "maintenance complete; uncordoned")
		}
		switch {
		case outOfService && !hadOutOfService:
			logger.Info("node is shut down with pods stuck terminating; tainted out-of-service")
			r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, "OutOfService", "Taint",
				"NotReady for over %s with pods stuck terminating: tainted %s so they fail over", intent.OutOfServiceGrace, corev1.TaintNodeOutOfService)
		case !outOfService && hadOutOfService:
			r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, "BackInService", "Taint", "removed the %s taint", corev1.TaintNodeOutOfService)
		}
	}
	return r.syncNodeCondition(ctx, node, intent.Condition(), now)
}

// syncNodeCondition sets or removes the UnderMaintenance node condition with a strategic merge
// patch, which leaves the kubelet's conditions alone.
func (r *NodeReconciler) syncNodeCondition(ctx context.Context, node *corev1.Node, want *corev1.NodeCondition, at time.Time) error {
	orig := node.DeepCopy()
	idx := -1
	for i, c := range node.Status.Conditions {
		if c.Type == nodemaintv1alpha1.NodeConditionUnderMaintenance {
			idx = i
		}
	}
	switch {
	case want == nil && idx < 0:
		return nil
	case want == nil:
		node.Status.Conditions = append(node.Status.Conditions[:idx], node.Status.Conditions[idx+1:]...)
	case idx >= 0 && node.Status.Conditions[idx].Status == want.Status &&
		node.Status.Conditions[idx].Reason == want.Reason && node.Status.Conditions[idx].Message == want.Message:
		return nil
	default:
		now := metav1.NewTime(at)
		want.LastHeartbeatTime, want.LastTransitionTime = now, now
		if idx >= 0 {
			if node.Status.Conditions[idx].Status == want.Status {
				want.LastTransitionTime = node.Status.Conditions[idx].LastTransitionTime
			}
			node.Status.Conditions[idx] = *want
		} else {
			node.Status.Conditions = append(node.Status.Conditions, *want)
		}
	}
	return r.Client.Status().Patch(ctx, node, client.StrategicMergeFrom(orig))
}

func maintenanceNames(intent maintenance.NodeIntent) string {
	names := make([]string, 0, len(intent.Entries))
	for _, e := range intent.Entries {
		names = append(names, e.Name)
	}
	return strings.Join(names, ", ")
}

func setAnnotation(obj metav1.Object, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}

// withTaint returns taints with t present or absent (matched by key and effect).
func withTaint(taints []corev1.Taint, t corev1.Taint, present bool) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints)+1)
	found := false
	for _, cur := range taints {
		if cur.Key == t.Key && cur.Effect == t.Effect {
			if !present {
				continue
			}
			found = true
		}
		out = append(out, cur)
	}
	if present && !found {
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// SetupWithManager registers the node controller: nodes, the NodeMaintenances that select them,
// and their pods.
func (r *NodeReconciler) SetupWithManager(mgr manager.Manager, concurrency int) error {
	if err := r.active.start(mgr); err != nil {
		return err
	}
	c := mgr.GetClient()
	return builder.ControllerManagedBy(mgr).
		Named("node").
		For(&corev1.Node{}, builder.WithPredicates(nodeChanged())).
		Watches(&nodemaintv1alpha1.NodeMaintenance{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return nodesOfMaintenance(ctx, c, o.(*nodemaintv1alpha1.NodeMaintenance))
			}),
			builder.WithPredicates(maintenanceIntentChanged())).
		Watches(&corev1.Pod{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return nodeOfPod(ctx, c, o.(*corev1.Pod))
			}),
			builder.WithPredicates(podChanged())).
		Watches(&storagev1.VolumeAttachment{},
			handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*storagev1.VolumeAttachment).Spec.NodeName}}}
			})).
		Watches(&nodemaintv1alpha1.DrainRule{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
				return nodesUnderMaintenance(ctx, c)
			})).
		WithOptions(fairqueue.Options(concurrency)).
		Complete(r)
}
