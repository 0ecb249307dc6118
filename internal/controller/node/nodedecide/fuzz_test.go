package nodedecide

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodemaint/nodemaint/internal/testutil"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cachetrim"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// FuzzDecide builds an observation from the fuzzer's bytes (a node in any state nodemaint or
// others may have left it, up to three maintenances selecting it, usable or not, pods in every
// state an owner, the API server and the kubelet make of them, refused evictions) and checks what
// a decision must never do, and that it converges: applied, the next decision changes nothing.
// The seed corpus is under testdata/fuzz/FuzzDecide. Run it with e.g.
//
//	go test ./internal/nodedecide -run '^$' -fuzz '^FuzzDecide$' -fuzztime 30s
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x03, 0x12, 0, 0x03, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{0xff, 0xff, 0xff, 0x43, 0x21, 0x81, 0x33, 0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96})
	f.Add([]byte{0x2b, 0x91, 0x07, 0x65, 0x3a, 0x02, 0x41, 0x77, 0x09, 0x88, 0x18, 0xc4, 0x50, 0x0b, 0xe3, 0x29, 0x71, 0x05})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{FuzzBytes: testutil.FuzzBytes{Data: data}}
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		obs := g.observation(now)
		before := snapshot(obs)
		d := Decide(obs, now)
		if after := snapshot(obs); after != before {
			t.Fatalf("Decide changed its observation:\n%s\n%s", before, after)
		}
		if again := Decide(obs, now); fmt.Sprintf("%+v", again) != fmt.Sprintf("%+v", d) {
			t.Fatalf("Decide is not deterministic")
		}
		check(t, obs, d, now)

		// The controller observes through trimmed caches (internal/cachetrim): trimmed, the
		// observation gives the same decision.
		trim := trimmed(obs)
		for i := range obs.Pods {
			if maintenance.Targeted(obs.Pods[i]) != maintenance.Targeted(trim.Pods[i]) {
				t.Fatalf("pod %s: trimmed, targeted %v", obs.Pods[i].Name, maintenance.Targeted(trim.Pods[i]))
			}
		}
		if got, want := decisionKey(Decide(trim, now)), decisionKey(d); got != want {
			t.Fatalf("trimmed, the observation decides otherwise:\n%s\nnot\n%s", got, want)
		}

		// Applied, the decision leaves nothing to change: the node, its condition and the pods'
		// requests are what the next decision wants.
		next := apply(obs, d, now)
		d2 := Decide(next, now)
		if d2.NodeChanged {
			t.Errorf("applied, the decision does not converge: the node changes again\nfirst %+v\nthen %+v", d.Node.Spec, d2.Node.Spec)
		}
		if d2.ConditionChanged {
			t.Errorf("applied, the decision does not converge: the condition changes again")
		}
		if len(d2.Withdraw) > 0 {
			t.Errorf("applied, the decision does not converge: %d requests withdrawn; want none", len(d2.Withdraw))
		}
		if len(d2.Request) > 0 {
			t.Errorf("applied, the decision does not converge: %d requests made; want none", len(d2.Request))
		}
		if t.Failed() {
			t.FailNow()
		}
		check(t, next, d2, now)

		// Time passes: the drain starts the decision recorded in the node are what later
		// decisions count from.
		for _, later := range []time.Duration{time.Minute, 10 * time.Minute, 3 * time.Hour} {
			check(t, next, Decide(next, now.Add(later)), now.Add(later))
		}
	})
}

