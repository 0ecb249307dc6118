// Package evictionrequest_test proves nodemaint's drain through KEP-4563's EvictionRequest API end
// to end, on a local cluster whose kube-apiserver serves lifecycle.k8s.io/v1alpha1 (the
// EvictionRequestAPI gate), with the real disruption controller, kwok kubelets, and
// nodemaint-controller running as its ServiceAccount with its defaults: --evacuation-protocol=auto
// and --eviction-controller=auto pick the EvictionRequest protocol and nodemaint's own Eviction
// controller, since Kubernetes 1.37 runs none.
package evictionrequest_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{Nodes: 2, EvictionRequestAPI: true}))
}

const (
	timeout = 90 * time.Second
	// responseTimeout is the maintenances' evacuationResponseTimeout.
	responseTimeout = 15 * time.Second
	node            = "kwok-node-0"
	// declining is a third-party responder registered above the imperative evictor, played by the
	// test: it declines (completionTime without evicting) once it is active.
	declining = "decline.example.com/operator"
)

// autoDeclining is a responder that declineAll plays: it declines as soon as it is active.
const autoDeclining = "autodecline.example.com/operator"

// declineAll plays autoDeclining in the namespace until the test ends: whenever a watched
// Eviction makes it the active responder and it has not completed, it sets its completionTime (a
// decline). A patch that meets a conflict is tried again on the newer version's event.
func declineAll(t *testing.T, ns string) {
	t.Helper()
	wc, err := client.NewWithWatch(framework.Cluster().RESTConfig(), client.Options{Scheme: framework.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &lifecyclev1alpha1.EvictionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if e, ok := ev.Object.(*lifecyclev1alpha1.Eviction); ok {
				declineActive(ctx, framework.Client(), e)
			}
		}
	}()
}

