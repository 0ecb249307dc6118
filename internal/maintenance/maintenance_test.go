package maintenance

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

func nm(name string, cordon, drain bool, last nodemaintv1alpha1.Phase) *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: cordon, Drain: drain, Reason: "reason of " + name},
		Status:     nodemaintv1alpha1.NodeMaintenanceStatus{Phase: last},
	}
}

func TestPhase(t *testing.T) {
	deleting := nm("d", true, true, nodemaintv1alpha1.PhaseDrain)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	cases := []struct {
		name    string
		nm      *nodemaintv1alpha1.NodeMaintenance
		drained bool
		want    nodemaintv1alpha1.Phase
	}{
		{"new, nothing asked", nm("a", false, false, ""), false, nodemaintv1alpha1.PhasePlanning},
		{"planning stays planning", nm("a", false, false, nodemaintv1alpha1.PhasePlanning), false, nodemaintv1alpha1.PhasePlanning},
		{"cordon", nm("a", true, false, nodemaintv1alpha1.PhasePlanning), false, nodemaintv1alpha1.PhaseCordon},
		{"drain", nm("a", true, true, nodemaintv1alpha1.PhaseCordon), false, nodemaintv1alpha1.PhaseDrain},
		{"drained", nm("a", true, true, nodemaintv1alpha1.PhaseDrain), true, nodemaintv1alpha1.PhaseDrainComplete},
		{"drained is only about drain", nm("a", true, false, nodemaintv1alpha1.PhaseCordon), true, nodemaintv1alpha1.PhaseCordon},
		{"both false after cordon completes", nm("a", false, false, nodemaintv1alpha1.PhaseCordon), false, nodemaintv1alpha1.PhaseMaintenanceComplete},
		{"both false after drain completes", nm("a", false, false, nodemaintv1alpha1.PhaseDrainComplete), false, nodemaintv1alpha1.PhaseMaintenanceComplete},
		{"complete stays complete", nm("a", false, false, nodemaintv1alpha1.PhaseMaintenanceComplete), false, nodemaintv1alpha1.PhaseMaintenanceComplete},
		{"complete can restart", nm("a", true, false, nodemaintv1alpha1.PhaseMaintenanceComplete), false, nodemaintv1alpha1.PhaseCordon},
		{"deleting", deleting, false, nodemaintv1alpha1.PhaseMaintenanceComplete},
	}
	for _, tc := range cases {
		if got := Phase(tc.nm, tc.drained); got != tc.want {
			t.Errorf("%s: Phase = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestTargeted(t *testing.T) {
	controller := func(apiVersion, kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "x", Controller: ptr.To(true)}}
	}
	cases := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"bare pod", corev1.Pod{}, true},
		{"ReplicaSet pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controller("apps/v1", "ReplicaSet")}}, true},
		{"DaemonSet pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controller("apps/v1", "DaemonSet")}}, false},
		{"non-controller DaemonSet owner", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "x"}}}}, true},
		{"a CRD's DaemonSet kind", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controller("example.com/v1", "DaemonSet")}}, true},
		{"mirror pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}, false},
		{"terminating pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())}}, true},
		{"emptyDir pod", corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}, true},
		{"succeeded pod", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, false},
		{"failed pod", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, false},
	}
	for _, tc := range cases {
		if got := Targeted(&tc.pod); got != tc.want {
			t.Errorf("%s: Targeted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIntent(t *testing.T) {
	older := nm("b-older", true, true, nodemaintv1alpha1.PhaseDrain)
	older.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	newer := nm("a-newer", true, true, nodemaintv1alpha1.PhaseDrain)
	newer.CreationTimestamp = metav1.NewTime(time.Unix(200, 0))
	planned := nm("c-planned", false, false, "")
	done := nm("d-done", false, false, nodemaintv1alpha1.PhaseCordon)
	phase := func(m *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase { return Phase(m, false) }

	in := Intent([]*nodemaintv1alpha1.NodeMaintenance{newer, planned, older, done}, phase)
	if !in.Cordon {
		t.Errorf("cordon = false, want true")
	}
	if !in.Drain {
		t.Errorf("drain = false, want true")
	}
	if in.PlannedTaint {
		t.Errorf("planned taint = true, want false")
	}
	if in.Reason != "reason of b-older" {
		t.Errorf("Reason = %q, want the oldest draining maintenance's", in.Reason)
	}
	if got := FormatEntries(in.Entries); got != "a-newer=Drain,b-older=Drain,c-planned=Planning" {
		t.Errorf("entries = %q", got)
	}
	if c := in.Condition(); c == nil {
		t.Errorf("condition = nil; want one")
	} else {
		if c.Reason != "Drain" {
			t.Errorf("condition reason %q; want Drain", c.Reason)
		}
		if want := "NodeMaintenance a-newer (Drain), b-older (Drain), c-planned (Planning)"; c.Message != want {
			t.Errorf("condition message %q; want %q", c.Message, want)
		}
	}

	if !in.Evict {
		t.Errorf("evict = false, want true")
	}
	if in.ResponseTimeout != DefaultResponseTimeout {
		t.Errorf("timeout = %v, want the default, %v", in.ResponseTimeout, DefaultResponseTimeout)
	}
	newer.Spec.EvacuationResponseTimeout = &nodemaintv1alpha1.Duration{Duration: time.Minute}
	older.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	older.Spec.EvacuationResponseTimeout = &nodemaintv1alpha1.Duration{Duration: time.Second}
	in = Intent([]*nodemaintv1alpha1.NodeMaintenance{newer, older}, phase)
	if !in.Evict {
		t.Errorf("evict = false, want true")
	}
	if in.ResponseTimeout != time.Minute {
		t.Errorf("timeout = %v, want the shortest timeout of the maintenances that evict, 1m", in.ResponseTimeout)
	}
	newer.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	if in = Intent([]*nodemaintv1alpha1.NodeMaintenance{newer, older}, phase); in.Evict {
		t.Error("signal-only maintenances evict")
	}

	in = Intent([]*nodemaintv1alpha1.NodeMaintenance{planned, done}, phase)
	if in.Cordon {
		t.Errorf("planned only: cordon")
	}
	if in.Drain {
		t.Errorf("planned only: drain")
	}
	if !in.PlannedTaint {
		t.Errorf("planned only: no planned taint")
	}
	if r := in.Condition().Reason; r != "Planning" {
		t.Errorf("planned only: condition reason %q, want Planning", r)
	}
	in = Intent([]*nodemaintv1alpha1.NodeMaintenance{done}, phase)
	if len(in.Entries) != 0 {
		t.Errorf("complete only: entries %+v, want none", in.Entries)
	}
	if in.PlannedTaint {
		t.Errorf("complete only: planned taint")
	}
	if c := in.Condition(); c != nil {
		t.Errorf("complete only: condition %+v, want none", c)
	}
}

func TestEntriesRoundTrip(t *testing.T) {
	entries := ParseEntries("b=Drain, a=Cordon,broken,=x")
	if got := FormatEntries(entries); got != "a=Cordon,b=Drain" {
		t.Errorf("round trip = %q", got)
	}
	if len(ParseEntries("")) != 0 {
		t.Error("empty annotation has entries")
	}
}

// TestIntentUnusableSpec: a maintenance whose duration the controller cannot use (stored before
// the API server refused it) keeps the node cordoned and may request evacuation, but never has a
// pod evicted or deleted nor the node tainted out-of-service (issue 16).
func TestIntentUnusableSpec(t *testing.T) {
	drainPhase := func(*nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase { return nodemaintv1alpha1.PhaseDrain }
	for _, spec := range []string{
		`{"evacuationResponseTimeout":"1d","drainTimeout":"2h","drainTimeoutAction":"Delete","shutdown":{"applyOutOfServiceTaint":true}}`,
		`{"drainTimeout":"2 days","drainTimeoutAction":"Delete","shutdown":{"applyOutOfServiceTaint":true}}`,
		`{"drainTimeout":"0s","drainTimeoutAction":"Delete","shutdown":{"applyOutOfServiceTaint":true}}`,
		`{"drainTimeout":"3s","drainTimeoutAction":"Delete","shutdown":{"applyOutOfServiceTaint":true}}`,
		`{"drainTimeout":"2h","drainTimeoutAction":"Delete","shutdown":{"applyOutOfServiceTaint":true,"notReadyGracePeriod":"1w"}}`,
		`{"evacuationResponseTimeout":"-1s","drainTimeout":"2h","drainTimeoutAction":"Delete","shutdown":{"applyOutOfServiceTaint":true}}`,
	} {
		bad := nm("bad", true, true, nodemaintv1alpha1.PhaseDrain)
		if err := json.Unmarshal([]byte(spec), &bad.Spec); err != nil {
			t.Fatalf("%s: decoding must not fail: %v", spec, err)
		}
		bad.Spec.Cordon, bad.Spec.Drain = true, true
		bad.Status.DrainStartTime = &metav1.Time{Time: time.Now().Add(-24 * time.Hour)}
		if Usable(bad) {
			t.Errorf("%s: Usable, want not", spec)
		}
		in := Intent([]*nodemaintv1alpha1.NodeMaintenance{bad}, drainPhase)
		// Cordon and drain (evacuation requested) only.
		if !in.Cordon {
			t.Errorf("%s: not cordoned", spec)
		}
		if !in.Drain {
			t.Errorf("%s: not drained", spec)
		}
		if in.Evict {
			t.Errorf("%s: intent evicts", spec)
		}
		if Deletes(bad) {
			t.Errorf("%s: deletes", spec)
		}
		if Evicts(bad) {
			t.Errorf("%s: evicts", spec)
		}
		if in.OutOfService {
			t.Errorf("%s: out of service", spec)
		}
		if d := DrainDeadline(bad); !d.IsZero() {
			t.Errorf("%s: a drain deadline %v from an unusable spec", spec, d)
		}
		if d := NodeDrainDeadline(bad, DrainStart{Start: time.Now().Add(-24 * time.Hour)}); !d.IsZero() {
			t.Errorf("%s: a node drain deadline %v from an unusable spec", spec, d)
		}
		// The same maintenance with usable durations does evict, delete and taint.
		good := nm("good", true, true, nodemaintv1alpha1.PhaseDrain)
		good.Spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: 2 * time.Hour}
		good.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionDelete
		good.Spec.Shutdown = &nodemaintv1alpha1.ShutdownSpec{ApplyOutOfServiceTaint: true}
		good.Status.DrainStartTime = bad.Status.DrainStartTime
		in = Intent([]*nodemaintv1alpha1.NodeMaintenance{good}, drainPhase)
		if !in.Evict {
			t.Errorf("usable maintenance: intent %+v; want evict", in)
		}
		if !Deletes(good) {
			t.Errorf("usable maintenance: does not delete; want it to")
		}
		if NodeDrainDeadline(good, DrainStart{Start: time.Now()}).IsZero() {
			t.Errorf("usable maintenance: no node drain deadline")
		}
		if !in.OutOfService {
			t.Errorf("usable maintenance: intent %+v; want out-of-service", in)
		}
	}
}

func selectorOf(terms ...corev1.NodeSelectorTerm) Selector {
	return NewSelector(&nodemaintv1alpha1.NodeMaintenance{Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: corev1.NodeSelector{NodeSelectorTerms: terms}}})
}

func namesTerm(op corev1.NodeSelectorOperator, names ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: op, Values: names}}}
}