// check states what no decision may do.
func check(t *testing.T, obs Observation, d Decision, now time.Time) {
	t.Helper()
	node := obs.Node
	if d.RecheckAfter < 0 {
		t.Fatalf("RecheckAfter %v", d.RecheckAfter)
	}
	if d.NodeChanged != !(equality.Semantic.DeepEqual(node.Spec, d.Node.Spec) && equality.Semantic.DeepEqual(node.Annotations, d.Node.Annotations)) {
		t.Fatalf("NodeChanged %v does not say whether the node changes", d.NodeChanged)
	}
	// A complete cordon comes before any request, eviction or deletion (KEP-4212).
	if acts := len(d.Request) + len(d.Evict) + len(d.Delete); acts > 0 {
		if !d.Intent.Drain {
			t.Fatalf("requests %d, evictions %d, deletions %d on a node not drained", len(d.Request), len(d.Evict), len(d.Delete))
		}
		if !d.Node.Spec.Unschedulable {
			t.Fatalf("requests %d, evictions %d, deletions %d on a node not cordoned", len(d.Request), len(d.Evict), len(d.Delete))
		}
	}
	checkHolds(t, obs, d)
	// nodemaint lifts only its own cordon.
	if node.Spec.Unschedulable && !d.Node.Spec.Unschedulable && node.Annotations[nodemaintv1alpha1.CordonedAnnotation] == "" {
		t.Fatalf("uncordoned a node someone else cordoned")
	}
	if d.Intent.Cordon && !d.Node.Spec.Unschedulable {
		t.Fatalf("a maintenance cordons the node, the decision leaves it schedulable")
	}
	// The node names at most the bound of maintenances, and none of those waiting past it.
	entries := maintenance.NodeEntries(d.Node)
	if len(entries) > maintenance.MaxMaintenancesPerNode {
		t.Fatalf("%d maintenances named on the node", len(entries))
	}
	starts := maintenance.ParseDrainStarts(d.Node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])
	for _, name := range d.Intent.Beyond {
		if _, ok := starts[name]; ok {
			t.Fatalf("%s waits past the bound, and the node records its drain start", name)
		}
		if slices.ContainsFunc(entries, func(e maintenance.NodeEntry) bool { return e.Name == name }) {
			t.Fatalf("%s waits past the bound, and the node names it among its maintenances", name)
		}
	}
	checkAutoscalers(t, node, d)
	// Others' taints stay.
	for _, taint := range node.Spec.Taints {
		if taint.Key == nodemaintv1alpha1.PlannedMaintenanceTaint || taint == OutOfServiceTaint {
			continue
		}
		found := false
		for _, w := range d.Node.Spec.Taints {
			found = found || w == taint
		}
		if !found {
			t.Fatalf("taint %v of someone else removed", taint)
		}
	}
	// Another tool's KEP-5683 conditions stay unless nodemaint wants the condition itself.
	wanted := d.Intent.LifecycleConditions()
	for _, c := range node.Status.Conditions {
		if !slices.Contains(LifecycleConditionTypes, c.Type) || c.Reason == nodemaintv1alpha1.NodeConditionReasonNodeMaintenance || wanted[c.Type] != nil {
			continue
		}
		found := false
		for _, w := range d.Node.Status.Conditions {
			found = found || w.Type == c.Type && w.Reason == c.Reason
		}
		if !found {
			t.Fatalf("condition %s of reason %s removed", c.Type, c.Reason)
		}
	}
	// The out-of-service taint needs a NotReady node with pods stuck terminating, and evidence
	// of a shutdown, from a usable maintenance that asked for it.
	if d.Change.OutOfService {
		stuck := false
		for i := range obs.Pods {
			stuck = stuck || obs.Pods[i].DeletionTimestamp != nil
		}
		if NodeReady(node) {
			t.Fatalf("tainted out-of-service a Ready node")
		}
		if !stuck {
			t.Fatalf("tainted out-of-service a node with no pod stuck terminating")
		}
		if !shutdownEvidence(node) {
			t.Fatalf("tainted out-of-service a node with no evidence of a shutdown")
		}
		if !d.Intent.OutOfService {
			t.Fatalf("tainted out-of-service a node no usable maintenance asked it for")
		}
	}
	// Evacuation requests: only nodemaint's own are withdrawn; another requester's is never
	// replaced.
	for _, pod := range d.Withdraw {
		if !evacuation.RequestedBy(pod, evacuation.ReasonNodeMaintenance) && !ours(pod) {
			t.Fatalf("withdrew a request that is not nodemaint's from %s", pod.Name)
		}
	}
	current := map[types.UID]drain.Classified{}
	for _, c := range obs.Plan.Current {
		current[c.Pod.UID] = c
	}
	for _, pod := range d.Request {
		if _, ok := current[pod.UID]; !ok {
			t.Fatalf("requested evacuation of %s, not of the current order group", pod.Name)
		}
		if cur := evacuation.Condition(pod, evacuation.Request); cur != nil && cur.Status == corev1.ConditionTrue && !ours(pod) {
			t.Fatalf("replaced the request of another requester on %s", pod.Name)
		}
	}
	usable := false
	phase := map[string]nodemaintv1alpha1.Phase{}
	for _, e := range d.Intent.Entries {
		phase[e.Name] = e.Phase
	}
	for _, nm := range obs.Maintenances {
		usable = usable || maintenance.Usable(nm) && maintenance.Drains(maintenance.Phase(nm, false))
	}
	// ownClassDrains: the maintenance's own classification (its drainLabelPolicy; the DrainRules
	// are the plan's) drains the pod. A labelled pod is drained only by a maintenance that
	// ignores the label, and then only as a plan that ignored it too classified it.
	// Its podSelector must select the pod too: no maintenance's eviction or deletion reaches a
	// pod it leaves alone, whichever brought the pod into the plan.
	ownClassDrains := func(nm *nodemaintv1alpha1.NodeMaintenance, c drain.Classified) bool {
		if !selects(nm, c.Pod) {
			return false
		}
		label := c.Pod.Labels[nodemaintv1alpha1.DrainLabel]
		labelled := label == nodemaintv1alpha1.DrainLabelSkip || label == nodemaintv1alpha1.DrainLabelWaitCompleted
		if labelled && (nm.Spec.DrainLabelPolicy != nodemaintv1alpha1.DrainLabelPolicyIgnore || !obs.IgnoreDrainLabel) {
			return false
		}
		return c.Class.Behavior == nodemaintv1alpha1.DrainBehaviorDrain && c.Class.InvalidRule == ""
	}
	responseTimeout := func(nm *nodemaintv1alpha1.NodeMaintenance) time.Duration {
		if nm.Spec.EvacuationResponseTimeout != nil {
			return nm.Spec.EvacuationResponseTimeout.Duration
		}
		return 3 * time.Minute
	}
	// askedSince: when the pod's response timeout started counting (its request, or this
	// replica's leadership if later); false when nodemaint (onlyOurs) or anyone has not asked.
	askedSince := func(pod *corev1.Pod, onlyOurs bool) (time.Time, bool) {
		req := evacuation.Condition(pod, evacuation.Request)
		if req == nil || req.Status != corev1.ConditionTrue || onlyOurs && req.Reason != evacuation.ReasonNodeMaintenance {
			return time.Time{}, false
		}
		if obs.ActiveSince.After(req.LastTransitionTime.Time) {
			return obs.ActiveSince, true
		}
		return req.LastTransitionTime.Time, true
	}
	// The node's own drain start for each maintenance, as recorded in the node observed: a
	// deletion is justified only by a start that was written.
	recorded := maintenance.ParseDrainStarts(node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])
	deleted := map[types.UID]bool{}
	for _, c := range d.Delete {
		deleted[c.Pod.UID] = true
		if c.Pod.DeletionTimestamp != nil {
			t.Fatalf("deleted %s: terminating already", c.Pod.Name)
		}
		if c.Class.Protected != "" {
			t.Fatalf("deleted %s: protected (%s)", c.Pod.Name, c.Class.Protected)
		}
		if c.Class.InvalidRule != "" {
			t.Fatalf("deleted %s: held by an invalid rule (%s)", c.Pod.Name, c.Class.InvalidRule)
		}
		if c.Class.Behavior == nodemaintv1alpha1.DrainBehaviorSkip {
			t.Fatalf("deleted %s: skipped (%+v)", c.Pod.Name, c.Class)
		}
		if _, ok := current[c.Pod.UID]; !ok {
			t.Fatalf("deleted %s: not in the current order group (never asked)", c.Pod.Name)
		}
		var why []string
		var authorizing []*nodemaintv1alpha1.NodeMaintenance
		for _, nm := range obs.Maintenances {
			r, ok := recorded[nm.Name]
			asked, wasAsked := askedSince(c.Pod, true)
			switch {
			case !maintenance.Drains(phase[nm.Name]):
				why = append(why, nm.Name+": does not drain the node")
			case !maintenance.Usable(nm) || nm.Spec.EvictionPolicy == nodemaintv1alpha1.EvictionPolicySignalOnly ||
				nm.Spec.DrainTimeoutAction != nodemaintv1alpha1.DrainTimeoutActionDelete || nm.Spec.DrainTimeout == nil:
				why = append(why, nm.Name+": did not ask for Delete, signal-only or unusable")
			case !ok || r.UID != nm.UID || r.Generation != nm.Generation || r.Start.Add(nm.Spec.DrainTimeout.Duration).After(now):
				why = append(why, fmt.Sprintf("%s: the node's own drain start %+v is not recorded for it or its drainTimeout has not run out", nm.Name, r))
			case !ownClassDrains(nm, c):
				why = append(why, nm.Name+": its own label policy or the DrainRules do not drain the pod")
			case !wasAsked || asked.Add(responseTimeout(nm)).After(now):
				why = append(why, fmt.Sprintf("%s: asked at %v, less than its response timeout ago", nm.Name, asked))
			default:
				authorizing = append(authorizing, nm)
			}
		}
		if len(authorizing) == 0 {
			t.Fatalf("deleted %s with no maintenance authorizing it: %v", c.Pod.Name, why)
		}
		checkGrace(t, d, c.Pod, authorizing)
	}
	for _, c := range d.Evict {
		if _, ok := current[c.Pod.UID]; !ok {
			t.Fatalf("evicted %s: not in the current order group", c.Pod.Name)
		}
		if deleted[c.Pod.UID] {
			t.Fatalf("evicted %s: deleted as well", c.Pod.Name)
		}
		if !d.Intent.Evict {
			t.Fatalf("evicted %s: signal-only", c.Pod.Name)
		}
		if !usable {
			t.Fatalf("evicted %s: unusable", c.Pod.Name)
		}
		if c.Pod.DeletionTimestamp != nil {
			t.Fatalf("evicted %s: terminating already", c.Pod.Name)
		}
		if c.Class.Protected != "" {
			t.Fatalf("evicted %s: protected (%s)", c.Pod.Name, c.Class.Protected)
		}
		if evacuation.Accepted(c.Pod) {
			t.Fatalf("evicted %s: its owner accepted the evacuation", c.Pod.Name)
		}
		authorized := false
		var evictors []*nodemaintv1alpha1.NodeMaintenance
		for _, nm := range obs.Maintenances {
			if !maintenance.Drains(phase[nm.Name]) || !maintenance.Usable(nm) || nm.Spec.EvictionPolicy == nodemaintv1alpha1.EvictionPolicySignalOnly || !ownClassDrains(nm, c) {
				continue
			}
			evictors = append(evictors, nm)
			asked, wasAsked := askedSince(c.Pod, false)
			authorized = authorized || wasAsked && (evacuation.Declined(c.Pod) || !asked.Add(responseTimeout(nm)).After(now))
		}
		if !authorized {
			t.Fatalf("evicted %s: no maintenance that evicts drains it by its own podSelector and label policy, or it was asked less than the response timeout ago", c.Pod.Name)
		}
		checkGrace(t, d, c.Pod, evictors)
		if r, ok := obs.Refusals[c.Pod.UID]; ok && r.NotBefore.After(now) {
			t.Fatalf("evicted %s while its refused eviction backs off", c.Pod.Name)
		}
	}
	// Asked and SignalOnly: the pods carrying nodemaint's request once written, and those of
	// them nothing evicts, which every protocol asks through the pod condition alone (an
	// EvictionRequest would be carried to an eviction by whatever Eviction controller runs).
	asked := map[types.UID]bool{}
	for _, pod := range d.Asked {
		c, ok := current[pod.UID]
		if !ok {
			t.Fatalf("%s asked, not of the current order group", pod.Name)
		}
		if !d.Intent.Drain {
			t.Fatalf("%s asked on a node not drained", pod.Name)
		}
		asked[pod.UID] = true
		if cur := evacuation.Condition(pod, evacuation.Request); cur != nil && cur.Status == corev1.ConditionTrue && !ours(pod) {
			t.Fatalf("%s counted as asked by nodemaint, another requester asks it", pod.Name)
		}
		evictable := false
		for _, nm := range obs.Maintenances {
			evictable = evictable || maintenance.Drains(phase[nm.Name]) && maintenance.Usable(nm) &&
				nm.Spec.EvictionPolicy != nodemaintv1alpha1.EvictionPolicySignalOnly && ownClassDrains(nm, c)
		}
		evictable = evictable && c.Class.Protected == ""
		if d.SignalOnly[pod.UID] == evictable {
			t.Fatalf("%s: signal only %v, but a maintenance that evicts drains it by its own classification: %v (protected %q)",
				pod.Name, d.SignalOnly[pod.UID], evictable, c.Class.Protected)
		}
	}
	for _, pod := range d.Request {
		if !asked[pod.UID] {
			t.Fatalf("%s requested, not counted as asked", pod.Name)
		}
	}
	for uid := range d.SignalOnly {
		if !asked[uid] {
			t.Fatalf("%s signal only, not asked", uid)
		}
	}
	for _, c := range slices.Concat(d.Evict, d.Delete) {
		if d.SignalOnly[c.Pod.UID] {
			t.Fatalf("%s evicted or deleted, and signal only", c.Pod.Name)
		}
	}
	for uid := range d.GracePeriods {
		if _, ok := current[uid]; !ok {
			t.Fatalf("a grace period for %s, which is neither evicted nor deleted", uid)
		}
	}
	if d.Report.Pending != obs.Plan.Pending() {
		t.Fatalf("report pending %d; want the plan's %d", d.Report.Pending, obs.Plan.Pending())
	}
	if d.Report.Skipped != len(obs.Plan.Skipped) {
		t.Fatalf("report skipped %d; want the plan's %d", d.Report.Skipped, len(obs.Plan.Skipped))
	}
	held := 0
	for _, b := range d.Report.Blocked {
		held += int(b.Count)
	}
	want := len(obs.Plan.Later) + len(obs.Plan.WaitCompleted) + len(obs.Plan.Skipped) + len(obs.Plan.Held)
	if d.Intent.Drain {
		want += len(obs.Plan.Current)
	}
	if held != want {
		t.Fatalf("blocked entries count %d pods, %d are held", held, want)
	}
}

