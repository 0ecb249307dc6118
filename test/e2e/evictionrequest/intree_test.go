package evictionrequest_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	lifecycleac "k8s.io/client-go/applyconfigurations/lifecycle/v1alpha1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/internal/controller/eviction"
	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// inTreeStandIn plays kube-controller-manager's evictionrequest-controller and imperative
// eviction responder in the namespace, as their pull requests write them
// (kubernetes/kubernetes#137133 and #137396, atiratree/kubernetes pkg/controller/evictionrequest):
// every write is a Server-Side Apply with Force under their controller names as field managers
// (evictiondecide.InTreeController, evictiondecide.InTreeResponder); it writes the observedGeneration of every
// EvictionRequest at its first look; it creates one Eviction per pod asked for, named
// pod-<n>-<pod>, labelled with its requesters' and responders' names (KEP-4563 "Label
// Generation", no mark of its own), owned by the requests; and it adopts every Eviction of a pod,
// whoever created it (the KEP: "it will be adopted"): it writes its status, makes the pod's
// responders Active one at a time by priority, the imperative evictor last, which evicts the pod,
// and reports it evicted once it is gone. So an Eviction nodemaint's controller created would be
// written by both. It runs until the test ends; stop ends it earlier. It is lean: no heartbeat
// deadline, no cancellation but by deletion of the requests, no back-off.
func inTreeStandIn(t *testing.T, ns string) (stop func()) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(framework.Cluster().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &standIn{cs: cs, ns: ns}
	var watches []watch.Interface
	for _, w := range []func() (watch.Interface, error){
		func() (watch.Interface, error) {
			return cs.LifecycleV1alpha1().EvictionRequests(ns).Watch(ctx, metav1.ListOptions{})
		},
		func() (watch.Interface, error) {
			return cs.LifecycleV1alpha1().Evictions(ns).Watch(ctx, metav1.ListOptions{})
		},
		func() (watch.Interface, error) { return cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{}) },
	} {
		wi, err := w()
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, wi)
	}
	pods := make(chan string, 1000)
	var wg sync.WaitGroup
	for _, w := range watches {
		wg.Go(func() {
			for ev := range w.ResultChan() {
				switch o := ev.Object.(type) {
				case *lifecyclev1alpha1.EvictionRequest:
					if o.Spec.Target.Pod != nil {
						pods <- o.Spec.Target.Pod.Name
					}
				case *lifecyclev1alpha1.Eviction:
					if o.Spec.Target.Pod != nil {
						pods <- o.Spec.Target.Pod.Name
					}
				case *corev1.Pod:
					pods <- o.Name
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case pod := <-pods:
				if err := s.sync(ctx, pod); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
					t.Logf("in-tree stand-in: %s: %v", pod, err)
				}
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			for _, w := range watches {
				w.Stop()
			}
			wg.Wait()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

type standIn struct {
	cs kubernetes.Interface
	ns string
}

var applyAs = func(manager string) metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: manager, Force: true}
}

// sync does what the in-tree controllers do about one pod's requests and Evictions, from the API
// server's state.
func (s *standIn) sync(ctx context.Context, podName string) error {
	lc := s.cs.LifecycleV1alpha1()
	reqList, err := lc.EvictionRequests(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	evList, err := lc.Evictions(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pod, err := s.cs.CoreV1().Pods(s.ns).Get(ctx, podName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return err
	}
	var reqs []lifecyclev1alpha1.EvictionRequest
	for _, r := range reqList.Items {
		if r.Spec.Target.Pod == nil || r.Spec.Target.Pod.Name != podName || r.DeletionTimestamp != nil {
			continue
		}
		reqs = append(reqs, r)
		if ptr.Deref(r.Status.ObservedGeneration, 0) != r.Generation {
			if _, err := lc.EvictionRequests(s.ns).ApplyStatus(ctx, lifecycleac.EvictionRequest(r.Name, s.ns).
				WithStatus(lifecycleac.EvictionRequestStatus().WithObservedGeneration(r.Generation)), applyAs(evictiondecide.InTreeController)); err != nil {
				return err
			}
		}
	}
	var evs []lifecyclev1alpha1.Eviction
	for _, e := range evList.Items {
		if e.Spec.Target.Pod != nil && e.Spec.Target.Pod.Name == podName {
			evs = append(evs, e)
		}
	}
	var active []lifecyclev1alpha1.EvictionRequest
	for _, r := range reqs {
		if pod != nil && r.Spec.Target.Pod.UID == pod.UID && r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction {
			active = append(active, r)
		}
	}
	current := slices.IndexFunc(evs, func(e lifecyclev1alpha1.Eviction) bool {
		return pod != nil && e.Spec.Target.Pod.UID == pod.UID && !finalEviction(&e)
	})
	if current < 0 && len(active) > 0 {
		name := ""
		for n := 1; name == "" || slices.ContainsFunc(evList.Items, func(e lifecyclev1alpha1.Eviction) bool { return e.Name == name }); n++ {
			name = fmt.Sprintf("pod-%d-%s", n, podName)
		}
		labels := map[string]string{}
		for _, r := range reqs {
			labels[r.Spec.Requester] = string(lifecyclev1alpha1.EvictionParticipantRoleRequester)
		}
		for _, r := range respondersOf(pod) {
			if labels[r.Name] != "" {
				labels[r.Name] = string(lifecyclev1alpha1.EvictionParticipantRoleRequesterResponder)
			} else {
				labels[r.Name] = string(lifecyclev1alpha1.EvictionParticipantRoleResponder)
			}
		}
		ac := lifecycleac.Eviction(name, s.ns).WithLabels(labels).
			WithSpec(lifecycleac.EvictionSpec().WithTarget(lifecycleac.EvictionTarget().
				WithPod(lifecycleac.EvictionPodReference().WithName(pod.Name).WithUID(pod.UID))))
		for _, r := range reqs {
			ac.WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(lifecyclev1alpha1.SchemeGroupVersion.String()).
				WithKind("EvictionRequest").WithName(r.Name).WithUID(r.UID))
		}
		if _, err := lc.Evictions(s.ns).Apply(ctx, ac, applyAs(evictiondecide.InTreeController)); err != nil {
			return err
		}
		// Its status at the Eviction's event.
		return nil
	}
	for i := range evs {
		if err := s.progress(ctx, &evs[i], pod, reqs, active); err != nil {
			return err
		}
	}
	return nil
}

// respondersOf is the pod's responders by priority, the imperative evictor last.
func respondersOf(pod *corev1.Pod) []corev1.EvictionResponder {
	out := slices.Clone(pod.Spec.EvictionResponders)
	slices.SortStableFunc(out, func(a, b corev1.EvictionResponder) int {
		return int(ptr.Deref(b.Priority, 0) - ptr.Deref(a.Priority, 0))
	})
	return append(out, corev1.EvictionResponder{Name: names.ImperativeEvictor, Priority: ptr.To(names.ImperativeEvictorPriority)})
}

func finalEviction(e *lifecyclev1alpha1.Eviction) bool {
	return meta.IsStatusConditionTrue(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) ||
		meta.IsStatusConditionTrue(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed))
}

// progress writes an Eviction's status, whoever created it: its responders initialised from the
// pod, the next one made Active once the active one completed, the imperative evictor's eviction,
// and the conditions.
func (s *standIn) progress(ctx context.Context, e *lifecyclev1alpha1.Eviction, pod *corev1.Pod, reqs, active []lifecyclev1alpha1.EvictionRequest) error {
	if finalEviction(e) {
		return nil
	}
	now := metav1.Now()
	gen := e.Generation
	targets := slices.Clone(e.Status.TargetResponders)
	live := pod != nil && pod.UID == e.Spec.Target.Pod.UID && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
	if len(targets) == 0 {
		if !live {
			return nil
		}
		for _, r := range respondersOf(pod) {
			targets = append(targets, lifecyclev1alpha1.TargetResponder{Name: r.Name, Priority: r.Priority, State: lifecyclev1alpha1.ResponderStateInactive})
		}
	}
	started := map[string]metav1.Time{}
	completed := map[string]bool{}
	for _, r := range e.Status.Responders {
		if r.StartTime != nil {
			started[r.Name] = *r.StartTime
		}
		completed[r.Name] = r.CompletionTime != nil
	}
	if live && len(active) > 0 {
		for {
			i := slices.IndexFunc(targets, func(t lifecyclev1alpha1.TargetResponder) bool {
				return t.State == lifecyclev1alpha1.ResponderStateActive
			})
			if i >= 0 && !completed[targets[i].Name] {
				break
			}
			if i >= 0 {
				targets[i].State = lifecyclev1alpha1.ResponderStateCompleted
			}
			next := slices.IndexFunc(targets, func(t lifecyclev1alpha1.TargetResponder) bool {
				return t.State == lifecyclev1alpha1.ResponderStateInactive
			})
			if next < 0 {
				break
			}
			targets[next].State = lifecyclev1alpha1.ResponderStateActive
			if _, ok := started[targets[next].Name]; !ok {
				started[targets[next].Name] = now
			}
		}
	}
	cond := func(t lifecyclev1alpha1.EvictionConditionType, status metav1.ConditionStatus, reason lifecyclev1alpha1.EvictionConditionReason) *metav1ac.ConditionApplyConfiguration {
		ltt := now
		if c := meta.FindStatusCondition(e.Status.Conditions, string(t)); c != nil && c.Status == status && c.Reason == string(reason) {
			ltt = c.LastTransitionTime
		}
		return metav1ac.Condition().WithType(string(t)).WithStatus(status).WithReason(string(reason)).WithMessage(string(reason)).
			WithLastTransitionTime(ltt).WithObservedGeneration(gen)
	}
	st := lifecycleac.EvictionStatus().WithObservedGeneration(gen)
	switch {
	case !live:
		// The pod gone: the active responder is done, or interrupted if it did not say so.
		for i := range targets {
			if targets[i].State == lifecyclev1alpha1.ResponderStateActive {
				targets[i].State = lifecyclev1alpha1.ResponderStateInterrupted
				if completed[targets[i].Name] {
					targets[i].State = lifecyclev1alpha1.ResponderStateCompleted
				}
			}
		}
		st.WithConditions(cond(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionTrue, lifecyclev1alpha1.EvictionConditionReasonPodDeleted),
			cond(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonSucceeded))
	case len(active) == 0:
		for i := range targets {
			if targets[i].State == lifecyclev1alpha1.ResponderStateActive {
				targets[i].State = lifecyclev1alpha1.ResponderStateCanceled
			}
		}
		st.WithConditions(cond(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionTrue, lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters),
			cond(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonEvictionFailed))
	default:
		st.WithConditions(cond(lifecyclev1alpha1.EvictionConditionFailed, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction),
			cond(lifecyclev1alpha1.EvictionConditionTargetEvicted, metav1.ConditionFalse, lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction))
	}
	for _, r := range reqs {
		intent := lifecyclev1alpha1.RequesterIntentWithdrawn
		if r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction {
			intent = lifecyclev1alpha1.RequesterIntentEviction
		}
		st.WithRequesters(lifecycleac.Requester().WithName(r.Spec.Requester).WithIntent(intent))
	}
	for _, tr := range targets {
		st.WithTargetResponders(lifecycleac.TargetResponder().WithName(tr.Name).WithPriority(ptr.Deref(tr.Priority, 0)).WithState(tr.State))
		rs := lifecycleac.ResponderStatus().WithName(tr.Name)
		if at, ok := started[tr.Name]; ok {
			rs.WithStartTime(at)
		}
		st.WithResponders(rs)
	}
	if _, err := s.cs.LifecycleV1alpha1().Evictions(s.ns).ApplyStatus(ctx, lifecycleac.Eviction(e.Name, s.ns).WithStatus(st), applyAs(evictiondecide.InTreeController)); err != nil {
		return err
	}
	// The imperative responder, once Active: evicts the pod, and says so once.
	i := slices.IndexFunc(targets, func(t lifecyclev1alpha1.TargetResponder) bool {
		return t.State == lifecyclev1alpha1.ResponderStateActive
	})
	if !live || i < 0 || targets[i].Name != names.ImperativeEvictor || pod.DeletionTimestamp != nil {
		return nil
	}
	err := s.cs.PolicyV1().Evictions(s.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}})
	if err != nil && !apierrors.IsTooManyRequests(err) {
		return err
	}
	for _, r := range e.Status.Responders {
		if r.Name == names.ImperativeEvictor && r.HeartbeatTime != nil {
			return nil
		}
	}
	_, err = s.cs.LifecycleV1alpha1().Evictions(s.ns).ApplyStatus(ctx, lifecycleac.Eviction(e.Name, s.ns).WithStatus(lifecycleac.EvictionStatus().
		WithResponders(lifecycleac.ResponderStatus().WithName(names.ImperativeEvictor).WithHeartbeatTime(now).WithMessage("evicting the pod"))),
		applyAs(evictiondecide.InTreeResponder))
	return err
}

