// Package eviction is nodemaint's out-of-tree implementation of KEP-4563's
// evictionrequest-controller and of its imperative-eviction.k8s.io/evictor responder, for
// clusters that serve lifecycle.k8s.io/v1alpha1 but whose kube-controller-manager does not run the
// controller (Kubernetes 1.37 does not have it). It observes one target pod, decides with
// internal/controller/eviction/evictiondecide and applies.
package eviction

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/evictionbacklog"
	"github.com/nodemaint/nodemaint/internal/evictor"
	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictionrequests,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictionrequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=lifecycle.k8s.io,resources=evictions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch

// targetIndex indexes EvictionRequests and Evictions by their target pod's "namespace/name".
const targetIndex = "evictioncontroller.target"

// foreignIndex indexes the Evictions this controller did not create (evictiondecide.Ours) under
// "true": where it looks for another Eviction controller answering in the cluster (Yield).
const foreignIndex = "evictioncontroller.foreign"

// clockSkew is how much older than this controller's start an unmarked Eviction may be and still
// tell that another controller answers: one created earlier may have been left by an earlier
// nodemaint (which did not mark its Evictions), and is only read.
const clockSkew = time.Minute

// waitingPriority is the queue priority of a look at a pod that a request names and no Eviction
// does yet (waits): until its Eviction is created, no responder is Active and the pod's response
// timeout runs. Every other look (the changes of pods and Evictions already answered, which in a
// large drain are most of them, and the requeues) has the default priority, or controller-runtime's
// low one for the initial list: the waiting pods are looked at first, each once at this priority
// (its look creates the Eviction), so they cannot starve the others.
const waitingPriority = 100

// Reconciler reconciles one target pod (its namespace and name) of EvictionRequests.
type Reconciler struct {
	Client client.Client
	// APIReader reads from the API server, not the cache: a pod the cache does not show is
	// read again there before its requests learn that it is gone (a pod just created may not be
	// in the cache yet). Nil: the cache's word is taken.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Refusals remembers the imperative evictor's refused evictions, to back off per pod;
	// shared with the node controller's drain, which evicts through the same evictor.
	Refusals *evictor.Refusals
	// Clock tells the time (setup.Controllers gives every controller one).
	Clock clock.PassiveClock
	// Protected, when set, says why a pod must never be evicted by nodemaint ("" for others):
	// nodemaint-controller's own pods. The imperative evictor passes them on.
	Protected func(*corev1.Pod) string
	// Name names this controller: it marks every Eviction it creates with it
	// (evictionrequest.ControllerLabel), and writes to and deletes only the Evictions so marked.
	Name string
	// Yield (--eviction-controller=auto): while another Eviction controller answers in the
	// cluster (answering), this one creates no Eviction; it carries its own to their end.
	Yield bool
	// Backlog is told of each request's creation and of each look at its target, so that the
	// drain in this process creates its requests as fast as this controller looks at them;
	// nil: none.
	Backlog *evictionbacklog.Backlog

	// since is when this controller started reconciling (once leader): unmarked Evictions
	// created later are another controller's (answering).
	since     time.Time
	startOnce sync.Once
	// yielding is the other controller this one last stood aside for ("": none), to report a
	// change once.
	yielding atomic.Value
	// inTreeSeen is what last showed the in-tree Eviction controller answering ("": none), to
	// report a change once (intree.go).
	inTreeSeen atomic.Value

	// evicted are the pods the imperative evictor evicted (namespace/name: UID) until the cache
	// shows their deletion, so that a reconcile in between does not evict them again.
	evicted sync.Map
	// collected are the Evictions deleted (namespace/name of their target: their UIDs) until the
	// cache drops them, so that a reconcile in between does not delete them again.
	collected sync.Map
	// ended is when the controller first saw each target it has an Eviction of terminal or gone
	// (namespace/name: map of UID to time), the start of its active responder's grace
	// (evictiondecide.GracefulCompletionDelay); memory only, as upstream's: after a restart the grace
	// starts again.
	ended sync.Map
	// gauges reports upstream's gauges of this controller's Evictions once it reconciles.
	gauges *gaugesSource
}

