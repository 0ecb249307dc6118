package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide"
	"github.com/nodemaint/nodemaint/internal/controller/deployment/deploymentdecide/marks"
	"github.com/nodemaint/nodemaint/internal/fairqueue"
	"github.com/nodemaint/nodemaint/internal/ownwrites"
	"github.com/nodemaint/nodemaint/internal/responder"
	"github.com/nodemaint/nodemaint/internal/responder/surgepolicy"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// DefaultSurgeTimeout is how long a surge's replacements may make no progress (none created,
// scheduled, initialized or Ready; plus the Deployment's minReadySeconds) before the responder
// gives up and lets eviction move the pods, once a replacement shows a problem; a surge that is
// only slow gets the Deployment's progressDeadlineSeconds if that is longer (see decide's
// patience).
const DefaultSurgeTimeout = 2 * time.Minute

// controllerOwnerIndex indexes pods and ReplicaSets by the UID of their controller.
const controllerOwnerIndex = "nodemaint.dev/deployment-responder-controller-uid"

// Reconciler is the Deployment evacuation responder. It reconciles Deployments.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// SurgeTimeout bounds a surge: DefaultSurgeTimeout when zero.
	SurgeTimeout time.Duration
	// Clock tells the time (setup.Controllers gives every controller one).
	Clock clock.PassiveClock
	// Written remembers the pods' answers and marks written until the cache shows them, so that
	// a reconcile right after does not write them again. Nil: none.
	Written *ownwrites.Writes[*corev1.Pod]
	// evictionWrites remembers the Evictions' status written (answers, progress) until the
	// cache shows them (evictionClient); set up with an EvictionResponder.
	evictionWrites *ownwrites.Writes[*lifecyclev1alpha1.Eviction]
	// EvictionResponder is the responder's name in KEP-4563's Evictions (EvictionResponder): when
	// set, the responder also answers the Evictions of its pods on which it is Active (the
	// cluster serves lifecycle.k8s.io/v1alpha1). Empty: pod conditions only.
	EvictionResponder string
}

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictions,verbs=get;list;watch
// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictions/status,verbs=patch

// Reconcile implements reconcile.Reconciler for Deployments.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, d); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone: an autoscaler whose bounds were raised for its surge is restored.
			err = r.releaseAutoscalers(ctx, req.NamespacedName)
		}
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return reconcile.Result{}, err
	}
	if !d.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	in, view, err := r.observe(ctx, d)
	if err != nil {
		return reconcile.Result{}, err
	}
	p := deploymentdecide.Decide(in)
	ownWrites(&p, view)
	written, err := r.apply(ctx, d, in.Pods, view, p)
	if err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return reconcile.Result{}, err
	}
	if err := r.syncMarkers(ctx, d, in, p.Ready, p.MoreSteps, written); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return reconcile.Result{}, err
	}
	next := r.heartbeats(ctx, in, view)
	if wait := time.Until(next); !next.IsZero() && (p.RequeueAfter == 0 || wait < p.RequeueAfter) {
		p.RequeueAfter = max(wait, time.Second)
	}
	return reconcile.Result{RequeueAfter: p.RequeueAfter}, nil
}

// observe reads the Deployment's ReplicaSets and pods from the cache, the pods' Evictions (with an
// EvictionResponder), and the HorizontalPodAutoscalers that target it or hold bounds raised for
// it (autoscalersOf). The pods are those of the protocol's view: asked through pod conditions or
// an Eviction, they look the same to deploymentdecide.Decide.
func (r *Reconciler) observe(ctx context.Context, d *appsv1.Deployment) (deploymentdecide.Input, responder.View, error) {
	in := deploymentdecide.Input{Deployment: d, Now: r.Clock.Now(), SurgeTimeout: r.SurgeTimeout}
	if in.SurgeTimeout <= 0 {
		in.SurgeTimeout = DefaultSurgeTimeout
	}
	var view responder.View
	var rsList appsv1.ReplicaSetList
	if err := r.Client.List(ctx, &rsList, client.InNamespace(d.Namespace), client.MatchingFields{controllerOwnerIndex: string(d.UID)}); err != nil {
		return in, view, err
	}
	for i := range rsList.Items {
		rs := &rsList.Items[i]
		in.ReplicaSets = append(in.ReplicaSets, rs)
		// The cache's pods, not copies: apply writes a few of them at most, and deep copies of
		// every pod of every Deployment at each reconcile would cost much of the controller's
		// CPU in a large drain. apply gets copies of those it writes (ownWrites).
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingFields{controllerOwnerIndex: string(rs.UID)}, client.UnsafeDisableDeepCopy); err != nil {
			return in, view, err
		}
		for j := range pods.Items {
			pod := &pods.Items[j]
			if fresh := r.Written.Fresh(pod); fresh != pod {
				pod = fresh // the record's copy, read only as the cache's
			}
			in.Pods = append(in.Pods, pod)
		}
	}
	evictions, err := r.evictionsOf(ctx, in.Pods)
	if err != nil {
		return in, view, err
	}
	view = responder.Observe(in.Pods, evictions, r.EvictionResponder)
	in.Pods = view.Pods
	in.Autoscalers, err = r.autoscalersOf(ctx, types.NamespacedName{Namespace: d.Namespace, Name: d.Name})
	return in, view, err
}