func declineActive(ctx context.Context, c client.Client, e *lifecyclev1alpha1.Eviction) {
	for _, tr := range e.Status.TargetResponders {
		if tr.Name != autoDeclining || tr.State != lifecyclev1alpha1.ResponderStateActive {
			continue
		}
		orig := e.DeepCopy()
		for j := range e.Status.Responders {
			if r := &e.Status.Responders[j]; r.Name == autoDeclining && r.CompletionTime == nil {
				r.CompletionTime = ptr.To(metav1.Now())
				// A conflict or a gone Eviction is seen at the next look.
				_ = c.Status().Patch(ctx, e, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
			}
		}
	}
}

func pod(ns, name string, responders ...corev1.EvictionResponder) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName: node, EvictionResponders: responders,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

func get(ctx context.Context, o client.Object) error {
	return framework.Client().Get(ctx, client.ObjectKeyFromObject(o), o)
}

func evictionsOf(ctx context.Context, ns string) ([]lifecyclev1alpha1.Eviction, []lifecyclev1alpha1.EvictionRequest, error) {
	var evs lifecyclev1alpha1.EvictionList
	if err := framework.Client().List(ctx, &evs, client.InNamespace(ns)); err != nil {
		return nil, nil, err
	}
	var reqs lifecyclev1alpha1.EvictionRequestList
	err := framework.Client().List(ctx, &reqs, client.InNamespace(ns))
	return evs.Items, reqs.Items, err
}

// TestDrainThroughEvictionRequests: a node with a bare pod under a minAvailable: 1 budget and a
// pod whose third-party responder declines. nodemaint asks through one EvictionRequest per pod;
// the declining responder is asked first and passed over when it completes; the imperative
// evictor holds both pods, since only nodemaint's drain asks for them, and the drain evicts: the
// declined pod at once, the bare pod (nobody answers for it) only once its response timeout ran
// out, through its budget, which holds it (the NodeMaintenance reports it) until the budget
// allows. Once the maintenance is done and deleted, no EvictionRequest and no Eviction is left.
func TestDrainThroughEvictionRequests(t *testing.T) {
	ctx := t.Context()
	ns := framework.Namespace(t)
	framework.NewController(t).Start()
	c := framework.Client()
	checker, err := invariants.Start(context.Background(), framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{
		Namespaces:  []string{ns},
		OnViolation: func(v invariants.Violation) { t.Logf("VIOLATION %s", v) },
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = checker.Stop() })

	solo := pod(ns, "solo")
	op := pod(ns, "op", corev1.EvictionResponder{Name: declining, Priority: ptr.To[int32](20000)})
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}},
	}
	for _, o := range []client.Object{solo, op, pdb} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, timeout, "the pods Ready and the budget allowing no disruption", func(ctx context.Context) (bool, string, error) {
		for _, p := range []*corev1.Pod{solo, op} {
			if err := get(ctx, p); err != nil || !podutils.IsPodReady(p) {
				return false, "", err
			}
		}
		err := get(ctx, pdb)
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 1 && pdb.Status.DisruptionsAllowed == 0, "", err
	})

	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "er-" + ns},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: true, Reason: "kernel upgrade",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: responseTimeout},
		},
	}
	if err := c.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), nm) })

	// The declining responder is asked first; it declines.
	var opEviction *lifecyclev1alpha1.Eviction
	testutil.Eventually(t, timeout, "op's Eviction with the declining responder active", func(ctx context.Context) (bool, string, error) {
		evs, _, err := evictionsOf(ctx, ns)
		for i := range evs {
			e := &evs[i]
			if e.Spec.Target.Pod.UID == op.UID && len(e.Status.TargetResponders) == 2 &&
				e.Status.TargetResponders[0].Name == declining && e.Status.TargetResponders[0].State == lifecyclev1alpha1.ResponderStateActive &&
				e.Status.TargetResponders[1].Name == names.ImperativeEvictor && e.Status.TargetResponders[1].State == lifecyclev1alpha1.ResponderStateInactive {
				opEviction = e
			}
		}
		return opEviction != nil, "", err
	})
	if err := get(ctx, op); err != nil || op.DeletionTimestamp != nil {
		t.Fatalf("op was evicted while its responder was active (%v)", err)
	}
	orig := opEviction.DeepCopy()
	for i := range opEviction.Status.Responders {
		if opEviction.Status.Responders[i].Name == declining {
			opEviction.Status.Responders[i].CompletionTime = ptr.To(metav1.Now())
			opEviction.Status.Responders[i].Message = ptr.To("declined: nothing to hand over")
		}
	}
	if err := c.Status().Patch(ctx, opEviction, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}

	testutil.Eventually(t, timeout, "op evicted once declined; solo held by its budget, reported", func(ctx context.Context) (bool, string, error) {
		if err := get(ctx, op); !apierrors.IsNotFound(err) {
			return false, "", client.IgnoreNotFound(err)
		}
		if err := get(ctx, solo); err != nil || solo.DeletionTimestamp != nil {
			return false, "", fmt.Errorf("solo evicted against its budget (%v)", err)
		}
		if err := get(ctx, nm); err != nil {
			return false, "", err
		}
		msg := fmt.Sprint(nm.Status.Nodes[node].Blocked)
		return nm.Status.EvacuationProtocol == nodemaintv1alpha1.EvacuationProtocolEvictionRequest &&
			strings.Contains(msg, "disruption budget"), "", nil
	})
	// solo names no responder: nodemaint asked it through its pod condition, not an
	// EvictionRequest. Nobody answered: its first eviction came no earlier than its response
	// timeout after nodemaint asked.
	cond := evacuation.Condition(solo, evacuation.Request)
	if cond == nil || !evacuation.RequestedBy(solo, evacuation.ReasonNodeMaintenance) {
		t.Fatalf("solo's conditions %v: want nodemaint's EvacuationRequest", solo.Status.Conditions)
	}
	asked := cond.LastTransitionTime.Time
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	refused := time.Time{}
	for _, e := range events.Items {
		if e.Regarding.UID == solo.UID && e.Reason == "EvictionRefused" && (refused.IsZero() || e.EventTime.Before(&metav1.MicroTime{Time: refused})) {
			refused = e.EventTime.Time
		}
	}
	// The annotation is in whole seconds, truncated.
	if refused.IsZero() || refused.Before(asked.Add(responseTimeout-time.Second)) {
		t.Fatalf("solo's first refused eviction at %v, asked at %v: want one no earlier than its %v response timeout", refused, asked, responseTimeout)
	}
	evs, _, err := evictionsOf(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Spec.Target.Pod.UID == solo.UID {
			t.Fatalf("solo has an Eviction (%s): want it asked through its pod condition only", e.Name)
		}
	}
	_, reqs, err := evictionsOf(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.Spec.Target.Pod.UID == solo.UID {
			t.Fatalf("EvictionRequest %s for solo: want it asked through its pod condition only", r.Name)
		}
	}

	// The budget allows one disruption: solo goes through it.
	origPDB := pdb.DeepCopy()
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
	if err := c.Patch(ctx, pdb, client.MergeFrom(origPDB)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "solo evicted and the node drained", func(ctx context.Context) (bool, string, error) {
		if err := get(ctx, solo); !apierrors.IsNotFound(err) {
			return false, "", client.IgnoreNotFound(err)
		}
		err := get(ctx, nm)
		return nm.Status.NodesDrained == 1, "", err
	})

	if err := c.Delete(ctx, nm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "the maintenance gone, with every EvictionRequest and Eviction", func(ctx context.Context) (bool, string, error) {
		if err := get(ctx, nm); !apierrors.IsNotFound(err) {
			return false, "", client.IgnoreNotFound(err)
		}
		evs, reqs, err := evictionsOf(ctx, ns)
		return len(evs) == 0 && len(reqs) == 0, "", err
	})
	if err := checker.CheckClean(ctx, ns); err != nil {
		t.Errorf("left over:\n%v", err)
	}
	if v := checker.Violations(); len(v) > 0 {
		t.Errorf("invariant violations: %v", v)
	}
}

