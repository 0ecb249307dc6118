package nodedecide

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// observeScoped observes the node as the observer does: each targeted pod classified within the
// maintenances' scope (maintenance.PodScope: skipped when none draining the node selects it, its
// label ignored when one that selects it ignores it), with no DrainRules.
func observeScoped(node *corev1.Node, pods []*corev1.Pod, nms ...*nodemaintv1alpha1.NodeMaintenance) Observation {
	obs := Observation{Node: node, Pods: pods}
	obs.Admit(nms)
	obs.IgnoreDrainLabel = maintenance.IgnoreDrainLabel(obs.Maintenances)
	scope := maintenance.NewPodScope(obs.Maintenances, func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase {
		return obs.Phases[nm.Name]
	})
	rules := drain.NewRules(nil)
	var cs []drain.Classified
	for _, pod := range pods {
		class := drain.NotSelected()
		if selected, ignore := scope.Selects(pod); selected {
			class = rules.IgnoringDrainLabel(ignore).Classify(pod, nil, node.Labels)
		}
		cs = append(cs, drain.Classified{Pod: pod, Class: class})
	}
	obs.Plan = drain.NewPlan(cs)
	obs.Derive()
	return obs
}

// selecting is a maintenance like deleting's, selecting the pods of app in values.
func selecting(name string, values ...string) *nodemaintv1alpha1.NodeMaintenance {
	nm := deleting(name)
	nm.Spec.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: values}}}
	return nm
}

func startsOf(nms ...*nodemaintv1alpha1.NodeMaintenance) map[string]maintenance.DrainStart {
	starts := map[string]maintenance.DrainStart{}
	for _, nm := range nms {
		starts[nm.Name] = maintenance.DrainStart{Start: t0.Add(-time.Hour), Generation: nm.Generation, UID: nm.UID}
	}
	return starts
}

func app(name string) map[string]string { return map[string]string{"app": name} }

func podNames(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

// TestEachMaintenanceReachesOnlyItsOwnPods: two maintenances with different podSelectors drain
// one node. A pod is drained (asked to move) when one of them selects it; each one's eviction or
// deletion reaches only the pods it selects itself, with its own grace period; a pod neither
// selects is left running, reported skipped by spec.podSelector, and never asked.
func TestEachMaintenanceReachesOnlyItsOwnPods(t *testing.T) {
	evicting := func(name string, grace int64, values ...string) *nodemaintv1alpha1.NodeMaintenance {
		nm := selecting(name, values...)
		nm.Spec.DrainTimeout, nm.Spec.DrainTimeoutAction = nil, ""
		nm.Spec.EvictionGracePeriodSeconds = ptr.To(grace)
		return nm
	}
	a := evicting("a", 5, "a")
	b := selecting("b", "b") // deletes once its drainTimeout ran out
	b.Spec.EvictionGracePeriodSeconds = ptr.To[int64](60)
	asked := t0.Add(-time.Hour)
	pods := []*corev1.Pod{replicaPod("a-1", asked, app("a")), replicaPod("b-1", asked, app("b")), replicaPod("c-1", time.Time{}, app("c"))}

	d := Decide(observeScoped(cordonedNode(startsOf(a, b)), pods, a, b), t0)
	if got := names(d.Evict); got != "a-1" {
		t.Errorf("evicted %q; want a-1 evicted (a's)", got)
	}
	if got := names(d.Delete); got != "b-1" {
		t.Errorf("deleted %q; want b-1 deleted (b's)", got)
	}
	if t.Failed() {
		t.FailNow()
	}
	g := d.GracePeriods
	if len(g) != 2 {
		t.Errorf("grace periods %v; want two, a-1's and b-1's", g)
	}
	if g["a-1"] != 5 {
		t.Errorf("a-1's grace period %d; want 5s (a's)", g["a-1"])
	}
	if g["b-1"] != 60 {
		t.Errorf("b-1's grace period %d; want 60s (b's)", g["b-1"])
	}
	if d.Report.Skipped != 1 {
		t.Errorf("%d skipped; want 1", d.Report.Skipped)
	}
	if want := "app/c-1 (" + drain.SourcePodSelector + ")"; len(d.Report.SkippedNames) != 1 || d.Report.SkippedNames[0] != want {
		t.Errorf("skipped %q; want only %q, not selected by spec.podSelector", d.Report.SkippedNames, want)
	}
	// Before anything is asked: a-1 and b-1 only.
	fresh := []*corev1.Pod{replicaPod("a-1", time.Time{}, app("a")), replicaPod("b-1", time.Time{}, app("b")), replicaPod("c-1", time.Time{}, app("c"))}
	if d := Decide(observeScoped(cordonedNode(startsOf(a, b)), fresh, a, b), t0); podNames(d.Request) != "a-1,b-1" {
		t.Errorf("asked %q; want a-1,b-1 and not c-1", podNames(d.Request))
	}

	// A rollout that waits for its turn on the node selects nothing there yet: its pods are not
	// asked to move because another maintenance drains the node.
	waiting := selecting("waiting", "c")
	waiting.Spec.Rollout = &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Release: nodemaintv1alpha1.ReleaseDrained}
	d = Decide(observeScoped(cordonedNode(startsOf(a, b)), fresh, a, waiting), t0)
	if got := podNames(d.Request); got != "a-1" {
		t.Errorf("asked %q while the rollout selecting c waits; want a-1 only", got)
	}
	if d.Report.Skipped != 2 {
		t.Errorf("%d skipped while the rollout selecting c waits; want 2, b-1 and c-1", d.Report.Skipped)
	}

	// Next to a signal-only maintenance that selects every pod, a's eviction still reaches only
	// a-1: b-1 and c-1 are asked (a request is a signal) and waited for, saying why.
	signal := deleting("signal")
	signal.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	d = Decide(observeScoped(cordonedNode(startsOf(a, signal)), []*corev1.Pod{replicaPod("a-1", asked, app("a")),
		replicaPod("b-1", asked, app("b"))}, a, signal), t0)
	if got := names(d.Evict); got != "a-1" {
		t.Fatalf("evicted %q; want a-1 only", got)
	}
	if len(d.Delete) > 0 {
		t.Fatalf("deleted %q; want none", names(d.Delete))
	}
	found := false
	for _, bl := range d.Report.Blocked {
		found = found || bl.Reason == nodemaintv1alpha1.BlockedReasonWaitingForOwner && strings.Contains(bl.Message, "not selected by the spec.podSelector")
	}
	if !found {
		t.Errorf("blocked %+v; want b-1 waiting for its owner, not selected by the maintenances that evict", d.Report.Blocked)
	}

	// The label policy follows the selectors: a pod labelled skip that only the maintenance
	// honoring the label selects stays; one the maintenance ignoring it selects goes.
	skip := func(name, of string) *corev1.Pod {
		return replicaPod(name, asked, map[string]string{"app": of, nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip})
	}
	honor, ignore := evicting("honor", 5, "a"), evicting("ignore", 5, "b")
	ignore.Spec.DrainLabelPolicy = nodemaintv1alpha1.DrainLabelPolicyIgnore
	d = Decide(observeScoped(cordonedNode(startsOf(honor, ignore)), []*corev1.Pod{skip("a-kept", "a"), skip("b-gone", "b")}, honor, ignore), t0)
	if got := names(d.Evict); got != "b-gone" {
		t.Errorf("evicted %q; want b-gone evicted", got)
	}
	if d.Report.Skipped != 1 {
		t.Errorf("%d skipped; want a-kept skipped (its label honored by the one maintenance selecting it)", d.Report.Skipped)
	}
}