// autoscalersOf reads from the cache the HorizontalPodAutoscalers of the Deployment's namespace
// that target it or whose record of raised bounds names it (deploymentdecide.Input.Autoscalers). The
// cache's objects, not copies (every reconcile reads them): they are only read, and writeBounds
// patches copies.
func (r *Reconciler) autoscalersOf(ctx context.Context, key types.NamespacedName) ([]*autoscalingv2.HorizontalPodAutoscaler, error) {
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := r.Client.List(ctx, &hpas, client.InNamespace(key.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []*autoscalingv2.HorizontalPodAutoscaler
	for i := range hpas.Items {
		hpa := &hpas.Items[i]
		if slices.Contains(deploymentsOfAutoscaler(hpa), key.Name) {
			out = append(out, hpa)
		}
	}
	return out, nil
}

// deploymentsOfAutoscaler names the Deployments an autoscaler concerns: the one it targets, and
// the one its record of raised bounds names.
func deploymentsOfAutoscaler(hpa *autoscalingv2.HorizontalPodAutoscaler) []string {
	var out []string
	if ref := hpa.Spec.ScaleTargetRef; surgepolicy.Autoscales(hpa, ref.Name) {
		out = append(out, ref.Name)
	}
	if rec, err := surgepolicy.ParseBounds(hpa); err == nil && rec != nil && !slices.Contains(out, rec.Deployment) {
		out = append(out, rec.Deployment)
	}
	return out
}

// releaseAutoscalers restores the autoscalers whose bounds were raised for a surge of a
// Deployment that is gone (deploymentdecide.Decision.Autoscalers with no surge), and removes their records.
func (r *Reconciler) releaseAutoscalers(ctx context.Context, key types.NamespacedName) error {
	hpas, err := r.autoscalersOf(ctx, key)
	if err != nil || len(hpas) == 0 {
		return err
	}
	var p deploymentdecide.Decision
	p.Autoscalers(hpas, key.Name, nil)
	for _, e := range p.Events {
		log.FromContext(ctx).Info("Evacuation step", "reason", e.Reason, "note", e.Note())
	}
	return r.writeBounds(ctx, p.Restore)
}

// writeBounds writes the autoscalers' bounds and records of raised bounds, each in a merge patch
// that applies only to the autoscaler as read (its resourceVersion): someone's change since is
// a conflict, decided again on the next look. An autoscaler gone has nothing left to hold.
func (r *Reconciler) writeBounds(ctx context.Context, changes []deploymentdecide.BoundsChange) error {
	for _, c := range changes {
		hpa := c.HPA.DeepCopy()
		c.Apply(hpa)
		err := r.Client.Patch(ctx, hpa, client.MergeFromWithOptions(c.HPA, client.MergeFromWithOptimisticLock{}))
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("patching HorizontalPodAutoscaler %s: %w", c.HPA.Name, err)
		default:
			log.FromContext(ctx).Info("Set the HorizontalPodAutoscaler's bounds", "hpa", c.HPA.Name,
				"minReplicas", ptr.Deref(c.MinReplicas, 1), "maxReplicas", c.MaxReplicas, "record", hpa.Annotations[evacuation.SurgeBoundsAnnotation])
		}
	}
	return nil
}

// podWritesInFlight bounds the pod patches one reconcile has in flight at once. A Deployment's
// new requests come a node at a time, a pod or a few each, from every node the requester works
// on at once: with a pod of each of many Deployments on each node, a reconcile has tens to
// answer, and a few at a time would take several round trips to a loaded API server while the
// other Deployments wait.
const podWritesInFlight = 25

// apply carries out the plan: the pods' answers and marks first, then the autoscaler's bounds
// (raised for a surge, or restored after one), then the Deployment's replicas, surge state and
// count of pods to evacuate, in one patch. The Deployment is not scaled unless every write
// before succeeded: an autoscaler holds the surged count from before the Deployment has it until
// a later decision finds it scaled back. A pod's answer on its conditions and its mark are one
// write (evacuation.Answer); an answer on an Eviction is followed by the pod's mark.
func (r *Reconciler) apply(ctx context.Context, d *appsv1.Deployment, pods []*corev1.Pod, view responder.View, p deploymentdecide.Decision) (written bool, err error) {
	if err := r.writePods(ctx, view, p); err != nil {
		return false, err
	}
	if err := r.writeBounds(ctx, append(slices.Clone(p.Raise), p.Restore...)); err != nil {
		return false, err
	}
	orig := d.DeepCopy()
	count := map[string]*string{evacuation.DeploymentReplicasToEvacuateAnnotation: countValue(marks.ToEvacuate(pods))}
	if p.Scale != nil || p.DropSurge || !marks.CountCanWait(d.Annotations, count, p.MoreSteps) {
		marks.SetAnnotation(d, evacuation.DeploymentReplicasToEvacuateAnnotation, count[evacuation.DeploymentReplicasToEvacuateAnnotation])
	}
	p.ApplyScale(d)
	if !equality.Semantic.DeepEqual(orig.Annotations, d.Annotations) || !equality.Semantic.DeepEqual(orig.Spec, d.Spec) {
		// The replica count and the surge record are only ever changed from the spec this
		// decision saw.
		guarded := p.Scale != nil || p.DropSurge
		patch := client.MergeFrom(orig)
		if guarded {
			patch = scalePatch(orig, d)
		}
		if err := r.Client.Patch(ctx, d, patch); err != nil {
			if guarded && apierrors.IsInvalid(err) {
				// The test failed: the spec changed since the decision, as a conflict.
				err = apierrors.NewConflict(appsv1.Resource("deployments"), d.Name, err)
			}
			// The autoscaler's changes are made, and said.
			r.record(ctx, d, slices.DeleteFunc(slices.Clone(p.Events), func(e deploymentdecide.Event) bool { return !e.OfAutoscaler() }))
			return false, fmt.Errorf("patching the Deployment: %w", err)
		}
		written = true
		if p.Scale != nil {
			log.FromContext(ctx).Info("Scaled the Deployment", "from", ptr.Deref(orig.Spec.Replicas, 1), "to", p.Scale.Replicas,
				"surge", d.Annotations[evacuation.SurgeAnnotation])
		}
	}
	for _, outcome := range deploymentdecide.SurgeOutcomes(p.Events) {
		surgesTotal.WithLabelValues(outcome).Inc()
	}
	r.record(ctx, d, p.Events)
	return written, nil
}

// writePods writes the pods' answers and marks, in parallel: one patch after the other, a
// Deployment of 100 pods on a loaded API server would take seconds per step while the other
// Deployments wait their turn.
func (r *Reconciler) writePods(ctx context.Context, view responder.View, p deploymentdecide.Decision) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	costs := make(map[*corev1.Pod]map[string]*string, len(p.Mark)+len(p.Unmark))
	for _, pod := range p.Unmark {
		costs[pod] = marks.DeletionCost(pod, false)
	}
	for _, pod := range p.Mark {
		costs[pod] = marks.DeletionCost(pod, true)
	}
	var g errgroup.Group
	g.SetLimit(podWritesInFlight)
	for _, a := range p.Answers {
		cost := costs[a.Pod]
		delete(costs, a.Pod)
		g.Go(func() error {
			if err := r.answer(ctx, view, a, cost); err != nil {
				fail(err)
			}
			return nil
		})
	}
	for pod, cost := range costs {
		g.Go(func() error {
			if err := r.setDeletionCost(ctx, pod, cost); err != nil {
				fail(err)
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// record logs the plan's Events and records them on the Deployment.
func (r *Reconciler) record(ctx context.Context, d *appsv1.Deployment, events []deploymentdecide.Event) {
	for _, e := range events {
		note := e.Note()
		log.FromContext(ctx).Info("Evacuation step", "reason", e.Reason, "note", note)
		var regarding runtime.Object = d
		if e.Series() {
			regarding = &corev1.ObjectReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment",
				Namespace: d.Namespace, Name: d.Name, UID: d.UID}
		}
		r.Recorder.Eventf(regarding, nil, e.Type(), string(e.Reason), e.Action(), "%s", note)
	}
}

// scalePatch is a JSON patch of the Deployment from orig to d, its spec.replicas and its
// annotations, that applies only to the spec the decision saw: it first tests that
// metadata.generation is still orig's, which any change of the spec (someone's scale, a new
// template) moves, and the Deployment controller's status reports do not. A resourceVersion
// lock fails on those reports too, and they come with every replacement that becomes ready, so
// that many scale patches of a large drain would meet a conflict and wait for the next look. A failed test is refused with 422, which apply reports as a conflict.
func scalePatch(orig, d *appsv1.Deployment) client.Patch {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	ops := []op{{Op: "test", Path: "/metadata/generation", Value: orig.Generation}}
	if !equality.Semantic.DeepEqual(orig.Spec.Replicas, d.Spec.Replicas) {
		ops = append(ops, op{Op: "replace", Path: "/spec/replicas", Value: ptr.Deref(d.Spec.Replicas, 1)})
	}
	switch {
	case len(orig.Annotations) == 0 && len(d.Annotations) > 0:
		ops = append(ops, op{Op: "add", Path: "/metadata/annotations", Value: d.Annotations})
	default:
		for _, key := range slices.Sorted(maps.Keys(orig.Annotations)) {
			if _, kept := d.Annotations[key]; !kept {
				ops = append(ops, op{Op: "remove", Path: "/metadata/annotations/" + jsonPointerEscape(key)})
			}
		}
		for _, key := range slices.Sorted(maps.Keys(d.Annotations)) {
			if was, had := orig.Annotations[key]; !had || was != d.Annotations[key] {
				ops = append(ops, op{Op: "add", Path: "/metadata/annotations/" + jsonPointerEscape(key), Value: d.Annotations[key]})
			}
		}
	}
	data, err := json.Marshal(ops)
	if err != nil {
		panic(err) // strings and numbers only
	}
	return client.RawPatch(types.JSONPatchType, data)
}

// jsonPointerEscape escapes a map key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// answer writes one answer and, when cost is not nil, the pod's deletion cost annotations. The
// answer goes back the way the request came: on the pod's conditions, where the cost goes in the
// same write; or on its Eviction, where an acceptance with the cost is that one write of the pod
// (AcceptMarking: the Eviction hears from the responder at its first heartbeat), and a decline
// or an acceptance without it is a write of the Eviction, followed by the cost on the pod. A
// request that went away leaves an answer only on the conditions.
func (r *Reconciler) answer(ctx context.Context, view responder.View, a deploymentdecide.Answer, cost map[string]*string) error {
	before := a.Pod.ResourceVersion
	req := view.Request(a.Pod)
	if req == nil {
		req = evacuation.ForPod(a.Pod)
	}
	latency, first := answerLatency(a.Pod, r.Clock.Now())
	var err error
	onEviction := req != nil && req.Protocol() != evacuation.PodConditions && a.Status != ""
	switch {
	case onEviction && a.Status == corev1.ConditionTrue:
		err = req.AcceptMarking(ctx, r.evictionClient(), evacuation.Progress{Reason: a.Reason, Message: a.Message()}, cost)
		cost = nil
	case onEviction:
		err = req.Decline(ctx, r.evictionClient(), a.Reason, a.Message())
	case a.Status != "" && req != nil:
		err = evacuation.Answer(ctx, r.Client, a.Pod, &corev1.PodCondition{Type: evacuation.Initiated,
			Status: a.Status, Reason: a.Reason, Message: a.Message()}, cost)
	default:
		err = evacuation.Answer(ctx, r.Client, a.Pod, nil, cost)
	}
	if err == nil {
		r.wrote(before, a.Pod)
	}
	// Invalid: an Eviction's responder that is no longer Active may not write (the Eviction
	// moved on after the cache was read; its event brings the next look). Stale: the pod is
	// gone or another has its name (the answer carries the pod's UID).
	switch {
	case err != nil && !evacuation.Stale(err) && !apierrors.IsInvalid(err):
		return fmt.Errorf("answering for pod %s: %w", a.Pod.Name, err)
	case err == nil && first && a.Status != "":
		observeAnswer(a.Status, latency)
	}
	if onEviction && cost != nil && err == nil {
		return r.setDeletionCost(ctx, a.Pod, cost)
	}
	return nil
}

// setDeletionCost writes the pod's deletion cost annotations (deploymentdecide.DeletionCost) with a pod
// patch, to that pod only (its UID): a pod gone, or another under its name, is a stale read,
// dropped (its event brings the next look).
func (r *Reconciler) setDeletionCost(ctx context.Context, pod *corev1.Pod, cost map[string]*string) error {
	before := pod.ResourceVersion
	err := r.Client.Patch(ctx, pod, evacuation.AnnotationsPatch(pod.UID, cost))
	if err == nil {
		r.wrote(before, pod)
	}
	if err != nil && !evacuation.Stale(err) {
		return fmt.Errorf("setting the deletion cost of pod %s: %w", pod.Name, err)
	}
	return nil
}

// wrote records a write of the pod, as the API server returned it, until the cache shows it.
func (r *Reconciler) wrote(before string, pod *corev1.Pod) {
	if r.Written == nil {
		return
	}
	r.Written.Wrote(before, pod.DeepCopy())
}

// syncMarkers keeps the ReplicaSets' markers (deploymentdecide.Markers). While the evacuation has more steps
// and the Deployment was not written (deploymentWritten), a count whose value alone changed
// waits for the next step (deploymentdecide.CountCanWait).
func (r *Reconciler) syncMarkers(ctx context.Context, d *appsv1.Deployment, in deploymentdecide.Input, ready, moreSteps, deploymentWritten bool) error {
	var errs []error
	for _, rs := range in.ReplicaSets {
		orig := rs.DeepCopy()
		want := marks.Markers(rs, in.Pods, ready, d.Annotations, moreSteps)
		if marks.CountCanWait(rs.Annotations, want, moreSteps && !deploymentWritten) {
			continue
		}
		for key, value := range want {
			marks.SetAnnotation(rs, key, value)
		}
		if equality.Semantic.DeepEqual(orig.Annotations, rs.Annotations) {
			continue
		}
		if err := r.Client.Patch(ctx, rs, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("patching ReplicaSet %s: %w", rs.Name, err))
		}
	}
	return errors.Join(errs...)
}

func countValue(n int) *string {
	if n == 0 {
		return nil
	}
	return ptr.To(strconv.Itoa(n))
}

// SetupWithManager registers the responder and its cache indexes. A Deployment is reconciled
// when it changes, when its ReplicaSets change, when the evacuation conditions or marks of its
// pods change, and when an autoscaler that targets it or holds bounds raised for it changes.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr manager.Manager, concurrency int) error {
	registerMetrics()
	byController := func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, controllerOwnerIndex, byController); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &appsv1.ReplicaSet{}, controllerOwnerIndex, byController); err != nil {
		return err
	}
	c := mgr.GetClient()
	b := builder.ControllerManagedBy(mgr)
	if r.EvictionResponder != "" {
		r.evictionWrites = ownwrites.New[*lifecyclev1alpha1.Eviction](nil)
		if err := mgr.GetFieldIndexer().IndexField(ctx, &lifecyclev1alpha1.Eviction{}, evictionTargetIndex, evictionTarget); err != nil {
			return err
		}
		b = b.Watches(&lifecyclev1alpha1.Eviction{}, handler.EnqueueRequestsFromMapFunc(podOfEviction(c)),
			builder.WithPredicates(evictionChanged(r.EvictionResponder)))
	}
	return b.
		Named("deployment-evacuation").
		For(&appsv1.Deployment{}, builder.WithPredicates(deploymentChanged())).
		Owns(&appsv1.ReplicaSet{}, builder.WithPredicates(replicaSetChanged())).
		Watches(&autoscalingv2.HorizontalPodAutoscaler{},
			handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				var out []reconcile.Request
				for _, name := range deploymentsOfAutoscaler(o.(*autoscalingv2.HorizontalPodAutoscaler)) {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
				}
				return out
			}),
			builder.WithPredicates(autoscalerChanged())).
		Watches(&corev1.Pod{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				pod := o.(*corev1.Pod)
				return deploymentOfPod(ctx, c, pod, !involved(pod))
			}),
			builder.WithPredicates(podEvacuationChanged())).
		WithOptions(fairqueue.Options(concurrency)).
		Complete(r)
}

