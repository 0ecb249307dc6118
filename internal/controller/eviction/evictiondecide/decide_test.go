package evictiondecide

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func testPod(responders ...corev1.EvictionResponder) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"},
		Spec:       corev1.PodSpec{EvictionResponders: responders},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func testRequest(name, requester string, uid types.UID, intent lifecyclev1alpha1.EvictionRequestIntent) lifecyclev1alpha1.EvictionRequest {
	return lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("req-" + name), Generation: 1},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: "p", UID: uid}},
			Requester: requester, Intent: intent,
		},
	}
}

// settle applies decisions until none changes anything, at now, and returns the last
// observation; it fails after 10 rounds.
func settle(t *testing.T, obs Observation, now time.Time) (Observation, Decision) {
	t.Helper()
	for range 10 {
		d := Decide(obs, now)
		if d.Create == nil && len(d.Status) == 0 && len(d.RequestStatus) == 0 && len(d.Delete) == 0 && len(d.Meta) == 0 {
			return obs, d
		}
		obs = apply(obs, d)
	}
	t.Fatalf("no fixed point after 10 decisions")
	return obs, Decision{}
}

// apply is what the reconciler's writes make of the observation.
func apply(obs Observation, d Decision) Observation {
	next := obs
	next.Requests = nil
	for _, r := range obs.Requests {
		for _, w := range d.RequestStatus {
			if w.Name == r.Name {
				r = *w.DeepCopy()
			}
		}
		next.Requests = append(next.Requests, r)
	}
	next.Evictions = nil
	for _, e := range obs.Evictions {
		deleted := false
		for _, del := range d.Delete {
			deleted = deleted || del.Name == e.Name
		}
		if deleted {
			continue
		}
		for _, w := range d.Meta {
			if w.Name == e.Name {
				e.OwnerReferences, e.Labels = w.OwnerReferences, w.Labels
			}
		}
		for _, w := range d.Status {
			if w.Name == e.Name {
				e.Status = *w.Status.DeepCopy()
			}
		}
		next.Evictions = append(next.Evictions, e)
	}
	if d.Create != nil {
		c := d.Create.DeepCopy()
		c.UID = types.UID("ev-" + c.Name)
		c.Generation = 1
		next.Evictions = append(next.Evictions, *c)
	}
	return next
}

func stateOf(e lifecyclev1alpha1.Eviction) string {
	s := ""
	for _, r := range e.Status.TargetResponders {
		s += fmt.Sprintf("%s=%s ", r.Name, r.State)
	}
	return s
}

func setResponder(e *lifecyclev1alpha1.Eviction, name string, f func(*lifecyclev1alpha1.ResponderStatus)) {
	for i := range e.Status.Responders {
		if e.Status.Responders[i].Name == name {
			f(&e.Status.Responders[i])
		}
	}
}

func TestResponderOrder(t *testing.T) {
	pod := testPod(
		corev1.EvictionResponder{Name: "b.example.com/x", Priority: ptr.To[int32](10000)},
		corev1.EvictionResponder{Name: "z.acme.io/x", Priority: ptr.To[int32](10000)},
		corev1.EvictionResponder{Name: "db.example.org/y", Priority: ptr.To[int32](50000)},
		corev1.EvictionResponder{Name: "a.example.com/x", Priority: ptr.To[int32](10000)},
	)
	var got []string
	for _, r := range Responders(pod) {
		got = append(got, r.Name)
	}
	want := []string{"db.example.org/y", "a.example.com/x", "b.example.com/x", "z.acme.io/x", evictionrequest.ImperativeEvictor}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v (priority, then the domain from its top label: com < io)", got, want)
	}
}

// descheduler is a requester other than nodemaint's drain: the imperative evictor evicts the pods
// it asks for.
const descheduler = "other.example.com/descheduler"

// TestDecideHeldForDrain: a pod only nodemaint's drain asks for is never evicted by the imperative
// evictor, which holds it (the drain evicts by its maintenances' policy); once another requester
// asks too, the imperative evictor evicts it.
func TestDecideHeldForDrain(t *testing.T) {
	obs := Observation{
		Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Pod: testPod(),
		Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", evictionrequest.Requester, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)},
	}
	obs, d := settle(t, obs, t0)
	if d.Evict != nil {
		t.Fatalf("evicted; want the pod held for the drain")
	}
	if got, want := stateOf(obs.Evictions[0]), evictionrequest.ImperativeEvictor+"=Active "; got != want {
		t.Fatalf("responders %q; want %q", got, want)
	}
	for _, rs := range obs.Evictions[0].Status.Responders {
		if got := ptr.Deref(rs.Message, "<nil>"); got != evictionrequest.HeldForDrain {
			t.Fatalf("the imperative evictor says %q, want %q", got, evictionrequest.HeldForDrain)
		}
	}
	// An hour later, looked at as often as it asks to be, still held and heartbeating: no
	// response timeout of the drain's runs here.
	now := t0
	for now.Before(t0.Add(time.Hour)) {
		if d.RecheckAfter <= 0 || d.RecheckAfter > 5*time.Minute {
			t.Fatalf("recheck after %v", d.RecheckAfter)
		}
		now = now.Add(d.RecheckAfter)
		obs, d = settle(t, obs, now)
		if d.Evict != nil {
			t.Fatalf("at %v: evicted; want the pod still held", now.Sub(t0))
		}
		if got, want := stateOf(obs.Evictions[0]), evictionrequest.ImperativeEvictor+"=Active "; got != want {
			t.Fatalf("at %v: responders %q; want %q", now.Sub(t0), got, want)
		}
	}
	obs.Requests = append(obs.Requests, testRequest("d", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction))
	if _, d = settle(t, obs, now); d.Evict == nil {
		t.Fatal("the imperative evictor does not evict a pod another requester asks for")
	}
}