// evictionManagers watches the Evictions of the namespace and records, per Eviction (by name
// and UID), every field manager that wrote it (its managedFields over all its versions) and
// the mark of its creator; stop ends the watch and returns them.
func evictionManagers(t *testing.T, ns string) (stop func() map[string]evictionWrites) {
	t.Helper()
	wc, err := client.NewWithWatch(framework.Cluster().RESTConfig(), client.Options{Scheme: framework.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &lifecyclev1alpha1.EvictionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]evictionWrites{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			e, ok := ev.Object.(*lifecyclev1alpha1.Eviction)
			if !ok {
				continue
			}
			key := e.Name + "/" + string(e.UID)
			rec := seen[key]
			rec.mark = e.Labels[names.ControllerLabel]
			if rec.managers == nil {
				rec.managers = map[string]bool{}
			}
			for _, mf := range e.ManagedFields {
				rec.managers[mf.Manager] = true
			}
			for _, r := range e.Status.Responders {
				if r.HeartbeatTime != nil || r.Message != nil || r.CompletionTime != nil {
					if rec.answered == nil {
						rec.answered = map[string]bool{}
					}
					rec.answered[r.Name] = true
				}
			}
			seen[key] = rec
		}
	}()
	return func() map[string]evictionWrites {
		w.Stop()
		<-done
		return seen
	}
}