// selects reports whether the maintenance's podSelector selects the pod; one that does not parse
// selects none.
func selects(nm *nodemaintv1alpha1.NodeMaintenance, pod *corev1.Pod) bool {
	if nm.Spec.PodSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(nm.Spec.PodSelector)
	return err == nil && sel.Matches(labels.Set(pod.Labels))
}

// checkGrace checks the grace period of the pod's eviction or deletion for the maintenances nms:
// the shortest of theirs, unset counting as the pod's own (30s where it says none), and named
// only when it is not the pod's own.
func checkGrace(t *testing.T, d Decision, pod *corev1.Pod, nms []*nodemaintv1alpha1.NodeMaintenance) {
	t.Helper()
	own := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		own = *pod.Spec.TerminationGracePeriodSeconds
	}
	var want *int64
	for _, nm := range nms {
		g := own
		if nm.Spec.EvictionGracePeriodSeconds != nil {
			g = *nm.Spec.EvictionGracePeriodSeconds
		}
		if want == nil || g < *want {
			want = &g
		}
	}
	got, ok := d.GracePeriods[pod.UID]
	if want == nil {
		t.Fatalf("%s: evicted or deleted by none of %d maintenances", pod.Name, len(nms))
	}
	if ok != (*want != own) {
		t.Fatalf("%s: grace period given %v; want one given only when %d of %d maintenances differs from the pod's own %d", pod.Name, ok, *want, len(nms), own)
	}
	if ok && got != *want {
		t.Fatalf("%s: grace period %d; want %d of %d maintenances (the pod's own %d)", pod.Name, got, *want, len(nms), own)
	}
}