// TestDecideHeartbeat: the active responder keeps its turn while it heartbeats within the
// deadline, is interrupted past it, and the imperative evictor then evicts.
func TestDecideHeartbeat(t *testing.T) {
	const op = "op.example.com/x"
	obs := Observation{
		Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute,
		Pod:      testPod(corev1.EvictionResponder{Name: op, Priority: ptr.To[int32](10000)}),
		Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)},
	}
	obs, d := settle(t, obs, t0)
	if len(obs.Evictions) != 1 {
		t.Fatalf("first: %d Evictions; want 1 (%v)", len(obs.Evictions), obs.Evictions)
	}
	if got, want := stateOf(obs.Evictions[0]), op+"=Active "+evictionrequest.ImperativeEvictor+"=Inactive "; got != want {
		t.Fatalf("first: responders %q; want %q", got, want)
	}
	if d.Evict != nil {
		t.Fatalf("first: evicted; want the active responder's turn")
	}
	if d.RecheckAfter != 20*time.Minute {
		t.Fatalf("first: recheck after %v; want 20m", d.RecheckAfter)
	}
	// A heartbeat at 19 minutes keeps it active at 39.
	setResponder(&obs.Evictions[0], op, func(r *lifecyclev1alpha1.ResponderStatus) {
		r.HeartbeatTime = ptr.To(metav1.NewTime(t0.Add(19 * time.Minute)))
	})
	obs, d = settle(t, obs, t0.Add(38*time.Minute))
	if got, want := stateOf(obs.Evictions[0]), op+"=Active "+evictionrequest.ImperativeEvictor+"=Inactive "; got != want {
		t.Fatalf("at 38m: responders %q; want %q", got, want)
	}
	if d.Evict != nil {
		t.Fatalf("at 38m: evicted; want the active responder's turn")
	}
	now := t0.Add(39*time.Minute + time.Second)
	d = Decide(obs, now)
	if d.Evict == nil {
		t.Errorf("past the deadline: evicted nothing; want the imperative evictor to evict")
	}
	if len(d.Status) != 1 {
		t.Fatalf("past the deadline: %d status writes; want 1 (%v)", len(d.Status), d.Status)
	}
	if got, want := stateOf(*d.Status[0]), op+"=Interrupted "+evictionrequest.ImperativeEvictor+"=Active "; got != want {
		t.Fatalf("past the deadline: responders %q; want %q", got, want)
	}
}

// TestDecideBudgetPacedRetry: a refused eviction backs off, and is tried again before the back-off
// ends only once the pod's budget changed since the refusal and allows it (or the pod is not Ready
// and the budget lets an unhealthy pod go); a budget that changed but still allows nothing, or one
// of another spec than its status, waits.
func TestDecideBudgetPacedRetry(t *testing.T) {
	pod := testPod()
	pod.Labels = map[string]string{"app": "db"}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pdb := func(rv string, allowed int32, mutate ...func(*policyv1.PodDisruptionBudget)) []policyv1.PodDisruptionBudget {
		b := policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", ResourceVersion: rv, Generation: 1},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
			Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed, CurrentHealthy: 2, DesiredHealthy: 2},
		}
		for _, m := range mutate {
			m(&b)
		}
		return []policyv1.PodDisruptionBudget{b}
	}
	obs := Observation{
		Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Pod: pod,
		Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)},
		Budgets:  pdb("10", 1),
	}
	obs, d := settle(t, obs, t0)
	if d.Evict == nil {
		t.Fatalf("the imperative evictor does not evict at first: %s", stateOf(obs.Evictions[0]))
	}
	// Refused by the budget at its version 10 (another pod took the disruption first): back off 8s.
	obs.EvictNotBefore, obs.EvictMessage, obs.EvictBudgets = t0.Add(8*time.Second), "The disruption budget db needs 2 healthy pods and has 2 currently", BudgetsVersion(obs.Budgets)
	obs.EvictBudgetRefused = true
	obs, _ = settle(t, obs, t0.Add(time.Second))
	now := t0.Add(2 * time.Second)
	for _, c := range []struct {
		name    string
		budgets []policyv1.PodDisruptionBudget
		ready   bool
		evict   bool
	}{
		{"unchanged, as refused", pdb("10", 1), true, false},
		{"changed, allowing nothing", pdb("11", 0), true, false},
		{"changed, allowing one", pdb("12", 1), true, true},
		{"changed, status of an older spec", pdb("12", 1, func(b *policyv1.PodDisruptionBudget) { b.Generation = 2 }), true, false},
		{"changed, allowing nothing, the pod unready and the healthy pods at the desired count", pdb("13", 0), false, true},
		{"changed, allowing nothing, the pod unready and the budget below its desired count", pdb("13", 0, func(b *policyv1.PodDisruptionBudget) { b.Status.CurrentHealthy = 1 }), false, false},
		{"changed, allowing nothing, the pod unready, AlwaysAllow", pdb("13", 0, func(b *policyv1.PodDisruptionBudget) {
			b.Status.CurrentHealthy = 1
			b.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
		}), false, true},
		{"no budget any more", nil, true, false},
	} {
		o := obs
		o.Budgets = c.budgets
		o.Pod = pod.DeepCopy()
		if !c.ready {
			o.Pod.Status.Conditions[0].Status = corev1.ConditionFalse
		}
		d := Decide(o, now)
		if (d.Evict != nil) != c.evict {
			t.Errorf("%s: evict %v, want %v", c.name, d.Evict != nil, c.evict)
		}
		if !c.evict && d.RecheckAfter != 6*time.Second {
			t.Errorf("%s: recheck after %v, want the back-off's 6s", c.name, d.RecheckAfter)
		}
	}
	// A pending pod's eviction ignores its budgets.
	pending := obs
	pending.Budgets, pending.Pod = pdb("13", 0), pod.DeepCopy()
	pending.Pod.Status.Phase = corev1.PodPending
	if d := Decide(pending, now); d.Evict == nil {
		t.Errorf("changed, allowing nothing, the pod pending: no eviction")
	}
	// The back-off over: a budget's refusal is not tried again while the budget allows nothing (the
	// API server would refuse again); the back-off decides where the budget as read allows it, or
	// where the refusal was not a budget's.
	later := t0.Add(9 * time.Second)
	for _, c := range []struct {
		name           string
		budgets        []policyv1.PodDisruptionBudget
		refusedAt      string
		budgetsRefused bool
		evict          bool
	}{
		{"a budget's refusal, the budget as it was, allowing nothing", pdb("11", 0), "db=11", true, false},
		{"a budget's refusal, the budget changed, allowing nothing", pdb("12", 0), "db=11", true, false},
		{"a budget's refusal, the budget as it was, allowing one", pdb("10", 1), "db=10", true, true},
		{"another refusal, the budget as it was, allowing nothing", pdb("11", 0), "db=11", false, true},
		{"a budget's refusal, no budget read", nil, "db=11", true, true},
	} {
		o := obs
		o.Budgets, o.EvictBudgets, o.EvictBudgetRefused = c.budgets, c.refusedAt, c.budgetsRefused
		if d := Decide(o, later); (d.Evict != nil) != c.evict {
			t.Errorf("back-off over, %s: evict %v, want %v", c.name, d.Evict != nil, c.evict)
		}
	}
}

// TestDecideEvictedOnce: once the imperative evictor's eviction went through, it is not made again
// while the pod as read does not show its deletion yet.
func TestDecideEvictedOnce(t *testing.T) {
	obs := Observation{
		Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Pod: testPod(),
		Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)},
	}
	obs, d := settle(t, obs, t0)
	if d.Evict == nil {
		t.Fatalf("the imperative evictor does not evict: %s", stateOf(obs.Evictions[0]))
	}
	obs.Evicted = true
	obs, d = settle(t, obs, t0.Add(100*time.Millisecond))
	if d.Evict != nil {
		t.Fatalf("evicted again")
	}
	for _, r := range obs.Evictions[0].Status.Responders {
		if r.Name != evictionrequest.ImperativeEvictor {
			continue
		}
		if got, want := ptr.Deref(r.Message, "<nil>"), imperativeMessage(evicted, "p", "", 0); got != want {
			t.Fatalf("the imperative evictor's message: %q; want %q", got, want)
		}
	}
}