// deploymentOfPod maps a pod to the Deployment of its ReplicaSet; with onlySurging, only when a
// surge is in progress (its replacements' readiness completes it).
func deploymentOfPod(ctx context.Context, c client.Reader, pod *corev1.Pod, onlySurging bool) []reconcile.Request {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" || !strings.HasPrefix(ref.APIVersion, appsv1.GroupName+"/") {
		return nil
	}
	rs := &appsv1.ReplicaSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, rs); err != nil {
		return nil
	}
	ref = metav1.GetControllerOf(rs)
	if ref == nil || ref.Kind != "Deployment" || !strings.HasPrefix(ref.APIVersion, appsv1.GroupName+"/") {
		return nil
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}
	if onlySurging {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			return nil
		}
		if _, surging := d.Annotations[evacuation.SurgeAnnotation]; !surging {
			return nil
		}
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// involved reports whether the responder looks at the pod's own changes: it has an evacuation
// request, an answer or a mark.
func involved(pod *corev1.Pod) bool {
	return evacuation.Condition(pod, evacuation.Request) != nil || evacuation.Condition(pod, evacuation.Initiated) != nil || marks.IsMarked(pod)
}

// podEvacuationChanged passes the events of pods the responder has to look at: with an
// evacuation request, an answer or a mark, when one of those or the pod's deletion changes; and
// any pod's readiness, which completes a surge, or trouble (deploymentdecide.InTrouble: unschedulable,
// failing to start), which shortens its patience to the surge timeout (deploymentOfPod passes
// those of surging Deployments only). A replacement seen before the scheduler marked it
// unschedulable would otherwise wait for the Deployment's progress deadline, or the next
// heartbeat, before the surge gives up.
func podEvacuationChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return involved(e.Object.(*corev1.Pod)) },
		DeleteFunc: func(e event.DeleteEvent) bool { return involved(e.Object.(*corev1.Pod)) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			if !involved(o) && !involved(n) {
				return podutils.IsPodReady(o) != podutils.IsPodReady(n) || deploymentdecide.InTrouble(o) != deploymentdecide.InTrouble(n)
			}
			return !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
				marks.IsMarked(o) != marks.IsMarked(n) ||
				!equality.Semantic.DeepEqual(evacuation.Condition(o, evacuation.Request), evacuation.Condition(n, evacuation.Request)) ||
				!equality.Semantic.DeepEqual(evacuation.Condition(o, evacuation.Initiated), evacuation.Condition(n, evacuation.Initiated))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// deploymentChanged passes the Deployment events that matter: a spec change, and any change
// while pods of the Deployment are to be evacuated (its status says when its controller saw a
// scale), not the status reports of every other Deployment of the cluster.
func deploymentChanged() predicate.Predicate {
	evacuating := func(d *appsv1.Deployment) bool {
		_, surging := d.Annotations[evacuation.SurgeAnnotation]
		_, requested := d.Annotations[evacuation.DeploymentReplicasToEvacuateAnnotation]
		return surging || requested
	}
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*appsv1.Deployment), e.ObjectNew.(*appsv1.Deployment)
		return o.Generation != n.Generation || evacuating(o) || evacuating(n) ||
			!equality.Semantic.DeepEqual(o.Annotations, n.Annotations)
	}}
}