func ours(pod *corev1.Pod) bool {
	c := evacuation.Condition(pod, evacuation.Request)
	return c != nil && c.Reason == evacuation.ReasonNodeMaintenance
}

// apply is what the node reconciler's writes make of the observation.
func apply(obs Observation, d Decision, now time.Time) Observation {
	next := obs
	next.Node = d.Node.DeepCopy()
	next.Pods = make([]*corev1.Pod, len(obs.Pods))
	index := map[types.UID]int{}
	for i := range obs.Pods {
		next.Pods[i] = obs.Pods[i].DeepCopy()
		index[obs.Pods[i].UID] = i
	}
	for _, pod := range d.Withdraw {
		evacuation.RemoveCondition(next.Pods[index[pod.UID]], evacuation.Request)
	}
	for _, pod := range d.Request {
		cond := maintenance.EvacuationRequest(d.RequestReason)
		cond.LastTransitionTime = metav1.NewTime(now)
		evacuation.SetCondition(next.Pods[index[pod.UID]], cond)
	}
	regroup := func(cs []drain.Classified) []drain.Classified {
		var out []drain.Classified
		for _, c := range cs {
			out = append(out, drain.Classified{Pod: next.Pods[index[c.Pod.UID]], Class: c.Class})
		}
		return out
	}
	next.Plan = drain.Plan{Current: regroup(obs.Plan.Current), Later: regroup(obs.Plan.Later),
		WaitCompleted: regroup(obs.Plan.WaitCompleted), Skipped: regroup(obs.Plan.Skipped), Held: regroup(obs.Plan.Held)}
	next.Admit(next.Maintenances)
	next.Derive()
	return next
}