// TestDecideStandsAside: two Eviction controllers on one pod. The one whose Eviction came second
// collects its own and writes nothing else; the other's Eviction is never written; while another
// controller answers in the cluster (Yield), no Eviction is created, and an own one is carried on.
func TestDecideStandsAside(t *testing.T) {
	req := testRequest("r", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)
	base := Observation{Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Pod: testPod(),
		Requests: []lifecyclev1alpha1.EvictionRequest{req}}
	// Each controller's own Eviction, as it settles alone: the imperative evictor evicting.
	mine, _ := settle(t, with(base, "me", ""), t0)
	theirs, _ := settle(t, with(base, "them", ""), t0)
	if len(mine.Evictions) != 1 {
		t.Fatalf("%d Evictions settled; want 1 (%+v)", len(mine.Evictions), mine.Evictions)
	}
	if got := mine.Evictions[0].Labels[evictionrequest.ControllerLabel]; got != "me" {
		t.Fatalf("the Eviction's %s is %q; want its creator's mark, me", evictionrequest.ControllerLabel, got)
	}
	other := theirs.Evictions[0]
	other.Name, other.UID = "pod-2-p", "ev-theirs"

	t.Run("another's Eviction, none of mine", func(t *testing.T) {
		obs := with(base, "me", "")
		obs.Evictions = []lifecyclev1alpha1.Eviction{other}
		d := Decide(obs, t0)
		standsAside(t, d)
		if d.Create != nil {
			t.Errorf("created %s; want none", d.Create.Name)
		}
		if d.Evict != nil {
			t.Errorf("evicted; want not")
		}
		if n := len(d.RequestStatus) + len(d.Status) + len(d.Meta) + len(d.Delete); n > 0 {
			t.Errorf("%d request status, status, meta and delete writes; want none (%+v)", n, d)
		}
	})
	t.Run("both, theirs older", func(t *testing.T) {
		obs := with(base, "me", "")
		own := mine.Evictions[0]
		own.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
		obs.Evictions = []lifecyclev1alpha1.Eviction{own, other}
		d := Decide(obs, t0)
		standsAside(t, d)
		if len(d.Delete) != 1 {
			t.Fatalf("%d deletes; want its own younger Eviction collected (%+v)", len(d.Delete), d)
		}
		if d.Delete[0].Name != own.Name {
			t.Errorf("deleted %s; want its own younger Eviction %s", d.Delete[0].Name, own.Name)
		}
		if d.Evict != nil {
			t.Errorf("evicted; want not")
		}
		if n := len(d.RequestStatus) + len(d.Status); n > 0 {
			t.Errorf("%d request status and status writes; want none (%+v)", n, d)
		}
	})
	t.Run("both, mine older", func(t *testing.T) {
		obs := with(base, "me", "")
		o := other
		o.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
		obs.Evictions = []lifecyclev1alpha1.Eviction{mine.Evictions[0], o}
		d := Decide(obs, t0)
		standsAside(t, d)
		if len(d.Delete) > 0 {
			t.Errorf("%d deletes while another's Eviction names the pod; want none", len(d.Delete))
		}
		if d.Evict != nil {
			t.Errorf("evicted while another's Eviction names the pod; want not")
		}
		if n := len(d.RequestStatus) + len(d.Status); n > 0 {
			t.Errorf("%d request status and status writes while another's Eviction names the pod; want none (%+v)", n, d)
		}
	})
	t.Run("yield, none of mine", func(t *testing.T) {
		d := Decide(with(base, "me", "them"), t0)
		standsAside(t, d)
		if d.Create != nil {
			t.Errorf("created %s while another controller answers; want none", d.Create.Name)
		}
		if len(d.RequestStatus) > 0 {
			t.Errorf("%d request status writes while another controller answers; want none", len(d.RequestStatus))
		}
	})
	t.Run("yield, mine carried on", func(t *testing.T) {
		obs := with(base, "me", "them")
		obs.Evictions = mine.Evictions
		d := Decide(obs, t0)
		if d.StandAside != "" {
			t.Errorf("stand aside %q; want its own Eviction carried on", d.StandAside)
		}
		if d.Evict == nil {
			t.Errorf("evicted nothing; want its own Eviction carried on (%+v)", d)
		}
	})
}

// standsAside fails unless the decision gives a reason to stand aside.
func standsAside(t *testing.T, d Decision) {
	t.Helper()
	if d.StandAside == "" {
		t.Fatalf("no stand-aside reason; want one (%+v)", d)
	}
}

// TestDecideNoUnreadEviction: a terminating pod whose requests all go with it gets no new
// Eviction (seen in TestTwoEvictionControllers: its first Eviction, collected with its requests
// once the pod was deleted, was seen gone before the pod, and a second was made); a request that
// stays (another requester's) still gets one.
func TestDecideNoUnreadEviction(t *testing.T) {
	owned := testRequest("r", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-p"}}
	obs := Observation{Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Pod: testPod(),
		Requests: []lifecyclev1alpha1.EvictionRequest{owned}}
	if d := Decide(obs, t0); d.Create == nil {
		t.Fatalf("a live pod's request makes no Eviction: %+v", d)
	}
	obs.Pod.DeletionTimestamp = &metav1.Time{Time: t0}
	if d := Decide(obs, t0); d.Create != nil {
		t.Fatalf("an Eviction made for a terminating pod whose requests go with it: %+v", d.Create)
	}
	obs.Requests = append(obs.Requests, testRequest("other", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction))
	if d := Decide(obs, t0); d.Create == nil {
		t.Fatalf("a terminating pod's request that stays gets no Eviction: %+v", d)
	}
}

// with is the observation as the named controller makes it, yielding to yield.
func with(obs Observation, controller, yield string) Observation {
	obs.Controller, obs.Yield = controller, yield
	return obs
}

func TestSelectBudgets(t *testing.T) {
	pod := testPod()
	pod.Labels = map[string]string{"app": "db", "tier": "data"}
	sel := func(ns, name string, s *metav1.LabelSelector) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: s}}
	}
	pdbs := []policyv1.PodDisruptionBudget{
		sel("ns", "db", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}),
		sel("ns", "web", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}),
		sel("other", "db", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}),
		sel("ns", "data", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"data"}}}}),
		sel("ns", "none", nil),
		sel("ns", "invalid", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}),
	}
	var got []string
	for _, b := range SelectBudgets(pod, pdbs) {
		got = append(got, b.Namespace+"/"+b.Name)
	}
	if fmt.Sprint(got) != "[ns/db ns/data]" {
		t.Fatalf("selected %v, want [ns/db ns/data]", got)
	}
	if v := BudgetsVersion([]policyv1.PodDisruptionBudget{
		{ObjectMeta: metav1.ObjectMeta{Name: "b", ResourceVersion: "7"}}, {ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "9"}},
	}); v != "a=9,b=7" {
		t.Fatalf("version %q", v)
	}
}