// TestSelectorNames: one term names many nodes; what nodeaffinity cannot parse selects nothing
// and says why.
func TestSelectorNames(t *testing.T) {
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("node-%d", i))
	}
	in := selectorOf(namesTerm(corev1.NodeSelectorOpIn, names...))
	notIn := selectorOf(namesTerm(corev1.NodeSelectorOpNotIn, names...))
	for _, n := range names {
		if !in.Matches(node(n)) {
			t.Errorf("%s: In does not select it; want it to", n)
		}
		if notIn.Matches(node(n)) {
			t.Errorf("%s: NotIn selects it; want it not to", n)
		}
	}
	if in.Matches(node("node-20")) {
		t.Errorf("node-20: In selects it; want it not to")
	}
	if !notIn.Matches(node("node-20")) {
		t.Errorf("node-20: NotIn does not select it; want it to")
	}
	for name, sel := range map[string]Selector{
		"no values":  selectorOf(namesTerm(corev1.NodeSelectorOpIn)),
		"operator":   selectorOf(namesTerm(corev1.NodeSelectorOpExists)),
		"key":        selectorOf(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "spec.unschedulable", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}),
		"bad label":  selectorOf(namesTerm(corev1.NodeSelectorOpIn, "node-1"), corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: "Bogus"}}}),
		"empty term": selectorOf(corev1.NodeSelectorTerm{}),
		"no term":    selectorOf(),
	} {
		if sel.Matches(node("node-1")) {
			t.Errorf("%s: selects node-1", name)
		}
		if (sel.Err() == nil) != (name == "empty term" || name == "no term") {
			t.Errorf("%s: Err() = %v", name, sel.Err())
		}
	}
}