// TestSignalOnlyThroughEvictionRequests: a SignalOnly maintenance asks for a pod that names a
// responder of its own through the EvacuationRequest pod condition, never an EvictionRequest
// (whichever Eviction controller ran would carry that through to an eviction), and never evicts
// it, although nobody answers. Switched to evictionPolicy Evict, the same maintenance asks
// through an EvictionRequest, the pod's responder declines, and the pod is evicted at once, its
// response timeout long over: what held it was the policy.
func TestSignalOnlyThroughEvictionRequests(t *testing.T) {
	ctx := t.Context()
	ns := framework.Namespace(t)
	framework.NewController(t).Start()
	c := framework.Client()
	const other = "kwok-node-1"
	// The pod's responder declines at once (played by declineAll): only the imperative evictor
	// would be left.
	declineAll(t, ns)
	p := pod(ns, "signal", corev1.EvictionResponder{Name: autoDeclining, Priority: ptr.To[int32](20000)})
	p.Spec.NodeName = other
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "signal-" + ns},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(other), Cordon: true, Drain: true, Reason: "firmware",
			EvictionPolicy:            nodemaintv1alpha1.EvictionPolicySignalOnly,
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Second},
		},
	}
	if err := c.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), nm) })

	// Evidence that the drain looked: the pod carries the condition, and the status says that
	// the drain only signals.
	var asked time.Time
	testutil.Eventually(t, timeout, "the pod asked through its condition, reported as signal only", func(ctx context.Context) (bool, string, error) {
		if err := get(ctx, p); err != nil {
			return false, "", err
		}
		cond := evacuation.Condition(p, evacuation.Request)
		if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != evacuation.ReasonNodeMaintenance {
			return false, "", nil
		}
		asked = cond.LastTransitionTime.Time
		if err := get(ctx, nm); err != nil {
			return false, "", err
		}
		return strings.Contains(fmt.Sprint(nm.Status.Nodes[other].Blocked), "signal only"), "", nil
	})
	// The drain reconsiders the pod at least every status period (5s) while it drains: well past
	// its response timeout, it is still there, and nothing asked for its eviction.
	testutil.Eventually(t, timeout, "the pod untouched well past its response timeout", func(ctx context.Context) (bool, string, error) {
		if err := get(ctx, p); err != nil || p.DeletionTimestamp != nil {
			return false, "", fmt.Errorf("the pod was evicted under SignalOnly (%v)", err)
		}
		evs, reqs, err := evictionsOf(ctx, ns)
		if err != nil {
			return false, "", err
		}
		if len(reqs)+len(evs) > 0 {
			return false, "", fmt.Errorf("under SignalOnly, %d EvictionRequests and %d Evictions of the pod", len(reqs), len(evs))
		}
		return time.Since(asked) > 20*time.Second, "", nil
	})
	orig := nm.DeepCopy()
	nm.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicyEvict
	if err := c.Patch(ctx, nm, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "the pod evicted once the maintenance evicts", func(ctx context.Context) (bool, string, error) {
		err := get(ctx, p)
		return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil), "", client.IgnoreNotFound(err)
	})
}