// TestDecideGone: a pod gone while a responder of its own is active: the Eviction is kept; the
// responder has GracefulCompletionDelay from when the controller saw the pod gone to report its
// completion, then it is interrupted; the Eviction and its requests say TargetEvicted (PodDeleted).
func TestDecideGone(t *testing.T) {
	obs := Observation{
		Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Controller: "me",
		Pod:      testPod(corev1.EvictionResponder{Name: "a.example.com/x", Priority: ptr.To[int32](10000)}),
		Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)},
	}
	obs, _ = settle(t, obs, t0)
	obs.Pod = nil
	obs.EndedAt = map[types.UID]time.Time{"uid-p": t0.Add(time.Minute)}
	obs, d := settle(t, obs, t0.Add(time.Minute+time.Second))
	if len(obs.Evictions) != 1 {
		t.Fatalf("within the grace: %d Evictions; want 1", len(obs.Evictions))
	}
	if got, want := stateOf(obs.Evictions[0]), "a.example.com/x=Active imperative-eviction.k8s.io/evictor=Inactive "; got != want {
		t.Fatalf("within the grace: responders %q; want %q", got, want)
	}
	if d.RecheckAfter != 4*time.Second {
		t.Fatalf("within the grace: recheck after %v; want 4s", d.RecheckAfter)
	}
	obs, _ = settle(t, obs, t0.Add(time.Minute+GracefulCompletionDelay))
	e := obs.Evictions[0]
	if got, want := stateOf(e), "a.example.com/x=Interrupted imperative-eviction.k8s.io/evictor=Inactive "; got != want {
		t.Fatalf("past the grace: responders %q; want %q", got, want)
	}
	if !meta.IsStatusConditionTrue(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) {
		t.Fatalf("past the grace: the Eviction's conditions %+v; want TargetEvicted True", e.Status.Conditions)
	}
	hasCondition(t, "request", obs.Requests[0].Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted),
		metav1.ConditionTrue, string(lifecyclev1alpha1.EvictionConditionReasonPodDeleted))
}

// hasCondition fails unless conds hold a condition of the type with the status and reason, and
// returns it.
func hasCondition(t *testing.T, what string, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		t.Fatalf("%s: no %s condition; want %s %s (%+v)", what, typ, status, reason, conds)
	}
	if c.Status != status {
		t.Errorf("%s: %s is %s; want %s", what, typ, c.Status, status)
	}
	if c.Reason != reason {
		t.Errorf("%s: %s reason %s; want %s", what, typ, c.Reason, reason)
	}
	return c
}

// TestDecideInvalid: a request for a pod that does not exist, of another UID, or in a scheduling
// group is invalid (Failed True EvictionInvalid, TargetEvicted False EvictionFailed) and gets no
// Eviction; withdrawn, it keeps its conditions and observes its generation.
func TestDecideInvalid(t *testing.T) {
	sg := testPod()
	sg.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		uid  types.UID
		want string
	}{
		"not found":        {nil, "uid-p", "Target pod not found."},
		"UID mismatch":     {testPod(), "uid-x", "Target pod UID mismatch: expected uid-x, got uid-p."},
		"scheduling group": {sg, "uid-p", "Target pod references a SchedulingGroup. Eviction is currently not supported."},
	} {
		obs := Observation{Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Controller: "me", Pod: tc.pod,
			Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", descheduler, tc.uid, lifecyclev1alpha1.EvictionRequestIntentEviction)}}
		obs, _ = settle(t, obs, t0)
		first := obs.Requests[0].Status
		if len(obs.Evictions) != 0 {
			t.Errorf("%s: %d Evictions; want none", name, len(obs.Evictions))
		}
		failed := hasCondition(t, name, first.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed),
			metav1.ConditionTrue, string(lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid))
		if failed.Message != tc.want {
			t.Errorf("%s: Failed message %q; want %q", name, failed.Message, tc.want)
		}
		hasCondition(t, name, first.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted),
			metav1.ConditionFalse, string(lifecyclev1alpha1.EvictionConditionReasonEvictionFailed))
		if got := ptr.Deref(first.ObservedGeneration, 0); got != 1 {
			t.Errorf("%s: observed generation %d; want 1", name, got)
		}
		obs.Requests[0].Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
		obs.Requests[0].Generation = 2
		obs, _ = settle(t, obs, t0.Add(time.Minute))
		got := obs.Requests[0].Status
		if g := ptr.Deref(got.ObservedGeneration, 0); g != 2 {
			t.Errorf("%s withdrawn: observed generation %d; want 2", name, g)
		}
		if want := withGeneration(first.Conditions, 2); !equality.Semantic.DeepEqual(got.Conditions, want) {
			t.Errorf("%s withdrawn: conditions %+v; want those kept, %+v", name, got.Conditions, want)
		}
	}
}

func withGeneration(conds []metav1.Condition, gen int64) []metav1.Condition {
	out := slices.Clone(conds)
	for i := range out {
		out[i].ObservedGeneration = gen
	}
	return out
}

// TestDecideCanceledThenAskedAgain: withdrawn, the Eviction is canceled (the active responder
// Canceled, Failed True CanceledDueToNoRequesters, TargetEvicted False EvictionFailed), copied to
// the request; asked again, the canceled Eviction stays and the next is pod-2-<pod>.
func TestDecideCanceledThenAskedAgain(t *testing.T) {
	obs := Observation{
		Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Controller: "me",
		Pod:      testPod(corev1.EvictionResponder{Name: "a.example.com/x", Priority: ptr.To[int32](10000)}),
		Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)},
	}
	obs, _ = settle(t, obs, t0)
	obs.Requests[0].Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	obs, _ = settle(t, obs, t0.Add(time.Minute))
	e := obs.Evictions[0]
	failed := meta.FindStatusCondition(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed))
	evicted := meta.FindStatusCondition(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted))
	if got, want := stateOf(e), "a.example.com/x=Canceled imperative-eviction.k8s.io/evictor=Inactive "; got != want {
		t.Errorf("withdrawn: responders %q; want %q", got, want)
	}
	if want := string(lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters); failed.Reason != want {
		t.Errorf("withdrawn: Failed reason %s; want %s", failed.Reason, want)
	}
	if want := string(lifecyclev1alpha1.EvictionConditionReasonEvictionFailed); evicted.Reason != want {
		t.Errorf("withdrawn: TargetEvicted reason %s; want %s", evicted.Reason, want)
	}
	if !equality.Semantic.DeepEqual(conditionsOf(obs.Requests[0].Status.Conditions), conditionsOf(e.Status.Conditions)) {
		t.Fatalf("request %+v; Eviction %+v", obs.Requests[0].Status.Conditions, e.Status.Conditions)
	}
	obs.Requests[0].Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentEviction
	obs, _ = settle(t, obs, t0.Add(2*time.Minute))
	if len(obs.Evictions) != 2 {
		t.Fatalf("asked again: %d Evictions, the last %s; want 2", len(obs.Evictions), stateOf(obs.Evictions[len(obs.Evictions)-1]))
	}
	if got := obs.Evictions[0].Name; got != "pod-1-p" {
		t.Errorf("asked again: the first Eviction is %s; want pod-1-p", got)
	}
	if got := obs.Evictions[1].Name; got != "pod-2-p" {
		t.Errorf("asked again: the next Eviction is %s; want pod-2-p", got)
	}
	if got, want := stateOf(obs.Evictions[1]), "a.example.com/x=Active imperative-eviction.k8s.io/evictor=Inactive "; got != want {
		t.Errorf("asked again: the next Eviction's responders %q; want %q", got, want)
	}
}