// Reconcile observes the target pod, its EvictionRequests and Evictions, decides and applies.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx)
	r.startOnce.Do(func() {
		r.since = r.Clock.Now()
		if r.gauges != nil {
			r.gauges.leading.Store(true)
		}
	})
	// Looked at, whatever comes of it: the drain's next request may come.
	defer r.Backlog.Done(req.NamespacedName)
	obs, err := r.observe(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(obs.Requests) == 0 && len(obs.Evictions) == 0 {
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()
	d := evictiondecide.Decide(obs, now)
	if d.StandAside != "" {
		log.V(1).Info("standing aside", "reason", d.StandAside)
	}
	requeue, created, err := r.apply(ctx, obs, d)
	if err != nil {
		return reconcile.Result{}, err
	}
	if created != nil {
		// The Eviction's status is a subresource, empty at its creation: it is decided and
		// written now, from the Eviction as the API server returned it, rather than once the
		// cache shows it (a look 100ms later at best, behind every other pod's event in a large
		// drain): until then no responder is Active, and the pod's response timeout runs.
		obs.Evictions = append(obs.Evictions, *created)
		if err := r.budgets(ctx, &obs); err != nil {
			return reconcile.Result{}, err
		}
		d = evictiondecide.Decide(obs, now)
		if requeue, _, err = r.apply(ctx, obs, d); err != nil {
			return reconcile.Result{}, err
		}
	}
	// A requeue keeps the waiting priority only while the pod still waits (its Eviction's name
	// taken, or standing aside): the look that queued it at that priority is done.
	priority := ptr.To(0)
	if created == nil && len(obs.Evictions) == 0 && len(obs.Requests) > 0 {
		priority = ptr.To(waitingPriority)
	}
	if requeue {
		// A write met a stale cache, or the evictor acted: look again once the cache caught up.
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond, Priority: priority}, nil
	}
	if d.RecheckAfter > 0 {
		// With the state of the pod's budgets the decision was made with: a test (or a person
		// reading the log) can tell that a refused pod was looked at since its budgets changed.
		log.V(1).Info("looking again", "after", d.RecheckAfter, "budgets", evictiondecide.BudgetsVersion(obs.Budgets))
	}
	return reconcile.Result{RequeueAfter: d.RecheckAfter, Priority: priority}, nil
}

