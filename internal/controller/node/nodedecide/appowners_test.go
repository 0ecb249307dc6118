package nodedecide

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
)

// evicting is a maintenance that drains and evicts after a response timeout of 5m.
func evicting(name string) *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(t0.Add(-2 * time.Hour))},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true, Reason: "kernel upgrade",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Minute}},
	}
}

// webBudget is the budget web, minAvailable 3, with 2 of its 3 pods healthy.
func webBudget() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", UID: "pdb-web"},
		Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3))},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 2, DesiredHealthy: 3, ExpectedPods: 3}}
}

var webDeployment = &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web", UID: "deploy-web"}

func refused(pods ...string) map[types.UID]drain.Refusal {
	out := map[types.UID]drain.Refusal{}
	for _, p := range pods {
		out[types.UID(p)] = drain.Refusal{NotBefore: t0.Add(2 * time.Second), Reason: nodemaintv1alpha1.BlockedReasonPodDisruptionBudget,
			Message: "Cannot evict pod as it would violate the pod's disruption budget."}
	}
	return out
}

func eventsOf(evs []AppOwnerEvent) string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s/%s %s %s", ev.Reason, ev.Regarding.Kind, ev.Regarding.Name, ev.Maintenance.Name, ev.Note))
	}
	return strings.Join(out, "\n")
}

// Two pods of one Deployment whose budget refuses their evictions: one Event on the budget and
// one on the Deployment, each naming the node, the maintenance, both pods and what would unblock
// them; none for a pod the drain does not wait on.
func TestBudgetHoldsTellTheBudgetAndTheWorkload(t *testing.T) {
	nm := evicting("kernel")
	node := cordonedNode(nil)
	node.Annotations["nodemaint.dev/maintenances"] = "kernel=Drain"
	pods := []*corev1.Pod{replicaPod("web-1", t0.Add(-time.Hour), nil), replicaPod("web-2", t0.Add(-time.Hour), nil), replicaPod("quiet", t0.Add(-10*time.Second), nil)}
	obs := observeClassed(node, pods, false, nil, nm)
	obs.Refusals = refused("web-1", "web-2")
	d := Decide(obs, t0)
	if len(d.Holds) != 2 {
		t.Fatalf("holds %+v; want web-1 and web-2 held by their budget", d.Holds)
	}
	for i, h := range d.Holds {
		if h.Reason != ReasonBudgetBlocksDrain {
			t.Fatalf("hold %d: reason %s; want %s", i, h.Reason, ReasonBudgetBlocksDrain)
		}
	}
	holders := Holders{
		Budgets: map[types.UID][]*policyv1.PodDisruptionBudget{"web-1": {webBudget()}, "web-2": {webBudget()}},
		Owners:  map[types.UID]*corev1.ObjectReference{"web-1": webDeployment, "web-2": webDeployment},
	}
	evs := AppOwnerEvents("n1", d.Holds, holders, t0)
	if len(evs) != 2 {
		t.Fatalf("events:\n%s\nwant one on the budget, one on the Deployment", eventsOf(evs))
	}
	for _, ev := range evs {
		if ev.Reason != ReasonBudgetBlocksDrain {
			t.Errorf("%s %s: reason %s; want %s", ev.Regarding.Kind, ev.Regarding.Name, ev.Reason, ReasonBudgetBlocksDrain)
		}
		if ev.Maintenance.Name != "kernel" {
			t.Errorf("%s %s: maintenance %s; want kernel", ev.Regarding.Kind, ev.Regarding.Name, ev.Maintenance.Name)
		}
		if ev.Regarding.Namespace != "app" || ev.Regarding.Name != "web" {
			t.Errorf("event regarding %s/%s; want app/web", ev.Regarding.Namespace, ev.Regarding.Name)
		}
		for _, want := range []string{"NodeMaintenance kernel", "node n1", "web-1, web-2", "allows 0 disruptions: 2 of 3 pods healthy, minAvailable 3",
			"make the unhealthy pods healthy, scale up or relax the budget"} {
			if !strings.Contains(ev.Note, want) {
				t.Errorf("%s %s: note %q does not say %q", ev.Regarding.Kind, ev.Regarding.Name, ev.Note, want)
			}
		}
	}
	if evs[0].Regarding.Kind != "PodDisruptionBudget" || evs[0].Regarding.UID != "pdb-web" {
		t.Errorf("first event regarding %+v; want the budget (PodDisruptionBudget pdb-web)", evs[0].Regarding)
	}
	if evs[1].Regarding != *webDeployment {
		t.Errorf("second event regarding %+v; want the Deployment %+v", evs[1].Regarding, *webDeployment)
	}
	// Every pod healthy: the budget's own rule is what holds it.
	healthy := webBudget()
	healthy.Status.CurrentHealthy = 3
	holders.Budgets["web-1"], holders.Budgets["web-2"] = []*policyv1.PodDisruptionBudget{healthy}, []*policyv1.PodDisruptionBudget{healthy}
	evs = AppOwnerEvents("n1", d.Holds, holders, t0)
	if !strings.HasSuffix(evs[0].Note, "allows 0 disruptions: 3 of 3 pods healthy, minAvailable 3; scale up or relax the budget") {
		t.Errorf("note %q", evs[0].Note)
	}
}