type evictionWrites struct {
	// mark is its creator's, if nodemaint's (names.ControllerLabel).
	mark string
	// managers wrote it; answered are the responders that answered on it.
	managers, answered map[string]bool
}

// nodemaintController is the field manager prefix of nodemaint's Eviction controllers
// (eviction.FieldManager).
var nodemaintController = eviction.FieldManager("")

// TestBesideInTreeEvictionController: kube-controller-manager's own Eviction controller
// (played by inTreeStandIn, which writes what nodemaint created too) answers in the cluster,
// started before nodemaint-controller (with its defaults: --eviction-controller=auto) and, on a
// second drain, after it. A node with a Deployment's pod (its responder, nodemaint's Deployment
// responder, registered by config/admission/eviction-responder) and a bare pod whose responder
// declines is drained through EvictionRequests: every Eviction is the in-tree controller's,
// none is written by nodemaint's Eviction controller, the Deployment responder answers on the
// in-tree controller's Eviction, the drain completes, and nodemaint says that it stands aside
// (log, Event, gauge). Before the in-tree controller starts, nodemaint's answers a request
// itself: the evidence that it runs.
func TestBesideInTreeEvictionController(t *testing.T) {
	framework.InstallEvictionResponderPolicy(t)

	t.Run("in-tree first", func(t *testing.T) {
		ns := framework.Namespace(t)
		declineAll(t, ns)
		managers := evictionManagers(t, ns)
		inTreeStandIn(t, ns)
		c := framework.NewController(t)
		c.Start()
		drainBesideInTree(t, ns, c, managers)
	})
	t.Run("in-tree after", func(t *testing.T) {
		ns := framework.Namespace(t)
		declineAll(t, ns)
		managers := evictionManagers(t, ns)
		c := framework.NewController(t)
		c.Start()
		// Alone, nodemaint's controller answers: another requester's request of a pod gets its
		// Eviction (after InTreeGrace), whose responder declines, and the pod is evicted.
		first := pod(ns, "first", corev1.EvictionResponder{Name: autoDeclining, Priority: ptr.To[int32](20000)})
		first.Spec.NodeName = "kwok-node-1"
		if err := framework.Client().Create(t.Context(), first); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, timeout, "the first pod Ready", func(ctx context.Context) (bool, string, error) {
			err := get(ctx, first)
			return err == nil && podutils.IsPodReady(first), "", err
		})
		req := &lifecyclev1alpha1.EvictionRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"},
			Spec: lifecyclev1alpha1.EvictionRequestSpec{
				Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: first.Name, UID: first.UID}},
				Requester: "descheduler.example.com/rebalance", Intent: lifecyclev1alpha1.EvictionRequestIntentEviction,
			},
		}
		if err := framework.Client().Create(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, timeout, "the first pod evicted through nodemaint's Eviction", func(ctx context.Context) (bool, string, error) {
			err := get(ctx, first)
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		})
		if err := framework.Client().Delete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, timeout, "the first request and its Eviction gone", func(ctx context.Context) (bool, string, error) {
			evs, reqs, err := evictionsOf(ctx, ns)
			return len(evs)+len(reqs) == 0, "", err
		})
		inTreeStandIn(t, ns)
		drainBesideInTree(t, ns, c, managers)
	})
}