func snapshot(obs Observation) string {
	b, _ := json.Marshal(struct {
		Node *corev1.Node
		Pods []*corev1.Pod
		NMs  []*nodemaintv1alpha1.NodeMaintenance
	}{obs.Node, obs.Pods, obs.Maintenances})
	return string(b)
}

// gen hands out the fuzzer's bytes; past their end it hands out zeros.
type gen struct {
	testutil.FuzzBytes
}

var phases = []nodemaintv1alpha1.Phase{"", nodemaintv1alpha1.PhasePlanning, nodemaintv1alpha1.PhaseCordon, nodemaintv1alpha1.PhaseDrain,
	nodemaintv1alpha1.PhaseDrainComplete, nodemaintv1alpha1.PhaseMaintenanceComplete}

func (g *gen) observation(now time.Time) Observation {
	obs := Observation{Node: g.node(now)}
	for i := range int(g.Byte() % 4) {
		obs.Maintenances = append(obs.Maintenances, g.maintenance(i, now))
	}
	var classes []drain.Class
	for i := 0; g.More() && i < 24; i++ {
		pod, class := g.pod(i, now)
		obs.Pods = append(obs.Pods, pod)
		classes = append(classes, class)
	}
	var classified []drain.Classified
	for i := range obs.Pods {
		if maintenance.Targeted(obs.Pods[i]) {
			classified = append(classified, drain.Classified{Pod: obs.Pods[i], Class: classes[i]})
		}
	}
	obs.Plan = drain.NewPlan(classified)
	if b := g.Byte(); obs.Plan.Pending() == 0 {
		obs.VolumesAttached = int(b % 2)
	}
	if g.Byte()%2 == 1 {
		obs.ActiveSince = now.Add(-5 * time.Second)
	}
	obs.IgnoreDrainLabel = g.Byte()%2 == 1
	obs.Node.Annotations = g.drainStarts(obs.Node.Annotations, obs.Maintenances, now)
	for _, c := range obs.Plan.Current {
		if b := g.Byte(); b%3 != 0 {
			if obs.Refusals == nil {
				obs.Refusals = map[types.UID]drain.Refusal{}
			}
			obs.Refusals[c.Pod.UID] = drain.Refusal{NotBefore: now.Add(time.Duration(int(b%5)-2) * time.Second),
				Reason: nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, Message: "The disruption budget web needs 1 healthy pods"}
		}
	}
	obs.Admit(obs.Maintenances)
	obs.Derive()
	return obs
}

func (g *gen) node(now time.Time) *corev1.Node {
	a, b, c := g.Byte(), g.Byte(), g.Byte()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	node.Status.NodeInfo.BootID = "boot-2"
	node.Spec.Unschedulable = a&0x01 != 0
	annotations := map[string]string{}
	if a&0x02 != 0 {
		annotations[nodemaintv1alpha1.CordonedAnnotation] = "true"
	}
	if a&0x04 != 0 {
		ended := []nodemaintv1alpha1.Phase{nodemaintv1alpha1.PhaseDrain, nodemaintv1alpha1.PhaseReleased, nodemaintv1alpha1.PhaseFailed}
		annotations[nodemaintv1alpha1.MaintenancesAnnotation] = fmt.Sprintf("nm-0=%s,nm-1=%s,nm-2=%s", phases[b%6], phases[(b/6)%6], ended[(c>>6)%3])
	}
	if c&0x04 != 0 {
		annotations[nodemaintv1alpha1.CompleteAnnotation] = "nm-0,nm-2"
	}
	if a&0x08 != 0 {
		annotations[nodemaintv1alpha1.OutOfServiceAnnotation] = "true"
		node.Spec.Taints = append(node.Spec.Taints, OutOfServiceTaint)
	}
	switch (a >> 4) % 4 {
	case 1:
		annotations[nodemaintv1alpha1.ShutdownConfirmedAnnotation] = "boot-2"
	case 2:
		annotations[nodemaintv1alpha1.ShutdownConfirmedAnnotation] = "boot-1" // from an earlier boot
	case 3:
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: nodemaintv1alpha1.CloudProviderShutdownTaint, Effect: corev1.TaintEffectNoSchedule})
	}
	if a&0x40 != 0 {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: nodemaintv1alpha1.PlannedMaintenanceTaint, Effect: corev1.TaintEffectPreferNoSchedule})
	}
	if a&0x80 != 0 {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	if len(annotations) > 0 {
		node.Annotations = annotations
	}
	ready := []corev1.ConditionStatus{"", corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}[c%4]
	if ready != "" {
		since := []time.Duration{10 * time.Second, 10 * time.Minute}[(c>>2)%2]
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: ready,
			LastTransitionTime: metav1.NewTime(now.Add(-since)), LastHeartbeatTime: metav1.NewTime(now.Add(-time.Second))})
	}
	if b&0x80 != 0 {
		reason := []string{nodemaintv1alpha1.NodeConditionReasonNodeMaintenance, "ClusterAutoscaler"}[(b>>6)%2]
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: LifecycleConditionTypes[(b>>4)%4],
			Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))})
	}
	if c&0x08 != 0 {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: nodemaintv1alpha1.NodeConditionUnderMaintenance,
			Status: corev1.ConditionTrue, Reason: string(phases[(c>>4)%6]), Message: "NodeMaintenance nm-0 (Drain)",
			LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))})
	}
	// The autoscaler annotations: nodemaint's (recorded), another writer's, or changed by another
	// writer after nodemaint set them; and an autoscaler removing the node.
	e := g.Byte()
	for i, k := range AutoscalerAnnotations {
		switch (e >> (2 * i)) % 4 {
		case 1:
			setAnnotation(node, k, "true")
			setAnnotation(node, nodemaintv1alpha1.AutoscalersHeldAnnotation, strings.Trim(node.Annotations[nodemaintv1alpha1.AutoscalersHeldAnnotation]+","+k, ","))
		case 2:
			setAnnotation(node, k, []string{"true", "false"}[(e>>6)%2])
		case 3:
			setAnnotation(node, k, "false")
			setAnnotation(node, nodemaintv1alpha1.AutoscalersHeldAnnotation, strings.Trim(node.Annotations[nodemaintv1alpha1.AutoscalersHeldAnnotation]+","+k, ","))
		}
	}
	switch (e >> 4) % 4 {
	case 1:
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: nodemaintv1alpha1.KarpenterDisruptedTaint, Effect: corev1.TaintEffectNoSchedule})
	case 2:
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: nodemaintv1alpha1.ClusterAutoscalerToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule})
	}
	return node
}