func (r *Reconciler) observe(ctx context.Context, target types.NamespacedName) (evictiondecide.Observation, error) {
	// The API server enforces the KEP's heartbeat deadline: it refuses to interrupt a responder
	// earlier, so the deadline is not configurable.
	obs := evictiondecide.Observation{Namespace: target.Namespace, Name: target.Name, HeartbeatDeadline: evictionrequest.HeartbeatDeadline, Controller: r.Name}
	if r.Yield {
		var err error
		// kube-controller-manager's own controller first (intree.go): nothing is written while
		// it answers; else another that answers, for which no Eviction is created.
		if obs.InTree, err = r.inTree(ctx); err != nil {
			return obs, err
		}
		obs.InTreeGrace = evictiondecide.InTreeGrace
		if obs.InTree == "" {
			if obs.Yield, err = r.answering(ctx); err != nil {
				return obs, err
			}
		}
		standingAside.Set(gauge(obs.InTree != "" || obs.Yield != ""))
	}
	var err error
	if obs.Pod, err = r.pod(ctx, r.Client, target); err != nil {
		return obs, err
	}
	var reqs lifecyclev1alpha1.EvictionRequestList
	if err := r.Client.List(ctx, &reqs, client.InNamespace(target.Namespace), client.MatchingFields{targetIndex: target.String()}); err != nil {
		return obs, err
	}
	obs.Requests = reqs.Items
	var evs lifecyclev1alpha1.EvictionList
	if err := r.Client.List(ctx, &evs, client.InNamespace(target.Namespace), client.MatchingFields{targetIndex: target.String()}); err != nil {
		return obs, err
	}
	obs.Evictions = evs.Items
	if obs.Pod == nil && len(obs.Requests) > 0 && r.APIReader != nil && !r.sawPod(obs) {
		// Gone, or only not in the cache yet: the API server says. Not for a pod this
		// controller made an Eviction of: it read the pod from the cache then, and the cache
		// drops a pod only once it is deleted (a read per look at each deleted pod whose
		// requests and Eviction wait for the garbage collector).
		if obs.Pod, err = r.pod(ctx, r.APIReader, target); err != nil {
			return obs, err
		}
	}
	if v, ok := r.collected.Load(target); ok {
		var still []types.UID
		for _, uid := range v.([]types.UID) {
			if slices.ContainsFunc(obs.Evictions, func(e lifecyclev1alpha1.Eviction) bool { return e.UID == uid }) {
				still = append(still, uid)
			}
		}
		if len(still) == 0 {
			r.collected.Delete(target)
		} else {
			r.collected.Store(target, still)
		}
	}
	if obs.Pod != nil && r.Protected != nil {
		obs.Protected = r.Protected(obs.Pod)
	}
	obs.EndedAt = r.endedAt(target, obs)
	if uid, ok := r.evicted.Load(target); ok {
		// Until the pod is gone: its imperative evictor says it evicted the pod (and does not
		// evict it again while the cache does not show its deletion yet).
		if obs.Pod != nil && obs.Pod.UID == uid {
			obs.Evicted = true
		} else {
			r.evicted.Delete(target)
		}
	}
	if obs.Pod != nil && r.Refusals != nil {
		if refusal, ok := r.Refusals.Of([]drain.Classified{{Pod: obs.Pod}})[obs.Pod.UID]; ok {
			obs.EvictNotBefore, obs.EvictMessage, obs.EvictBudgets = refusal.NotBefore, refusal.Message, refusal.Budgets
			obs.EvictAttempts = refusal.Attempts
			obs.EvictBudgetRefused = refusal.Reason == nodemaintv1alpha1.BlockedReasonPodDisruptionBudget
		}
	}
	return obs, r.budgets(ctx, &obs)
}

// endedAt records when the controller first saw each target its own Evictions name terminal or
// gone, and returns those times; targets no longer named are forgotten.
func (r *Reconciler) endedAt(target types.NamespacedName, obs evictiondecide.Observation) map[types.UID]time.Time {
	was, _ := r.ended.Load(target)
	had, _ := was.(map[types.UID]time.Time)
	out := map[types.UID]time.Time{}
	for i := range obs.Evictions {
		e := &obs.Evictions[i]
		if !evictiondecide.Ours(e, r.Name) || e.Spec.Target.Pod == nil {
			continue
		}
		uid := e.Spec.Target.Pod.UID
		if obs.Pod != nil && obs.Pod.UID == uid && obs.Pod.Status.Phase != corev1.PodSucceeded && obs.Pod.Status.Phase != corev1.PodFailed {
			continue
		}
		if t, ok := had[uid]; ok {
			out[uid] = t
		} else if _, ok := out[uid]; !ok {
			out[uid] = r.Clock.Now()
		}
	}
	if len(out) == 0 {
		r.ended.Delete(target)
		return nil
	}
	r.ended.Store(target, out)
	return out
}