// acceptedEvictions watches the pods of the namespace and records the Evictions (their UIDs)
// nodemaint's Deployment responder accepted on them (evacuation.AcceptedEvictionAnnotation); stop
// ends the watch and returns them.
func acceptedEvictions(t *testing.T, ns string) (stop func() map[string]bool) {
	t.Helper()
	wc, err := client.NewWithWatch(framework.Cluster().RESTConfig(), client.Options{Scheme: framework.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Annotations[evacuation.AcceptedEvictionAnnotation] != "" {
				seen[p.Annotations[evacuation.AcceptedEvictionAnnotation]] = true
			}
		}
	}()
	return func() map[string]bool {
		w.Stop()
		<-done
		return seen
	}
}

// silent is a responder that never answers: the held pod's Eviction keeps it Active.
const silent = "silent.example.com/operator"

// drainBesideInTree drains the node of a Deployment's pod and a bare pod beside the in-tree
// stand-in (running, or started just before), while another requester's request holds a third
// pod (its responder silent) on the other node; it checks that nodemaint's Eviction controller
// stood aside, and that it answers again once the in-tree controller's objects are gone.
func drainBesideInTree(t *testing.T, ns string, c *framework.Controller, managers func() map[string]evictionWrites) {
	ctx := t.Context()
	cl := framework.Client()
	started := time.Now()
	d := framework.NewDeployment(ns, "web", 1)
	framework.CreateDeployment(t, d)
	var web corev1.PodList
	if err := cl.List(ctx, &web, client.InNamespace(ns), client.MatchingLabels{"app": "web"}); err != nil || len(web.Items) != 1 {
		t.Fatalf("the Deployment's pod: %v (%d)", err, len(web.Items))
	}
	accepted := acceptedEvictions(t, ns)
	target := web.Items[0].Spec.NodeName
	if !slices.ContainsFunc(web.Items[0].Spec.EvictionResponders, func(r corev1.EvictionResponder) bool { return r.Name == deployment.EvictionResponder }) {
		t.Fatalf("the Deployment's pod names responders %+v: want nodemaint's Deployment responder", web.Items[0].Spec.EvictionResponders)
	}
	other := "kwok-node-0"
	if target == other {
		other = "kwok-node-1"
	}
	bare := pod(ns, "bare", corev1.EvictionResponder{Name: autoDeclining, Priority: ptr.To[int32](20000)})
	bare.Spec.NodeName = target
	held := pod(ns, "held", corev1.EvictionResponder{Name: silent, Priority: ptr.To[int32](20000)})
	held.Spec.NodeName = other
	for _, p := range []*corev1.Pod{bare, held} {
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, timeout, "the bare and held pods Ready", func(ctx context.Context) (bool, string, error) {
		for _, p := range []*corev1.Pod{bare, held} {
			if err := get(ctx, p); err != nil || !podutils.IsPodReady(p) {
				return false, "", err
			}
		}
		return true, "", nil
	})
	hold := &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: held.Name, UID: held.UID}},
			Requester: "descheduler.example.com/rebalance", Intent: lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
	if err := cl.Create(ctx, hold); err != nil {
		t.Fatal(err)
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "intree-" + ns},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(target), Cordon: true, Drain: true, Reason: "beside the in-tree controller",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: responseTimeout},
		},
	}
	if err := cl.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), nm) })
	testutil.Eventually(t, timeout, "the node drained", func(ctx context.Context) (bool, string, error) {
		err := get(ctx, nm)
		return nm.Status.NodesDrained == 1, "", err
	})
	framework.WaitDeploymentAvailable(t, ns, "web")

	// The held pod's request and Eviction show the in-tree controller: the gauges.
	gauges := func(want float64) func(ctx context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			m, err := framework.ScrapeMetrics(ctx, c.MetricsTarget())
			if err != nil {
				return false, "", err
			}
			inTree, _ := m.Value("nodemaint_eviction_controller_in_tree_answers", nil)
			aside, _ := m.Value("nodemaint_eviction_controller_standing_aside", nil)
			return inTree == want && aside == want, fmt.Sprintf("in-tree answers %v, standing aside %v", inTree, aside), nil
		}
	}
	if ok, _, err := gauges(1)(ctx); err != nil || !ok {
		t.Errorf("nodemaint_eviction_controller_in_tree_answers and _standing_aside not 1 while the in-tree controller answers (%v)", err)
	}
	if err := get(ctx, held); err != nil || held.DeletionTimestamp != nil {
		t.Errorf("the held pod evicted while its responder is active (%v)", err)
	}

	// The maintenance ends and the other requester withdraws: every request goes, and the
	// Evictions with them (the garbage collector); nodemaint's controller answers again.
	if err := cl.Delete(ctx, nm); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, hold); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "every EvictionRequest and Eviction gone", func(ctx context.Context) (bool, string, error) {
		evs, reqs, err := evictionsOf(ctx, ns)
		return len(evs)+len(reqs) == 0, "", err
	})
	inTree, responderAnswered := 0, false
	acceptedUIDs := accepted()
	for key, w := range managers() {
		var wrote []string
		for m := range w.managers {
			wrote = append(wrote, m)
		}
		slices.Sort(wrote)
		fromNodemaint := w.mark != "" || slices.ContainsFunc(wrote, func(m string) bool { return strings.HasPrefix(m, nodemaintController) })
		fromInTree := w.managers[evictiondecide.InTreeController]
		switch {
		case fromNodemaint && fromInTree:
			t.Errorf("Eviction %s written by nodemaint's Eviction controller and the in-tree one: %v (mark %q)", key, wrote, w.mark)
		case fromInTree:
			inTree++
			_, uid, _ := strings.Cut(key, "/")
			responderAnswered = responderAnswered || w.answered[deployment.EvictionResponder] || acceptedUIDs[uid]
		case fromNodemaint && strings.HasPrefix(key, "pod-1-first/"):
			// The request answered before the in-tree controller started.
		case fromNodemaint:
			t.Errorf("Eviction %s of nodemaint's controller while the in-tree one answers: %v", key, wrote)
		}
	}
	if inTree < 3 {
		t.Errorf("the in-tree controller wrote %d Evictions: want one of each pod asked for (the test proves nothing else)", inTree)
	}
	if !responderAnswered {
		t.Errorf("nodemaint's Deployment responder did not answer on the in-tree controller's Evictions (it accepted %v)", acceptedUIDs)
	}
	testutil.Eventually(t, timeout, "nodemaint's Event that it stands aside", func(ctx context.Context) (bool, string, error) {
		var events eventsv1.EventList
		err := cl.List(ctx, &events, client.InNamespace(ns))
		return slices.ContainsFunc(events.Items, func(e eventsv1.Event) bool {
			return e.Reason == eviction.StandsAsideReason && e.EventTime.After(started)
		}), "", err
	})
	log, err := os.ReadFile(c.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kube-controller-manager's Eviction controller answers", "kube-controller-manager's Eviction controller shows no more"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("nodemaint's log does not say %q", want)
		}
	}
	testutil.Eventually(t, timeout, "the gauges back to 0", gauges(0))
}