// Events are aggregated per object, maintenance and reason: two maintenances draining the node
// make two Events per object, a pod no budget in the cache selects has its refusal quoted on its
// workload, and a bare pod has no workload to tell.
func TestAppOwnerEventsPerMaintenance(t *testing.T) {
	a, b := evicting("a"), evicting("b")
	node := cordonedNode(nil)
	bare := replicaPod("bare", t0.Add(-time.Hour), nil)
	bare.OwnerReferences = nil
	pods := []*corev1.Pod{replicaPod("web-1", t0.Add(-time.Hour), nil), replicaPod("other", t0.Add(-time.Hour), nil), bare}
	obs := observeClassed(node, pods, false, nil, a, b)
	obs.Refusals = refused("web-1", "other", "bare")
	d := Decide(obs, t0)
	if len(d.Holds) != 3 {
		t.Fatalf("holds %+v; want the three pods", d.Holds)
	}
	sts := &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "app", Name: "db", UID: "sts"}
	holders := Holders{
		Budgets: map[types.UID][]*policyv1.PodDisruptionBudget{"web-1": {webBudget()}, "bare": {webBudget()}},
		Owners:  map[types.UID]*corev1.ObjectReference{"web-1": webDeployment, "other": sts},
	}
	evs := AppOwnerEvents("n1", d.Holds, holders, t0)
	count := map[string]int{}
	for _, ev := range evs {
		count[ev.Regarding.Kind+"/"+ev.Regarding.Name]++
		if ev.Regarding.Kind == "StatefulSet" && !strings.Contains(ev.Note, "Cannot evict pod as it would violate") {
			t.Errorf("note %q; want the refusal quoted", ev.Note)
		}
	}
	if len(evs) != 6 {
		t.Fatalf("events:\n%s\nwant one per object (budget web, Deployment web, StatefulSet db) and maintenance", eventsOf(evs))
	}
	for _, obj := range []string{"PodDisruptionBudget/web", "Deployment/web", "StatefulSet/db"} {
		if count[obj] != 2 {
			t.Errorf("%d events on %s; want one per maintenance, 2", count[obj], obj)
		}
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[ev.Key()] {
			t.Errorf("two events of key %s", ev.Key())
		}
		seen[ev.Key()] = true
	}
}