// budgets reads the PodDisruptionBudgets of the target pod into the observation: they pace the
// imperative evictor's retries, so they are read only while an Eviction exists.
func (r *Reconciler) budgets(ctx context.Context, obs *evictiondecide.Observation) error {
	if obs.Pod == nil || len(obs.Evictions) == 0 || obs.Budgets != nil {
		return nil
	}
	// Read only (evictiondecide.Decide does not change its observation): the cache's objects, not
	// copies. Every look at a pod under way read its namespace's budgets, a hundred in scenario L,
	// and deep copies of them were 6% of the controller's CPU late in that drain.
	var pdbs policyv1.PodDisruptionBudgetList
	if err := r.Client.List(ctx, &pdbs, client.InNamespace(obs.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	obs.Budgets = evictiondecide.SelectBudgets(obs.Pod, pdbs.Items)
	return nil
}

// sawPod reports whether one of the controller's own Evictions names a pod a request of the
// observation targets: the controller created it from that pod as its cache showed it.
func (r *Reconciler) sawPod(obs evictiondecide.Observation) bool {
	for i := range obs.Evictions {
		e := &obs.Evictions[i]
		if !evictiondecide.Ours(e, r.Name) || e.Spec.Target.Pod == nil {
			continue
		}
		for _, req := range obs.Requests {
			if req.Spec.Target.Pod != nil && req.Spec.Target.Pod.UID == e.Spec.Target.Pod.UID {
				return true
			}
		}
	}
	return false
}

// pod reads the target pod through reader; nil when it does not exist.
func (r *Reconciler) pod(ctx context.Context, reader client.Reader, target types.NamespacedName) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	switch err := reader.Get(ctx, target, pod); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return pod, nil
}

// answering names another Eviction controller that answers in the cluster, from one of its
// Evictions in the cache: one marked with another controller's name, or an unmarked one created
// since this controller started (less clockSkew); "" when none. It reports a change once.
func (r *Reconciler) answering(ctx context.Context) (string, error) {
	var evs lifecyclev1alpha1.EvictionList
	// Read only: the cache's objects, not copies.
	if err := r.Client.List(ctx, &evs, client.MatchingFields{foreignIndex: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return "", err
	}
	other := ""
	for i := range evs.Items {
		e := &evs.Items[i]
		name, marked := e.Labels[evictionrequest.ControllerLabel]
		if marked || e.CreationTimestamp.After(r.since.Add(-clockSkew)) {
			other = evictiondecide.YieldMessage(name, marked, e.Namespace, e.Name)
			break
		}
	}
	if was, _ := r.yielding.Swap(other).(string); (was == "") != (other == "") {
		log := logf.FromContext(ctx)
		if other != "" {
			log.Info("another Eviction controller answers: this one creates no Eviction and carries its own to their end", "other", other)
		} else {
			log.Info("no other Eviction controller answers any more: this one creates Evictions again")
		}
	}
	return other, nil
}

// apply carries the decision out: the Eviction's creation, metadata and status (the active
// responder waits for it), then the request conditions, then the imperative evictor's eviction,
// then the collection of finished Evictions. It reports whether to look again shortly (a stale
// write, or an eviction made), and the Eviction it created, as the API server returned it.
func (r *Reconciler) apply(ctx context.Context, obs evictiondecide.Observation, d evictiondecide.Decision) (bool, *lifecyclev1alpha1.Eviction, error) {
	var out outcome
	evByName := map[string]*lifecyclev1alpha1.Eviction{}
	for i := range obs.Evictions {
		evByName[obs.Evictions[i].Name] = &obs.Evictions[i]
	}
	created := r.create(ctx, d.Create, &out)
	written := r.writeEvictions(ctx, d, evByName, &out)
	r.writeRequests(ctx, obs, d.RequestStatus, &out)
	r.recordProgress(ctx, d.Events, evByName, written)
	if d.Evict != nil && obs.Pod != nil && len(out.errs) == 0 {
		// Evicted, gone, or refused anew: the next decision reads the outcome.
		r.evict(ctx, obs, d.Evict)
		out.again = true
	}
	r.collect(ctx, obs, d.Delete, &out)
	return out.again, created, errors.Join(out.errs...)
}

// outcome is what apply's writes add up to: whether to look again shortly, and the errors the
// work queue retries.
type outcome struct {
	again bool
	errs  []error
}

// note files the result of one write: a conflict, an object gone or a name taken is a stale
// write, looked at again shortly; any other error is retried.
func (o *outcome) note(err error) {
	switch {
	case err == nil:
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err):
		o.again = true
	default:
		o.errs = append(o.errs, err)
	}
}

// create creates the Eviction the decision makes (nil: none) and returns it as the API server
// returned it, nil when it was not created.
func (r *Reconciler) create(ctx context.Context, ev *lifecyclev1alpha1.Eviction, out *outcome) *lifecyclev1alpha1.Eviction {
	if ev == nil {
		return nil
	}
	log := logf.FromContext(ctx)
	err := r.Client.Create(ctx, ev)
	out.note(err)
	switch {
	case err == nil:
		log.Info("created the Eviction", "eviction", ev.Name)
		r.record(ev, nil, evictiondecide.CreatedEvent(ev))
		return ev
	case apierrors.IsAlreadyExists(err):
		// Taken by another controller's Eviction (or one of its own the cache does not
		// show yet): the next decision reads it, and stands aside if it is another's.
		log.Info("the Eviction's name is taken; looking again", "eviction", ev.Name)
	}
	return nil
}

// writeEvictions patches the Evictions' metadata, then their status, each over what was
// observed (evByName), and returns the Evictions whose status was written.
func (r *Reconciler) writeEvictions(ctx context.Context, d evictiondecide.Decision, evByName map[string]*lifecyclev1alpha1.Eviction, out *outcome) map[string]bool {
	for _, want := range d.Meta {
		out.note(r.Client.Patch(ctx, want, client.MergeFromWithOptions(evByName[want.Name], client.MergeFromWithOptimisticLock{})))
	}
	written := map[string]bool{}
	for _, want := range d.Status {
		err := r.Client.Status().Patch(ctx, want, client.MergeFromWithOptions(evByName[want.Name], client.MergeFromWithOptimisticLock{}))
		written[want.Name] = err == nil
		out.note(err)
	}
	return written
}

// writeRequests patches the EvictionRequests' status (their conditions) over what was observed.
func (r *Reconciler) writeRequests(ctx context.Context, obs evictiondecide.Observation, status []*lifecyclev1alpha1.EvictionRequest, out *outcome) {
	byName := map[string]*lifecyclev1alpha1.EvictionRequest{}
	for i := range obs.Requests {
		byName[obs.Requests[i].Name] = &obs.Requests[i]
	}
	for _, want := range status {
		out.note(r.Client.Status().Patch(ctx, want, client.MergeFromWithOptions(byName[want.Name], client.MergeFromWithOptimisticLock{})))
	}
}

// recordProgress records the Events of the steps taken. The steps the Events report are the
// status written: an Eviction whose status write failed (a conflict, the API server overloaded)
// took none of them, and the next decision reports them again when they are written.
func (r *Reconciler) recordProgress(ctx context.Context, events []evictiondecide.Event, evByName map[string]*lifecyclev1alpha1.Eviction, written map[string]bool) {
	log := logf.FromContext(ctx)
	for _, e := range events {
		ev := evByName[e.Eviction]
		if ev == nil || !written[e.Eviction] {
			continue
		}
		log.Info("eviction progress", "eviction", e.Eviction, "reason", e.Reason, "message", e.Note())
		r.record(ev, nil, e)
	}
}

// collect deletes the finished Evictions the decision collects, each once: those this replica
// deleted (or found gone) are remembered per target, as the cache may show them a while longer.
func (r *Reconciler) collect(ctx context.Context, obs evictiondecide.Observation, evictions []*lifecyclev1alpha1.Eviction, out *outcome) {
	target := types.NamespacedName{Namespace: obs.Namespace, Name: obs.Name}
	var collected []types.UID
	if v, ok := r.collected.Load(target); ok {
		collected = v.([]types.UID)
	}
	for _, e := range evictions {
		if slices.Contains(collected, e.UID) {
			continue
		}
		err := r.Client.Delete(ctx, e, client.Preconditions{UID: &e.UID})
		if err == nil {
			logf.FromContext(ctx).Info("collected the Eviction", "eviction", e.Name)
		}
		if err == nil || apierrors.IsNotFound(err) {
			collected = append(collected, e.UID)
			r.collected.Store(target, collected)
		}
		out.note(client.IgnoreNotFound(err))
	}
}

// evict is the imperative evictor: an eviction of the pod through the API (with its
// PodDisruptionBudgets), with the pod's UID as precondition. A refusal backs off exponentially
// (Refusals), recorded with the state of the pod's budgets as observed, so that a change of
// theirs brings the retry forward; the next decision writes it into the responder's message.
func (r *Reconciler) evict(ctx context.Context, obs evictiondecide.Observation, ev *lifecyclev1alpha1.Eviction) {
	log := logf.FromContext(ctx)
	pod := obs.Pod
	budgets := evictiondecide.BudgetsVersion(obs.Budgets)
	// The pod's own grace period: the imperative evictor evicts only for other requesters (a pod
	// only nodemaint's drain asks for is held for the drain, which evicts it with its
	// maintenances' grace period), and KEP-4563's requests carry none.
	res := (&evictor.Evictor{Client: r.Client, Refusals: r.Refusals}).Evict(ctx, pod, nil, r.Clock.Now(), budgets)
	switch res.Outcome {
	case evictor.Evicted:
		r.evicted.Store(client.ObjectKeyFromObject(pod), pod.UID)
		log.Info("imperative evictor evicted the pod", "pod", pod.Name, "eviction", ev.Name)
		r.record(ev, pod, evictiondecide.EvictedEvent(ev, pod.Name))
	case evictor.Refused, evictor.Failed:
		log.Info("imperative evictor's eviction refused", "pod", pod.Name, "retryAfter", res.Wait, "budgets", budgets, "reason", res.Message)
	}
}

// record records the Event on the Eviction ev, related to the object related (nil: none), in
// the words of internal/controller/eviction/evictiondecide, when it is one worth recording (evictiondecide.Event.Recorded).
func (r *Reconciler) record(ev *lifecyclev1alpha1.Eviction, related runtime.Object, e evictiondecide.Event) {
	if !e.Recorded() {
		return
	}
	r.Recorder.Eventf(ev, related, e.Type(), string(e.Reason), e.Action(), "%s", e.Note())
}

// SetupWithManager registers the controller; the cluster must serve lifecycle.k8s.io/v1alpha1.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr manager.Manager, concurrency int) error {
	if r.Refusals == nil {
		r.Refusals = evictor.NewRefusals(time.Second, 15*time.Minute)
	}
	if err := IndexTargets(ctx, mgr); err != nil {
		return err
	}
	registerUpstreamMetrics()
	r.gauges = upstreamGauges.add(mgr.GetCache(), r.Name)
	if r.Yield {
		registerMetrics()
		if err := indexInTree(ctx, mgr); err != nil {
			return err
		}
		if err := mgr.GetFieldIndexer().IndexField(ctx, &lifecyclev1alpha1.Eviction{}, foreignIndex, func(o client.Object) []string {
			if !evictiondecide.Ours(o.(*lifecyclev1alpha1.Eviction), r.Name) {
				return []string{"true"}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("indexing the Evictions of other controllers: %w", err)
		}
	}
	c := mgr.GetClient()
	return builder.ControllerManagedBy(mgr).
		Named("eviction").
		Watches(&lifecyclev1alpha1.EvictionRequest{}, enqueue(c, requestTarget, r.Backlog.Arrived)).
		Watches(&lifecyclev1alpha1.Eviction{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if p := o.(*lifecyclev1alpha1.Eviction).Spec.Target.Pod; p != nil {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: p.Name}}}
			}
			return nil
		}), builder.WithPredicates(r.evictionDecides())).
		// A pod's changes matter only while a request names it.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
			var reqs lifecyclev1alpha1.EvictionRequestList
			if err := c.List(ctx, &reqs, client.InNamespace(key.Namespace), client.MatchingFields{targetIndex: key.String()}); err != nil || len(reqs.Items) == 0 {
				return nil
			}
			return []reconcile.Request{{NamespacedName: key}}
		}), builder.WithPredicates(podDecides())).
		// A budget's status change (a disruption allowed again) brings forward the retries of the
		// evictions it refused.
		Watches(&policyv1.PodDisruptionBudget{}, handler.EnqueueRequestsFromMapFunc(r.refusedBy)).
		// controller-runtime's priority queue (its default, said here since nodemaint's other
		// controllers use fairqueue's first-in, first-out one): a pod waiting for its Eviction
		// goes first (enqueue).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, UsePriorityQueue: ptr.To(true)}).
		Complete(r)
}