// TestGracePeriodIsTheShortest: an eviction for several maintenances has the shortest of their
// grace periods, one that sets none counting as the pod's own terminationGracePeriodSeconds;
// when that is the pod's own, the eviction names none.
func TestGracePeriodIsTheShortest(t *testing.T) {
	withGrace := func(name string, grace *int64) *nodemaintv1alpha1.NodeMaintenance {
		nm := deleting(name)
		nm.Spec.DrainTimeout, nm.Spec.DrainTimeoutAction = nil, ""
		nm.Spec.EvictionGracePeriodSeconds = grace
		return nm
	}
	for _, tc := range []struct {
		name  string
		own   *int64
		grace []*int64
		want  int64 // 0: the pod's own
	}{
		{name: "one maintenance", grace: []*int64{ptr.To[int64](10)}, want: 10},
		{name: "longer than the pod's own", grace: []*int64{ptr.To[int64](120)}, want: 120},
		{name: "the shortest of two", grace: []*int64{ptr.To[int64](120), ptr.To[int64](10)}, want: 10},
		{name: "unset counts as the pod's own (default 30s)", grace: []*int64{ptr.To[int64](120), nil}},
		{name: "unset counts as the pod's own (5s)", own: ptr.To[int64](5), grace: []*int64{nil, ptr.To[int64](10)}},
		{name: "shorter than the pod's own", own: ptr.To[int64](300), grace: []*int64{nil, ptr.To[int64](10)}, want: 10},
		{name: "none", grace: []*int64{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nms []*nodemaintv1alpha1.NodeMaintenance
			for i, g := range tc.grace {
				nms = append(nms, withGrace(string(rune('a'+i)), g))
			}
			pod := replicaPod("web", t0.Add(-time.Hour), nil)
			pod.Spec.TerminationGracePeriodSeconds = tc.own
			d := Decide(observeScoped(cordonedNode(startsOf(nms...)), []*corev1.Pod{pod}, nms...), t0)
			if names(d.Evict) != "web" {
				t.Fatalf("evicted %q, want web", names(d.Evict))
			}
			got, ok := d.GracePeriods[types.UID("web")]
			if ok != (tc.want != 0) {
				t.Errorf("grace period given %v; want one given only when the maintenances set one (%d)", ok, tc.want)
			}
			if got != tc.want {
				t.Errorf("grace period %d; want %d", got, tc.want)
			}
		})
	}
}