// conditionsOf is the conditions' types, statuses, reasons and messages.
func conditionsOf(conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message))
	}
	slices.Sort(out)
	return out
}

// TestDecideNoFurtherResponder: every responder completed without the pod going: the Eviction
// fails (NoFurtherResponder) and the next one starts over, unless nodemaint's imperative evictor
// was the one that completed without evicting (a DaemonSet pod): that would repeat at once.
func TestDecideNoFurtherResponder(t *testing.T) {
	obs := Observation{
		Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Controller: "me",
		Pod:      testPod(corev1.EvictionResponder{Name: "a.example.com/x", Priority: ptr.To[int32](10000)}),
		Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", descheduler, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)},
	}
	obs.Pod.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
	obs, _ = settle(t, obs, t0)
	setResponder(&obs.Evictions[0], "a.example.com/x", func(r *lifecyclev1alpha1.ResponderStatus) { r.CompletionTime = ptr.To(metav1.NewTime(t0)) })
	obs, _ = settle(t, obs, t0.Add(time.Minute))
	e := obs.Evictions[0]
	if len(obs.Evictions) != 1 {
		t.Fatalf("a DaemonSet pod: %d Evictions; want 1", len(obs.Evictions))
	}
	if got, want := stateOf(e), "a.example.com/x=Completed imperative-eviction.k8s.io/evictor=Completed "; got != want {
		t.Errorf("a DaemonSet pod: responders %q; want %q", got, want)
	}
	failed := meta.FindStatusCondition(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed))
	if want := string(lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder); failed.Reason != want {
		t.Fatalf("a DaemonSet pod: Failed reason %s; want %s", failed.Reason, want)
	}
	// The imperative evictor completed by someone else (upstream's case): the next Eviction.
	obs.Pod.OwnerReferences = nil
	obs.Evictions = nil
	obs.Requests[0].Status = lifecyclev1alpha1.EvictionRequestStatus{}
	obs.EvictNotBefore, obs.EvictMessage = t0.Add(time.Hour), "refused"
	obs, _ = settle(t, obs, t0)
	setResponder(&obs.Evictions[0], "a.example.com/x", func(r *lifecyclev1alpha1.ResponderStatus) { r.CompletionTime = ptr.To(metav1.NewTime(t0)) })
	obs, _ = settle(t, obs, t0.Add(time.Second))
	setResponder(&obs.Evictions[0], evictionrequest.ImperativeEvictor, func(r *lifecyclev1alpha1.ResponderStatus) { r.CompletionTime = ptr.To(metav1.NewTime(t0)) })
	obs, _ = settle(t, obs, t0.Add(2*time.Second))
	if len(obs.Evictions) != 2 {
		t.Fatalf("completed by another: %d Evictions; want 2", len(obs.Evictions))
	}
	if got := obs.Evictions[1].Name; got != "pod-2-p" {
		t.Fatalf("completed by another: the next Eviction is %s; want pod-2-p", got)
	}
}

// endedPastGrace reports whether the Eviction's target ended (gone, replaced, or terminal) and
// the grace of its active responder since it was seen ended ran out.
func endedPastGrace(obs Observation, e *lifecyclev1alpha1.Eviction, now time.Time) bool {
	if e.Spec.Target.Pod == nil {
		return false
	}
	uid := e.Spec.Target.Pod.UID
	if obs.Pod != nil && obs.Pod.UID == uid && !terminal(obs.Pod) {
		return false
	}
	since, ok := obs.EndedAt[uid]
	return ok && !now.Before(since.Add(GracefulCompletionDelay))
}

// FuzzDecide builds observations of one pod with responders, requests (several requesters, any
// intent, some for a former pod of the same name) and an Eviction in whatever state responders
// left it, and checks what a decision must never do: more than one active responder, an eviction
// by anyone but an active imperative evictor, an interruption before the deadline, an Eviction
// without a request asking for it, a changed target responder list; and that applied, decisions
// reach a fixed point.
//
//	go test ./internal/controller/eviction/evictiondecide -run '^$' -fuzz '^FuzzDecide$' -fuzztime 30s
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 2, 0x41, 0x12, 9, 200, 7, 1, 3})
	f.Add([]byte{0xff, 0x13, 0x22, 0x31, 0x40, 0x05, 0x66, 0x77, 0x88, 0x99, 0xaa})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &testutil.FuzzBytes{Data: data}
		now := t0.Add(time.Hour)
		obs := fuzzObservation(g, now)
		before := fmt.Sprintf("%+v", obs)
		d := Decide(obs, now)
		if fmt.Sprintf("%+v", obs) != before {
			t.Fatal("Decide changed its observation")
		}
		check(t, obs, d, now)
		for range 6 {
			obs = apply(obs, d)
			d = Decide(obs, now)
			check(t, obs, d, now)
			if d.Create == nil && len(d.Status) == 0 && len(d.RequestStatus) == 0 && len(d.Delete) == 0 && len(d.Meta) == 0 {
				return
			}
		}
		t.Fatalf("no fixed point: %+v", d)
	})
}