// evictionWriters watches the Evictions of the namespace and records, per target pod, the
// Evictions it had and, from their managedFields, every Eviction written by more than one
// nodemaint Eviction controller or by another than the one its mark
// (names.ControllerLabel) names; stop ends the watch and returns them, with the marks of the
// Evictions seen (their creators).
func evictionWriters(t *testing.T, ns string) (stop func() (fights []string, perPod map[string]int, marks map[string]int)) {
	t.Helper()
	wc, err := client.NewWithWatch(framework.Cluster().RESTConfig(), client.Options{Scheme: framework.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &lifecyclev1alpha1.EvictionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "nodemaint-eviction-controller/"
	var fights []string
	evictions := map[string]map[string]bool{} // pod name: Eviction UIDs
	marks := map[string]int{}
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			e, ok := ev.Object.(*lifecyclev1alpha1.Eviction)
			if !ok || e.Spec.Target.Pod == nil {
				continue
			}
			if evictions[e.Spec.Target.Pod.Name] == nil {
				evictions[e.Spec.Target.Pod.Name] = map[string]bool{}
			}
			evictions[e.Spec.Target.Pod.Name][string(e.UID)] = true
			mark := prefix + e.Labels[names.ControllerLabel]
			if !seen[string(e.UID)] {
				seen[string(e.UID)] = true
				marks[mark]++
			}
			var managers []string
			for _, mf := range e.ManagedFields {
				if strings.HasPrefix(mf.Manager, prefix) && !slices.Contains(managers, mf.Manager) {
					managers = append(managers, mf.Manager)
				}
			}
			if len(managers) > 1 || len(managers) == 1 && managers[0] != mark {
				fights = append(fights, fmt.Sprintf("Eviction %s (marked %s) written by %v", e.Name, mark, managers))
			}
		}
	}()
	return func() ([]string, map[string]int, map[string]int) {
		w.Stop()
		<-done
		perPod := map[string]int{}
		for pod, uids := range evictions {
			perPod[pod] = len(uids)
		}
		return fights, perPod, marks
	}
}