// autoscalerChanged passes the HorizontalPodAutoscaler events that matter to the Deployments it
// concerns: its target, its bounds or its record of raised bounds changed; its status reports
// only while it carries a record of restored bounds, which goes once a report shows it settled.
func autoscalerChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*autoscalingv2.HorizontalPodAutoscaler), e.ObjectNew.(*autoscalingv2.HorizontalPodAutoscaler)
		if o.Spec.ScaleTargetRef != n.Spec.ScaleTargetRef || !equality.Semantic.DeepEqual(o.Spec.MinReplicas, n.Spec.MinReplicas) ||
			o.Spec.MaxReplicas != n.Spec.MaxReplicas ||
			o.Annotations[evacuation.SurgeBoundsAnnotation] != n.Annotations[evacuation.SurgeBoundsAnnotation] {
			return true
		}
		rec, err := surgepolicy.ParseBounds(n)
		return err == nil && rec != nil && rec.Restored != nil &&
			(!equality.Semantic.DeepEqual(o.Status.ObservedGeneration, n.Status.ObservedGeneration) || o.Status.CurrentReplicas != n.Status.CurrentReplicas)
	}}
}

// replicaSetChanged passes ReplicaSet events that change what the responder sees: not their
// status reports, which reach it through the Deployment's status.
func replicaSetChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*appsv1.ReplicaSet), e.ObjectNew.(*appsv1.ReplicaSet)
		return !equality.Semantic.DeepEqual(o.Annotations, n.Annotations) ||
			!equality.Semantic.DeepEqual(o.Spec.Replicas, n.Spec.Replicas) ||
			(o.Status.Replicas == 0) != (n.Status.Replicas == 0)
	}}
}