func check(t *testing.T, obs Observation, d Decision, now time.Time) {
	t.Helper()
	checkOwnership(t, obs, d)
	wanting := false
	for _, r := range obs.Requests {
		wanting = wanting || (r.Spec.Target.Pod != nil && obs.Pod != nil && r.Spec.Target.Pod.UID == obs.Pod.UID && wantsEviction(&r))
	}
	if d.Create != nil && !wanting {
		t.Fatalf("created an Eviction no request asks for")
	}
	checkUpstream(t, obs, d)
	for _, w := range d.Status {
		var old *lifecyclev1alpha1.Eviction
		for i := range obs.Evictions {
			if obs.Evictions[i].Name == w.Name {
				old = &obs.Evictions[i]
			}
		}
		active := 0
		for _, tr := range w.Status.TargetResponders {
			if tr.State == lifecyclev1alpha1.ResponderStateActive {
				active++
			}
		}
		if active > 1 {
			t.Fatalf("%d active responders: %s", active, stateOf(*w))
		}
		if len(old.Status.TargetResponders) > 0 {
			if len(old.Status.TargetResponders) != len(w.Status.TargetResponders) {
				t.Fatalf("target responders changed: %s -> %s", stateOf(*old), stateOf(*w))
			}
			for i, tr := range w.Status.TargetResponders {
				o := old.Status.TargetResponders[i]
				if o.Name != tr.Name {
					t.Fatalf("target responders reordered: %s -> %s", stateOf(*old), stateOf(*w))
				}
				if o.State != tr.State && o.State != lifecyclev1alpha1.ResponderStateInactive && o.State != lifecyclev1alpha1.ResponderStateActive {
					t.Fatalf("a final responder state changed: %s -> %s", stateOf(*old), stateOf(*w))
				}
			}
		}
		// A responder is interrupted only past its deadline, counted from its start or last
		// heartbeat (as the decision leaves them: one started now cannot be interrupted now),
		// or once its target ended and the grace for its report ran out.
		for _, tr := range w.Status.TargetResponders {
			if endedPastGrace(obs, w, now) {
				break
			}
			was := lifecyclev1alpha1.ResponderStateInactive
			for _, o := range old.Status.TargetResponders {
				if o.Name == tr.Name {
					was = o.State
				}
			}
			if tr.State != lifecyclev1alpha1.ResponderStateInterrupted || was == tr.State {
				continue
			}
			for _, rs := range w.Status.Responders {
				if rs.Name == tr.Name && now.Before(latest(rs.StartTime, rs.HeartbeatTime).Add(obs.HeartbeatDeadline)) {
					t.Fatalf("%s interrupted before its deadline", tr.Name)
				}
			}
		}
	}
	if d.Evict != nil {
		if obs.Pod == nil {
			t.Fatalf("evicting a pod gone")
		}
		if obs.Pod.DeletionTimestamp != nil {
			t.Fatalf("evicting a pod terminating since %v", obs.Pod.DeletionTimestamp)
		}
		if obs.Evicted {
			t.Fatalf("evicting a pod evicted already")
		}
		if obs.Protected != "" {
			t.Fatalf("evicting a pod protected: %s", obs.Protected)
		}
		// Only another requester's request lets the imperative evictor evict: nodemaint's drain
		// evicts the pods it alone asks for itself, by its maintenances' policy.
		other := false
		for _, r := range obs.Requests {
			other = other || (r.Spec.Target.Pod != nil && r.Spec.Target.Pod.UID == obs.Pod.UID && wantsEviction(&r) && r.Spec.Requester != evictionrequest.Requester)
		}
		if !other {
			t.Fatalf("the imperative evictor evicts a pod only nodemaint's drain asks for")
		}
		if obs.EvictNotBefore.After(now) && (BudgetsVersion(obs.Budgets) == obs.EvictBudgets || !budgetsAllow(obs.Pod, obs.Budgets)) {
			t.Fatalf("evicting a pod backing off whose budgets did not change to allow it: %+v (refused at %q)", obs.Budgets, obs.EvictBudgets)
		}
		if obs.EvictBudgetRefused && len(obs.Budgets) > 0 && !budgetsAllow(obs.Pod, obs.Budgets) {
			t.Fatalf("evicting a pod a budget refused, while the budgets allow nothing: %+v", obs.Budgets)
		}
		e := d.Evict
		for _, w := range d.Status {
			if w.Name == e.Name {
				e = w
			}
		}
		ok := false
		for _, tr := range e.Status.TargetResponders {
			ok = ok || (tr.Name == evictionrequest.ImperativeEvictor && tr.State == lifecyclev1alpha1.ResponderStateActive)
		}
		if !ok {
			t.Fatalf("evicting while the imperative evictor is not the active responder: %s", stateOf(*e))
		}
		if final(&e.Status) {
			t.Fatalf("evicting for a final Eviction: %+v", e.Status.Conditions)
		}
	}
}

// checkUpstream checks the rules of upstream's controller (KEP-4563): a final Eviction (a
// condition True) is never written again, nor deleted while a request names its target; its
// target is evicted (TargetEvicted True) only once the pod is terminal or gone; a request's final
// conditions (evicted, invalid) stay, only a new generation is observed; no Eviction is created
// while one of the pod is under way; and a responder's entry changes only while it is Active (as
// the API server requires).
func checkUpstream(t *testing.T, obs Observation, d Decision) {
	t.Helper()
	observed := map[string]*lifecyclev1alpha1.Eviction{}
	for i := range obs.Evictions {
		observed[obs.Evictions[i].Name] = &obs.Evictions[i]
	}
	named := map[types.UID]bool{}
	for _, r := range obs.Requests {
		if r.Spec.Target.Pod != nil {
			named[r.Spec.Target.Pod.UID] = true
		}
	}
	for _, w := range d.Status {
		old := observed[w.Name]
		if final(&old.Status) {
			t.Fatalf("a final Eviction written again: %+v -> %+v", old.Status.Conditions, w.Status.Conditions)
		}
		if meta.IsStatusConditionTrue(w.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) &&
			obs.Pod != nil && obs.Pod.UID == w.Spec.Target.Pod.UID && !terminal(obs.Pod) {
			t.Fatalf("TargetEvicted of a live pod: %+v", w.Status.Conditions)
		}
		for i, tr := range old.Status.TargetResponders {
			if tr.State == lifecyclev1alpha1.ResponderStateActive && i < len(w.Status.TargetResponders) && w.Status.TargetResponders[i].State == lifecyclev1alpha1.ResponderStateActive {
				continue
			}
			var was, is *lifecyclev1alpha1.ResponderStatus
			for j := range old.Status.Responders {
				if old.Status.Responders[j].Name == tr.Name {
					was = &old.Status.Responders[j]
				}
			}
			for j := range w.Status.Responders {
				if w.Status.Responders[j].Name == tr.Name {
					is = &w.Status.Responders[j]
				}
			}
			if was != nil && !equality.Semantic.DeepEqual(was, is) && tr.State != lifecyclev1alpha1.ResponderStateInactive {
				t.Fatalf("the entry of %s, %s, changed in the write that leaves it not Active: %+v -> %+v", tr.Name, tr.State, was, is)
			}
		}
	}
	for _, e := range d.Delete {
		if e.Spec.Target.Pod != nil && named[e.Spec.Target.Pod.UID] && d.StandAside == "" {
			t.Fatalf("deleted Eviction %s while a request names its target", e.Name)
		}
	}
	for _, w := range d.RequestStatus {
		for _, r := range obs.Requests {
			if r.Name != w.Name || !requestFinal(&r) {
				continue
			}
			if !equality.Semantic.DeepEqual(conditionsOf(r.Status.Conditions), conditionsOf(w.Status.Conditions)) {
				t.Fatalf("a request's final conditions changed: %v -> %v", conditionsOf(r.Status.Conditions), conditionsOf(w.Status.Conditions))
			}
		}
	}
	if d.Create != nil {
		for _, e := range obs.Evictions {
			if Ours(&e, obs.Controller) && e.DeletionTimestamp == nil && e.Spec.Target.Pod != nil && e.Spec.Target.Pod.UID == d.Create.Spec.Target.Pod.UID && !final(&e.Status) {
				t.Fatalf("created %s while %s of the pod is under way", d.Create.Name, e.Name)
			}
		}
	}
}