// A signal-only maintenance never evicts: a pod whose owner has not answered for
// UnansweredAfter holds the drain for good, and its workload is told; before that, the decision
// looks again when it will be.
func TestUnansweredRequestTellsTheWorkload(t *testing.T) {
	nm := evicting("signal")
	nm.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	node := cordonedNode(nil)
	d := Decide(observeClassed(node, []*corev1.Pod{replicaPod("web-1", t0.Add(-30*time.Second), nil)}, false, nil, nm), t0)
	if len(d.Holds) != 0 {
		t.Fatalf("holds %+v; want none yet", d.Holds)
	}
	if d.RecheckAfter != 31*time.Second {
		t.Fatalf("recheck %v; want a look in 31s", d.RecheckAfter)
	}
	d = Decide(observeClassed(node, []*corev1.Pod{replicaPod("web-1", t0.Add(-2*time.Minute), nil)}, false, nil, nm), t0)
	if len(d.Holds) != 1 {
		t.Fatalf("holds %+v; want web-1 unanswered, never evicted", d.Holds)
	}
	if d.Holds[0].Reason != ReasonEvacuationUnanswered {
		t.Fatalf("hold reason %s; want %s", d.Holds[0].Reason, ReasonEvacuationUnanswered)
	}
	if d.Holds[0].EvictIn != 0 {
		t.Fatalf("hold evicts in %v; want never (0)", d.Holds[0].EvictIn)
	}
	evs := AppOwnerEvents("n1", d.Holds, Holders{Owners: map[types.UID]*corev1.ObjectReference{"web-1": webDeployment}}, t0)
	if len(evs) != 1 {
		t.Fatalf("events:\n%s\nwant one on the Deployment", eventsOf(evs))
	}
	if evs[0].Regarding != *webDeployment {
		t.Fatalf("event regarding %+v; want the Deployment %+v", evs[0].Regarding, *webDeployment)
	}
	if evs[0].Reason != ReasonEvacuationUnanswered {
		t.Fatalf("event reason %s; want %s", evs[0].Reason, ReasonEvacuationUnanswered)
	}
	for _, want := range []string{"NodeMaintenance signal waits to drain node n1", "pod web-1", "has not answered nodemaint's evacuation request", "for 2m0s", "nodemaint does not evict it"} {
		if !strings.Contains(evs[0].Note, want) {
			t.Errorf("note %q does not say %q", evs[0].Note, want)
		}
	}

	// Under an evicting maintenance, the Event says when the eviction comes.
	d = Decide(observeClassed(node, []*corev1.Pod{replicaPod("web-1", t0.Add(-2*time.Minute), nil)}, false, nil, evicting("kernel")), t0)
	if len(d.Holds) != 1 {
		t.Fatalf("holds %+v; want web-1 unanswered, evicted in 3m1s", d.Holds)
	}
	if d.Holds[0].EvictIn != 3*time.Minute+time.Second {
		t.Fatalf("hold evicts in %v; want 3m1s", d.Holds[0].EvictIn)
	}
	evs = AppOwnerEvents("n1", d.Holds, Holders{Owners: map[types.UID]*corev1.ObjectReference{"web-1": webDeployment}}, t0)
	if !strings.Contains(evs[0].Note, "it is evicted in 3m1s") {
		t.Errorf("note %q", evs[0].Note)
	}
}

// However many pods a node holds, a decision names at most MaxHolds, and the Events they make are
// one per object, maintenance and reason.
func TestAppOwnerEventsBounded(t *testing.T) {
	nm := evicting("kernel")
	var pods []*corev1.Pod
	var names []string
	for i := range 500 {
		name := fmt.Sprintf("web-%d", i)
		pods = append(pods, replicaPod(name, t0.Add(-time.Hour), nil))
		names = append(names, name)
	}
	obs := observeClassed(cordonedNode(nil), pods, false, nil, nm)
	obs.Refusals = refused(names...)
	d := Decide(obs, t0)
	if len(d.Holds) != MaxHolds {
		t.Fatalf("%d holds; want %d", len(d.Holds), MaxHolds)
	}
	holders := Holders{Budgets: map[types.UID][]*policyv1.PodDisruptionBudget{}, Owners: map[types.UID]*corev1.ObjectReference{}}
	for _, name := range names {
		holders.Budgets[types.UID(name)] = []*policyv1.PodDisruptionBudget{webBudget()}
		holders.Owners[types.UID(name)] = webDeployment
	}
	evs := AppOwnerEvents("n1", d.Holds, holders, t0)
	if len(evs) != 2 {
		t.Fatalf("events:\n%s\nwant two, naming 5 pods and 15 more", eventsOf(evs))
	}
	if !strings.Contains(evs[0].Note, "and 15 more") {
		t.Errorf("note %q; want it to name 5 pods and 15 more", evs[0].Note)
	}
	if len(evs[0].Note) > 1024 {
		t.Errorf("note of %d bytes; want at most 1024", len(evs[0].Note))
	}
}