// enqueue queues the target pods fn maps an EvictionRequest's event to, those that wait for their
// Eviction (waits) at waitingPriority, ahead of every look at a pod already answered: in a large
// drain those (the answered pods' deletions, readiness changes, their Evictions' progress) kept a
// new request's pod waiting seconds for its Eviction, while its response timeout ran.
// A creation's targets are also told to created (the Backlog's Arrived), before they are queued.
func enqueue(c client.Reader, fn handler.MapFunc, created func(types.NamespacedName)) handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], creation bool, objs ...client.Object) {
		seen := map[reconcile.Request]bool{}
		for _, o := range objs {
			for _, req := range fn(ctx, o) {
				if seen[req] {
					continue
				}
				seen[req] = true
				if creation {
					created(req.NamespacedName)
				}
				pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
				if !ok || !waits(ctx, c, req.NamespacedName) {
					// The default priority (controller-runtime's low one in the initial list).
					q.Add(req)
					continue
				}
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(waitingPriority)}, req)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, true, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, false, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, false, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, false, e.Object)
		},
	}
}

// waits reports whether an EvictionRequest names the target pod and no Eviction does, in the
// cache (read only: its objects, not copies).
func waits(ctx context.Context, c client.Reader, target types.NamespacedName) bool {
	var evs lifecyclev1alpha1.EvictionList
	if err := c.List(ctx, &evs, client.InNamespace(target.Namespace), client.MatchingFields{targetIndex: target.String()}, client.UnsafeDisableDeepCopy); err != nil || len(evs.Items) > 0 {
		return false
	}
	var reqs lifecyclev1alpha1.EvictionRequestList
	if err := c.List(ctx, &reqs, client.InNamespace(target.Namespace), client.MatchingFields{targetIndex: target.String()}, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	return len(reqs.Items) > 0
}

// evictionDecides passes the Eviction events that can change a decision: all but the updates
// that only move responders' heartbeats, messages and expected completions. Those come from
// every responder of every pod (an acceptance, a heartbeat), and a decision reads none of them
// but the time to interrupt a responder past its deadline, which a later heartbeat only
// postpones: the look already due at the earlier deadline reads it then. In a large drain they
// were most of the controller's looks, each queued beside the pods waiting for their Eviction.
//
// The creation of one of the controller's own Evictions, seen by the watch, brings no look
// either: the reconcile that created it wrote its status at once from the create's result
// (Reconcile), or failed and looks again itself. One in the initial list (after a restart, its
// status perhaps never written) does.
func (r *Reconciler) evictionDecides() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return e.IsInInitialList || !evictiondecide.Ours(e.Object.(*lifecyclev1alpha1.Eviction), r.Name)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*lifecyclev1alpha1.Eviction), e.ObjectNew.(*lifecyclev1alpha1.Eviction)
			return !equality.Semantic.DeepEqual(decisive(o), decisive(n))
		},
	}
}