// checkOwnership: the decision writes to (status, metadata, eviction by its imperative evictor)
// and deletes only the controller's own Evictions, creates only marked ones, and leaves a pod
// and its requests to another controller whose Eviction names it: no Eviction created, no
// request's status written, no eviction.
func checkOwnership(t *testing.T, obs Observation, d Decision) {
	t.Helper()
	observed := map[string]*lifecyclev1alpha1.Eviction{}
	covered := map[types.UID]bool{}
	for i := range obs.Evictions {
		e := &obs.Evictions[i]
		observed[e.Name] = e
		if !Ours(e, obs.Controller) && e.Spec.Target.Pod != nil {
			covered[e.Spec.Target.Pod.UID] = true
		}
	}
	writes := map[string][]*lifecyclev1alpha1.Eviction{"status of": d.Status, "metadata of": d.Meta, "deleted": d.Delete}
	if d.Evict != nil {
		writes["evicted for"] = []*lifecyclev1alpha1.Eviction{d.Evict}
	}
	for what, es := range writes {
		for _, e := range es {
			old := observed[e.Name]
			if old == nil {
				t.Fatalf("%s an Eviction %s not observed", what, e.Name)
			}
			if !Ours(old, obs.Controller) {
				t.Fatalf("%s another controller's Eviction %s (observed %v)", what, e.Name, old.Labels)
			}
			if !Ours(e, obs.Controller) {
				t.Fatalf("%s Eviction %s written without the controller's mark (%v)", what, e.Name, e.Labels)
			}
		}
	}
	if d.Create != nil {
		if !Ours(d.Create, obs.Controller) {
			t.Fatalf("created Eviction %s without the controller's mark (%v)", d.Create.Name, d.Create.Labels)
		}
		if obs.Yield != "" {
			t.Fatalf("created Eviction %s while another controller answers (yield %q)", d.Create.Name, obs.Yield)
		}
		if covered[d.Create.Spec.Target.Pod.UID] {
			t.Fatalf("created Eviction %s for a pod another controller's Eviction answers for (covered %v)", d.Create.Name, covered)
		}
	}
	if d.Evict != nil && covered[obs.Pod.UID] {
		t.Fatalf("evicting a pod another controller's Eviction answers for")
	}
	for _, r := range d.RequestStatus {
		if covered[r.Spec.Target.Pod.UID] {
			t.Fatalf("wrote the status of request %s, which another controller's Eviction answers", r.Name)
		}
	}
	// Standing aside is about the live pod: the controller's own Evictions of a pod gone (a
	// namesake's) are carried to their end.
	livePod := func(es []*lifecyclev1alpha1.Eviction) bool {
		return slices.ContainsFunc(es, func(e *lifecyclev1alpha1.Eviction) bool {
			return obs.Pod != nil && e.Spec.Target.Pod != nil && e.Spec.Target.Pod.UID == obs.Pod.UID
		})
	}
	if d.StandAside == "" {
		return
	}
	if d.Create != nil {
		t.Fatalf("stood aside (%s) yet created %s", d.StandAside, d.Create.Name)
	}
	if livePod(d.Status) {
		t.Fatalf("stood aside (%s) yet wrote the status of an Eviction of the live pod: %+v", d.StandAside, d.Status)
	}
	if livePod(d.Meta) {
		t.Fatalf("stood aside (%s) yet wrote the metadata of an Eviction of the live pod: %+v", d.StandAside, d.Meta)
	}
	if d.Evict != nil {
		t.Fatalf("stood aside (%s) yet evicted", d.StandAside)
	}
}

func fuzzObservation(g *testutil.FuzzBytes, now time.Time) Observation {
	names := []string{"a.example.com/x", "b.example.com/y", "db.acme.io/op", evictionrequest.ImperativeEvictor}
	pod := testPod()
	for i, name := range names[:int(g.Byte())%4] {
		pod.Spec.EvictionResponders = append(pod.Spec.EvictionResponders, corev1.EvictionResponder{Name: name, Priority: ptr.To(int32(1000 + int(g.Byte())%3*5000 + i))})
	}
	switch g.Byte() % 8 {
	case 0:
		pod = nil
	case 1:
		pod.Status.Phase = corev1.PodSucceeded
	case 2:
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Minute)))
	case 3:
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{}
	}
	obs := Observation{Namespace: "ns", Name: "p", Pod: pod, HeartbeatDeadline: 20 * time.Minute, Controller: "me"}
	if g.Byte()%4 == 0 {
		obs.Yield = "them"
	}
	if g.Byte()%5 == 0 {
		obs.Protected = "nodemaint-controller's own pod"
	}
	obs.Evicted = g.Byte()%6 == 0
	if b := g.Byte(); b%2 == 0 {
		// The target seen ended a few seconds ago, within the grace of its responder or past it.
		obs.EndedAt = map[types.UID]time.Time{"uid-p": now.Add(-time.Duration(b%16) * time.Second)}
	}
	if b := g.Byte(); b%3 == 0 {
		obs.EvictNotBefore, obs.EvictMessage = now.Add(time.Duration(b)*time.Second-100*time.Second), "refused"
		if b%2 == 0 {
			obs.EvictBudgets = "db0=1"
		}
		obs.EvictBudgetRefused = b%4 < 2
		obs.EvictAttempts = int(b % 5)
	}
	if pod != nil && g.Byte()%2 == 0 {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	for i := range int(g.Byte()) % 3 {
		b := g.Byte()
		obs.Budgets = append(obs.Budgets, policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("db", i), ResourceVersion: fmt.Sprint(b % 3), Generation: int64(b>>2) % 2},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: int32(b>>3) % 2, CurrentHealthy: int32(b>>4) % 3, DesiredHealthy: 1},
		})
	}
	requesters := []string{evictionrequest.Requester, "other.example.com/descheduler", "x.example.org/y"}
	for i := range int(g.Byte()) % 4 {
		b := g.Byte()
		uid := types.UID("uid-p")
		if b&1 != 0 {
			uid = "uid-old"
		}
		intent := lifecyclev1alpha1.EvictionRequestIntentEviction
		if b&2 != 0 {
			intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
		}
		r := testRequest(fmt.Sprint("r", i), requesters[int(b>>2)%3], uid, intent)
		if b&0x40 != 0 {
			r.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		}
		obs.Requests = append(obs.Requests, r)
	}
	if b := g.Byte(); b%3 == 0 {
		obs.Evictions = append(obs.Evictions, otherEviction(b, now))
	}
	if g.Byte()%2 == 0 || pod == nil {
		return obs
	}
	// An Eviction a number of decisions in, with responders that heartbeat, complete or not.
	start := obs
	start.Evictions, start.Yield = nil, ""
	start.Pod = testPod(pod.Spec.EvictionResponders...)
	start.Requests = []lifecyclev1alpha1.EvictionRequest{testRequest("r0", evictionrequest.Requester, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)}
	at := now.Add(-time.Duration(g.Byte()) * time.Minute / 2)
	for range int(g.Byte())%4 + 2 {
		d := Decide(start, at)
		start = apply(start, d)
		if len(start.Evictions) == 0 {
			break
		}
		e := &start.Evictions[0]
		for _, tr := range e.Status.TargetResponders {
			if tr.State != lifecyclev1alpha1.ResponderStateActive {
				continue
			}
			switch g.Byte() % 3 {
			case 0:
				setResponder(e, tr.Name, func(r *lifecyclev1alpha1.ResponderStatus) { r.CompletionTime = ptr.To(metav1.NewTime(at)) })
			case 1:
				setResponder(e, tr.Name, func(r *lifecyclev1alpha1.ResponderStatus) { r.HeartbeatTime = ptr.To(metav1.NewTime(at)) })
			}
		}
		at = at.Add(time.Duration(g.Byte()) * time.Minute / 8)
	}
	if at.After(now) {
		at = now
	}
	// Names are unique in a namespace: another controller's Eviction took its name first.
	for _, e := range start.Evictions {
		if !slices.ContainsFunc(obs.Evictions, func(o lifecyclev1alpha1.Eviction) bool { return o.Name == e.Name }) {
			obs.Evictions = append(obs.Evictions, e)
		}
	}
	return obs
}