func (g *gen) maintenance(i int, now time.Time) *nodemaintv1alpha1.NodeMaintenance {
	a, b := g.Byte(), g.Byte()
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("nm-%d", i), CreationTimestamp: metav1.NewTime(now.Add(-time.Duration(b%3) * time.Hour)),
		UID: types.UID(fmt.Sprintf("uid-nm-%d", i)), Generation: int64(b%3) + 1,
	}}
	nm.Spec.Cordon = a&0x01 != 0
	nm.Spec.Drain = a&0x02 != 0
	nm.Spec.Reason = fmt.Sprintf("kernel upgrade %d", i)
	if a&0x04 != 0 {
		nm.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	}
	if a&0x08 != 0 {
		nm.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Second)))
	}
	if a&0x10 != 0 {
		nm.Spec.DrainLabelPolicy = nodemaintv1alpha1.DrainLabelPolicyIgnore
	}
	if a&0x20 != 0 {
		nm.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionDelete
	}
	if a&0x40 != 0 {
		nm.Spec.Shutdown = &nodemaintv1alpha1.ShutdownSpec{ApplyOutOfServiceTaint: true}
		if b&0x80 != 0 {
			nm.Spec.Shutdown.NotReadyGracePeriod = duration(`"30s"`)
		}
	}
	nm.Spec.EvacuationResponseTimeout = []*nodemaintv1alpha1.Duration{nil, duration(`"10s"`), duration(`"5m"`), duration(`"1d"`)}[(b>>2)%4]
	nm.Spec.DrainTimeout = []*nodemaintv1alpha1.Duration{nil, duration(`"5m"`), duration(`"1h"`), duration(`"2 days"`)}[(b>>4)%4]
	if a&0x80 != 0 {
		nm.Status.DrainStartTime = ptr.To(metav1.NewTime(now.Add(-[]time.Duration{time.Minute, 2 * time.Hour}[b%2])))
	}
	nm.Status.Phase = phases[(b>>6)%4+2]
	// kubectl drain's --pod-selector and --grace-period: pods of app a, of app b (or c), a
	// selector stored before the API server refused it (selects none, unusable), or every pod.
	p := g.Byte()
	nm.Spec.PodSelector = []*metav1.LabelSelector{nil, {MatchLabels: map[string]string{"app": "a"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"b", "c"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"a"}}}}}[p%4]
	nm.Spec.EvictionGracePeriodSeconds = []*int64{nil, ptr.To[int64](5), ptr.To[int64](60)}[(p>>2)%3]
	if r := g.Byte(); r&0x01 != 0 {
		// A rollout: the node (n1) waits, is in its turn (maybe failed), or its turn ended.
		nm.Spec.Rollout = &nodemaintv1alpha1.RolloutSpec{Release: []nodemaintv1alpha1.ReleasePolicy{
			nodemaintv1alpha1.ReleaseDrained, nodemaintv1alpha1.ReleaseRebooted, nodemaintv1alpha1.ReleaseManual}[(r>>1)%3]}
		if r&0x08 != 0 {
			nm.Status.Rollout = &nodemaintv1alpha1.RolloutStatus{InTurn: []nodemaintv1alpha1.NodeTurn{{
				Name: "n1", Since: metav1.NewTime(now.Add(-time.Duration(r>>5) * 20 * time.Minute)),
				BootID: []string{"boot-1", "boot-2"}[(r>>4)%2], Failed: r&0x80 != 0 && r&0x40 != 0,
			}}}
		}
	}
	if g.Byte()&0x01 != 0 {
		nm.Spec.Autoscalers = nodemaintv1alpha1.AutoscalerPolicyIgnore
	}
	return nm
}