// decisive is what of an Eviction a decision reads, but the responders' heartbeats, messages and
// expected completions (evictionDecides); the imperative evictor's entry, which the controller
// writes itself, is kept whole.
func decisive(e *lifecyclev1alpha1.Eviction) *lifecyclev1alpha1.Eviction {
	out := &lifecyclev1alpha1.Eviction{Spec: e.Spec, Status: e.Status}
	out.Labels, out.OwnerReferences, out.DeletionTimestamp, out.Finalizers, out.Generation = e.Labels, e.OwnerReferences, e.DeletionTimestamp, e.Finalizers, e.Generation
	out.Status.Responders = make([]lifecyclev1alpha1.ResponderStatus, len(e.Status.Responders))
	for i, r := range e.Status.Responders {
		if r.Name != evictionrequest.ImperativeEvictor {
			r.HeartbeatTime, r.Message, r.ExpectedCompletionTime = nil, nil, nil
		}
		out.Status.Responders[i] = r
	}
	return out
}

// podDecides passes the pod events that can change a decision about it: its creation and
// deletion, and an update of its phase, deletion, labels (its budgets, whether it is the
// controller's own), owners or readiness (what its budgets allow). Not the others: the
// responders' marks, the evacuation conditions, the kubelet's status reports.
func podDecides() predicate.Predicate {
	// The Ready condition's status, not podutils.IsPodReady: a condition that appears or goes
	// Unknown is a change the budgets' observed state may follow.
	ready := func(p *corev1.Pod) corev1.ConditionStatus {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status
			}
		}
		return ""
	}
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
		return o.UID != n.UID || o.Status.Phase != n.Status.Phase || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
			!maps.Equal(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
			ready(o) != ready(n)
	}}
}