// TestTwoEvictionControllers: a second installation's Eviction controller (a nodemaint-controller
// running only it, --eviction-controller=on, named "second") beside the framework's controller
// (the defaults: --eviction-controller=auto, named after its leader election namespace), while a
// node with four bare pods is drained and another requester asks for two pods of the other node.
// No Eviction is written by both controllers, or by another than the one that created it (their
// managedFields), each pod has one Eviction, the drain completes and nothing is left.
func TestTwoEvictionControllers(t *testing.T) {
	ctx := t.Context()
	ns := framework.Namespace(t)
	c := framework.Client()
	writers := evictionWriters(t, ns)
	first := framework.NewController(t)
	first.Start()
	// The framework's controller reconciles once it leads: it may wait out the Lease of the
	// previous test's controller. Until then only the second would answer, and it could create
	// and collect its Evictions before the first ever saw one.
	testutil.Eventually(t, timeout, "the framework's controller leading", func(ctx context.Context) (bool, string, error) {
		return first.Leads(ctx), "", nil
	})
	framework.NewController(t).Start("--eviction-controller=on", "--eviction-controller-name=second", "--leader-elect=false",
		"--feature-gates=DeclarativeNodeMaintenance=false,NodeMaintenanceDeployment=false")

	var drained, asked []*corev1.Pod
	// The drained pods name a responder that declines at once (declineAll), so that nodemaint asks
	// them through EvictionRequests (a pod that names none is asked through its pod condition).
	declineAll(t, ns)
	for i := range 4 {
		drained = append(drained, pod(ns, fmt.Sprint("drained-", i), corev1.EvictionResponder{Name: autoDeclining, Priority: ptr.To[int32](20000)}))
	}
	for i := range 2 {
		p := pod(ns, fmt.Sprint("asked-", i))
		p.Spec.NodeName = "kwok-node-1"
		asked = append(asked, p)
	}
	for _, p := range append(slices.Clone(drained), asked...) {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, timeout, "the pods Ready", func(ctx context.Context) (bool, string, error) {
		for _, p := range append(slices.Clone(drained), asked...) {
			if err := get(ctx, p); err != nil || !podutils.IsPodReady(p) {
				return false, "", err
			}
		}
		return true, "", nil
	})
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "two-" + ns},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: true, Reason: "two controllers",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Second},
		},
	}
	if err := c.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), nm) })
	for _, p := range asked {
		r := &lifecyclev1alpha1.EvictionRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name},
			Spec: lifecyclev1alpha1.EvictionRequestSpec{
				Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: p.Name, UID: p.UID}},
				Requester: "descheduler.example.com/rebalance", Intent: lifecyclev1alpha1.EvictionRequestIntentEviction,
			},
		}
		if err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	testutil.Eventually(t, timeout, "the node drained and the asked pods evicted", func(ctx context.Context) (bool, string, error) {
		for _, p := range append(slices.Clone(drained), asked...) {
			if err := get(ctx, p); !apierrors.IsNotFound(err) {
				return false, "", client.IgnoreNotFound(err)
			}
		}
		err := get(ctx, nm)
		return nm.Status.NodesDrained == 1, "", err
	})
	// The maintenance and the other requester's requests (whose pods are gone) end.
	if err := c.Delete(ctx, nm); err != nil {
		t.Fatal(err)
	}
	for _, p := range asked {
		if err := c.Delete(ctx, &lifecyclev1alpha1.EvictionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, timeout, "every EvictionRequest and Eviction gone", func(ctx context.Context) (bool, string, error) {
		evs, reqs, err := evictionsOf(ctx, ns)
		return len(evs) == 0 && len(reqs) == 0, "", err
	})
	fights, perPod, marks := writers()
	t.Logf("Evictions created, by controller: %v", marks)
	if len(fights) > 0 {
		t.Errorf("Evictions written by another Eviction controller than their creator: %v", fights)
	}
	for _, p := range append(slices.Clone(drained), asked...) {
		if perPod[p.Name] != 1 {
			t.Errorf("%s had %d Evictions, want 1", p.Name, perPod[p.Name])
		}
	}
	// Under auto, the framework's controller stood aside once it saw the other's Evictions,
	// unless it created none at all.
	log, err := os.ReadFile(first.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if marks["nodemaint-eviction-controller/second"] > 0 && !strings.Contains(string(log), "another Eviction controller answers") {
		t.Errorf("the framework's controller (auto) does not say that another Eviction controller answers")
	}
}