// drainStarts adds to the node's annotations records of drain starts for the maintenances: each
// recent or long ago, vouching for the maintenance or from another generation or object; or a
// value that does not parse.
func (g *gen) drainStarts(annotations map[string]string, nms []*nodemaintv1alpha1.NodeMaintenance, now time.Time) map[string]string {
	b := g.Byte()
	if b%4 == 0 {
		return annotations
	}
	value := "{not json"
	if b%4 != 3 {
		starts := map[string]maintenance.DrainStart{}
		for _, nm := range nms {
			r := g.Byte()
			if r%5 == 0 {
				continue
			}
			rec := maintenance.DrainStart{Start: now.Add(-[]time.Duration{30 * time.Second, 4 * time.Minute, 20 * time.Minute, 3 * time.Hour}[(r>>1)%4]),
				Generation: nm.Generation, UID: nm.UID}
			switch (r >> 3) % 4 {
			case 1:
				rec.Generation-- // the maintenance changed since
			case 2:
				rec.UID = "uid-of-an-older-maintenance" // deleted and created again under its name
			}
			starts[nm.Name] = rec
		}
		value = maintenance.FormatDrainStarts(starts)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[nodemaintv1alpha1.DrainStartedAnnotation] = value
	return annotations
}

// duration decodes a duration as the API server stores it; "1d" and "2 days" do not parse.
func duration(raw string) *nodemaintv1alpha1.Duration {
	d := &nodemaintv1alpha1.Duration{}
	if err := json.Unmarshal([]byte(raw), d); err != nil {
		panic(err)
	}
	return d
}

var behaviors = []nodemaintv1alpha1.DrainBehavior{nodemaintv1alpha1.DrainBehaviorDrain, nodemaintv1alpha1.DrainBehaviorSkip, nodemaintv1alpha1.DrainBehaviorWaitCompleted}

// pod returns a pod in some state, with a class as the DrainRules could give it.
func (g *gen) pod(i int, now time.Time) (*corev1.Pod, drain.Class) {
	k, s := g.Byte(), g.Byte()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
	class := drain.Class{Behavior: behaviors[k%3], Source: fmt.Sprintf("DrainRule r%d", s%4)}
	if class.Behavior == nodemaintv1alpha1.DrainBehaviorDrain {
		class.Order, class.Source = int32(s%3), ""
	}
	if k%11 == 10 {
		class.InvalidRule = class.Source + `: "Equals" is not a valid label selector operator`
	}
	if i%7 == 3 {
		class.Protected = "nodemaint-controller's own pod"
	}
	switch (k >> 2) % 4 {
	case 1:
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
			Reason: evacuation.ReasonNodeMaintenance, Message: fmt.Sprintf("kernel upgrade %d", s%2), LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(s%7) * time.Minute))})
	case 2:
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
			Reason: "ClusterAutoscaler", Message: "scale down"})
	case 3:
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionFalse,
			Reason: evacuation.ReasonNodeMaintenance})
	}
	switch (k >> 4) % 4 {
	case 1:
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Owner"})
	case 2:
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: "Declined"})
	case 3:
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Duration(s%90) * time.Second)))
	}
	if s&0x80 != 0 {
		pod.Labels = map[string]string{nodemaintv1alpha1.DrainLabel: []string{nodemaintv1alpha1.DrainLabelSkip, nodemaintv1alpha1.DrainLabelWaitCompleted}[(s>>6)%2]}
	}
	// The maintenances' podSelectors select by app; the pods' own grace periods vary.
	if name := []string{"a", "b", ""}[i%3]; name != "" {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["app"] = name
	}
	pod.Spec.TerminationGracePeriodSeconds = []*int64{nil, ptr.To[int64](5), ptr.To[int64](30), ptr.To[int64](300)}[(i/3)%4]
	switch (k >> 6) % 4 {
	case 1:
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}}
	case 2:
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds", Controller: ptr.To(true)}}
	case 3:
		pod.Status.Phase = corev1.PodSucceeded
	}
	return pod, class
}

// trimmed is the observation as the controller's caches hold it.
func trimmed(obs Observation) Observation {
	obs.Node = obs.Node.DeepCopy()
	cachetrim.Node(obs.Node)
	pods := make([]*corev1.Pod, len(obs.Pods))
	for i := range obs.Pods {
		pods[i] = obs.Pods[i].DeepCopy()
		cachetrim.Pod(pods[i])
	}
	index := map[types.UID]int{}
	for i := range pods {
		index[pods[i].UID] = i
	}
	regroup := func(cs []drain.Classified) []drain.Classified {
		var out []drain.Classified
		for _, c := range cs {
			out = append(out, drain.Classified{Pod: pods[index[c.Pod.UID]], Class: c.Class})
		}
		return out
	}
	obs.Pods = pods
	obs.Plan = drain.Plan{Current: regroup(obs.Plan.Current), Later: regroup(obs.Plan.Later),
		WaitCompleted: regroup(obs.Plan.WaitCompleted), Skipped: regroup(obs.Plan.Skipped), Held: regroup(obs.Plan.Held)}
	obs.Admit(obs.Maintenances) // from the trimmed node, as the observer reads it
	obs.Derive()
	return obs
}