// otherEviction is another Eviction controller's Eviction of the pod (its live UID or an old
// one), marked with that controller's name or unmarked (the in-tree controller), older or
// younger than this controller's, with its active responder.
func otherEviction(b byte, now time.Time) lifecyclev1alpha1.Eviction {
	uid := types.UID("uid-p")
	if b&8 != 0 {
		uid = "uid-old"
	}
	e := lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-1-p", UID: "ev-theirs", Generation: 1,
			CreationTimestamp: metav1.NewTime(now.Add(time.Duration(int(b>>6)-2) * time.Hour))},
		Spec: lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: "p", UID: uid}}},
		Status: lifecyclev1alpha1.EvictionStatus{TargetResponders: []lifecyclev1alpha1.TargetResponder{
			{Name: evictionrequest.ImperativeEvictor, Priority: ptr.To(evictionrequest.ImperativeEvictorPriority), State: lifecyclev1alpha1.ResponderStateActive},
		}},
	}
	if b&16 != 0 {
		e.Name = "pod-9-p"
	}
	if b&32 != 0 {
		e.Labels = map[string]string{evictionrequest.ControllerLabel: "them"}
	}
	return e
}

// TestRequestStatusFromItsEviction: a request learns its Eviction's conditions (AwaitingEviction)
// and its observed generation from the decision that writes the Eviction's first status, not
// before (once, not twice), and the end when it comes: the Eviction canceled once every requester
// withdrew.
func TestRequestStatusFromItsEviction(t *testing.T) {
	obs := Observation{
		Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Controller: "me",
		Pod:      testPod(corev1.EvictionResponder{Name: "a.example.com/x", Priority: ptr.To[int32](10000)}),
		Requests: []lifecyclev1alpha1.EvictionRequest{testRequest("r", evictionrequest.Requester, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)},
	}
	writes := 0
	for range 10 {
		d := Decide(obs, t0)
		if d.Create != nil && len(d.RequestStatus) > 0 {
			t.Fatalf("the request's status written before its Eviction exists: %+v", d.RequestStatus[0].Status)
		}
		writes += len(d.RequestStatus)
		if d.Create == nil && len(d.Status) == 0 && len(d.Delete) == 0 && len(d.Meta) == 0 && len(d.RequestStatus) == 0 {
			break
		}
		obs = apply(obs, d)
	}
	if writes != 1 {
		t.Errorf("%d request status writes; want 1", writes)
	}
	if len(obs.Evictions) != 1 {
		t.Fatalf("%d Evictions; want 1", len(obs.Evictions))
	}
	if got, want := stateOf(obs.Evictions[0]), "a.example.com/x=Active imperative-eviction.k8s.io/evictor=Inactive "; got != want {
		t.Errorf("responders %q; want %q", got, want)
	}
	if got, want := conditionsOf(obs.Requests[0].Status.Conditions), conditionsOf(obs.Evictions[0].Status.Conditions); !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("the request's conditions %q; want the Eviction's, %q", got, want)
	}
	obs.Requests[0].Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	obs, _ = settle(t, obs, t0.Add(time.Minute))
	if !meta.IsStatusConditionTrue(obs.Requests[0].Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)) {
		t.Fatalf("withdrawn: the request's conditions %+v; want Failed True", obs.Requests[0].Status.Conditions)
	}
}

// TestGoneTargetOwnedRequestsLeftToTheCollector: a deleted pod's requests that it owns, and the
// Eviction they own, go with it through the garbage collector: no TargetEvicted written to them,
// no delete of the Eviction. A terminal pod is not deleted: the Eviction and its requests learn
// TargetEvicted (PodTerminal) and the Eviction is kept.
func TestGoneTargetOwnedRequestsLeftToTheCollector(t *testing.T) {
	r := testRequest("r", evictionrequest.Requester, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)
	r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-p"}}
	obs := Observation{Namespace: "ns", Name: "p", HeartbeatDeadline: 20 * time.Minute, Controller: "me", Pod: testPod(),
		Requests: []lifecyclev1alpha1.EvictionRequest{r}}
	obs, _ = settle(t, obs, t0)
	if len(obs.Evictions) != 1 {
		t.Fatalf("Evictions %d", len(obs.Evictions))
	}
	deleted := obs
	deleted.Pod = nil
	d := Decide(deleted, t0.Add(time.Minute))
	if n := len(d.RequestStatus) + len(d.Delete) + len(d.Status) + len(d.Meta); n != 0 {
		t.Errorf("pod deleted: %d request status, delete, status and meta writes; want none (%+v)", n, d)
	}
	if d.Create != nil {
		t.Errorf("pod deleted: created %s; want none", d.Create.Name)
	}
	terminal := obs
	terminal.Pod = testPod()
	terminal.Pod.Status.Phase = corev1.PodSucceeded
	terminal, _ = settle(t, terminal, t0.Add(time.Minute))
	if len(terminal.Evictions) != 1 {
		t.Errorf("pod terminal: %d Evictions; want the one kept", len(terminal.Evictions))
	}
	if !meta.IsStatusConditionTrue(terminal.Requests[0].Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) {
		t.Errorf("pod terminal: the request's conditions %v; want TargetEvicted True", terminal.Requests[0].Status.Conditions)
	}
}