// refusedBy maps a PodDisruptionBudget to the target pods it selects whose imperative eviction
// was refused: the pods of the Evictions in its namespace.
func (r *Reconciler) refusedBy(ctx context.Context, o client.Object) []reconcile.Request {
	pdb := o.(*policyv1.PodDisruptionBudget)
	if r.Refusals.None() {
		return nil
	}
	// Read-only and for every status report of every budget: the cache's objects, not copies (a
	// namespace's Evictions copied at each budget report cost the controller much of its CPU in a
	// large drain), and a pod only when its eviction was refused.
	var evs lifecyclev1alpha1.EvictionList
	if err := r.Client.List(ctx, &evs, client.InNamespace(pdb.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, e := range evs.Items {
		p := e.Spec.Target.Pod
		if p == nil {
			continue
		}
		if _, _, refused := r.Refusals.Refusal(p.UID); !refused {
			continue
		}
		pod := &corev1.Pod{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pdb.Namespace, Name: p.Name}, pod, client.UnsafeDisableDeepCopy); err != nil || pod.UID != p.UID {
			continue
		}
		if len(evictiondecide.SelectBudgets(pod, []policyv1.PodDisruptionBudget{*pdb})) == 0 {
			continue
		}
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pdb.Namespace, Name: p.Name}})
	}
	return out
}

// requestTarget maps an EvictionRequest to its target pod.
func requestTarget(_ context.Context, o client.Object) []reconcile.Request {
	return targetOf(o.GetNamespace(), o.(*lifecyclev1alpha1.EvictionRequest).Spec.Target.Pod)
}

func targetOf(namespace string, p *lifecyclev1alpha1.EvictionRequestPodReference) []reconcile.Request {
	if p == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: p.Name}}}
}

// IndexTargets indexes EvictionRequests and Evictions by their target pod in the manager's cache.
func IndexTargets(ctx context.Context, mgr manager.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &lifecyclev1alpha1.EvictionRequest{}, targetIndex, func(o client.Object) []string {
		if p := o.(*lifecyclev1alpha1.EvictionRequest).Spec.Target.Pod; p != nil {
			return []string{o.GetNamespace() + "/" + p.Name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing EvictionRequests: %w", err)
	}
	if err := idx.IndexField(ctx, &lifecyclev1alpha1.Eviction{}, targetIndex, func(o client.Object) []string {
		if p := o.(*lifecyclev1alpha1.Eviction).Spec.Target.Pod; p != nil {
			return []string{o.GetNamespace() + "/" + p.Name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing Evictions: %w", err)
	}
	return nil
}