// decisionKey is what a decision does, as text: the node's spec, metadata and conditions as
// wanted, and the pods by name.
func decisionKey(d Decision) string {
	names := func(pods []*corev1.Pod) (out []string) {
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	classified := func(cs []drain.Classified) (out []string) {
		for _, c := range cs {
			out = append(out, c.Pod.Name+"/"+fmt.Sprint(c.Class))
		}
		return out
	}
	node, _ := json.Marshal(struct {
		Spec        corev1.NodeSpec
		Labels      map[string]string
		Annotations map[string]string
		Conditions  []corev1.NodeCondition
	}{d.Node.Spec, d.Node.Labels, d.Node.Annotations, d.Node.Status.Conditions})
	return fmt.Sprintf("intent %+v\nnode %s\nchange %+v %v\nwithdraw %v request %v %q asked %v signal only %v\ndelete %v evict %v grace %v\nreport %+v\nrecheck %v",
		d.Intent, node, d.Change, d.ShutdownNotConfirmed, names(d.Withdraw), names(d.Request), d.RequestReason, names(d.Asked), d.SignalOnly,
		classified(d.Delete), classified(d.Evict), d.GracePeriods, d.Report, d.RecheckAfter)
}

// checkAutoscalers: while a maintenance holds the node, Karpenter and the cluster autoscaler are
// kept from removing it, unless one already is; nodemaint removes only the annotations it set,
// and only while they say what it set; another writer's annotation is never touched.
func checkAutoscalers(t *testing.T, node *corev1.Node, d Decision) {
	t.Helper()
	held := HeldAutoscalers(node)
	for _, k := range AutoscalerAnnotations {
		was, had := node.Annotations[k]
		is, has := d.Node.Annotations[k]
		switch {
		case had && !slices.Contains(held, k) && (!has || is != was):
			t.Fatalf("%s=%q of another writer changed to %q (present %v)", k, was, is, has)
		case had && !slices.Contains(held, k) && slices.Contains(HeldAutoscalers(d.Node), k):
			t.Fatalf("%s=%q of another writer recorded as nodemaint's", k, was)
		case had && was != "true" && (!has || is != was):
			t.Fatalf("%s=%q changed by another writer, then changed by nodemaint to %q (present %v)", k, was, is, has)
		case d.Intent.HoldAutoscalers && RemovedBy(node) == "" && !has:
			t.Fatalf("a maintenance holds the node, %s is not set", k)
		case !d.Intent.HoldAutoscalers && has && is == "true" && slices.Contains(HeldAutoscalers(d.Node), k):
			t.Fatalf("no maintenance holds the node, nodemaint's %s stays", k)
		case RemovedBy(node) != "" && !had && has:
			t.Fatalf("%s set on a node %s is removing", k, RemovedBy(node))
		}
	}
}

// checkHolds: the pods the Events for application owners are about are at most MaxHolds pods of
// the current order group of a node drained now, each for a maintenance that acts on the node,
// with their Events one per object, maintenance and reason.
func checkHolds(t *testing.T, obs Observation, d Decision) {
	t.Helper()
	if len(d.Holds) > MaxHolds {
		t.Fatalf("%d holds; want at most %d", len(d.Holds), MaxHolds)
	}
	if len(d.Holds) > 0 && !d.Intent.Drain {
		t.Fatalf("%d holds on a node not drained", len(d.Holds))
	}
	current := map[types.UID]bool{}
	for _, c := range obs.Plan.Current {
		current[c.Pod.UID] = true
	}
	holders := Holders{Owners: map[types.UID]*corev1.ObjectReference{}}
	for _, h := range d.Holds {
		if !current[h.Pod.UID] {
			t.Fatalf("hold %s/%s: not of the current order group", h.Pod.Namespace, h.Pod.Name)
		}
		if len(h.Maintenances) == 0 {
			t.Fatalf("hold %s/%s: for no maintenance", h.Pod.Namespace, h.Pod.Name)
		}
		if h.Reason != ReasonBudgetBlocksDrain && h.Reason != ReasonEvacuationUnanswered {
			t.Fatalf("hold %s/%s: reason %s; want %s or %s", h.Pod.Namespace, h.Pod.Name, h.Reason, ReasonBudgetBlocksDrain, ReasonEvacuationUnanswered)
		}
		for _, nm := range h.Maintenances {
			if !slices.Contains(obs.Maintenances, nm) {
				t.Fatalf("hold %s for maintenance %s, which does not act on the node", h.Pod.Name, nm.Name)
			}
		}
		holders.Owners[h.Pod.UID] = &corev1.ObjectReference{Kind: "Deployment", Namespace: h.Pod.Namespace, Name: "owner"}
	}
	keys := map[string]bool{}
	for _, ev := range AppOwnerEvents(obs.Node.Name, d.Holds, holders, time.Unix(0, 0)) {
		if keys[ev.Key()] {
			t.Fatalf("event %s twice", ev.Key())
		}
		if len(ev.Note) > few.MaxEventNote {
			t.Fatalf("event %s: note of %d bytes; want at most %d", ev.Key(), len(ev.Note), few.MaxEventNote)
		}
		keys[ev.Key()] = true
	}
}
