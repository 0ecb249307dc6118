package maintenance

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Fuzz targets of the maintenance logic; the seed corpus is under testdata/fuzz/<FuzzTarget>/.
// Run one with e.g. go test ./internal/maintenance -run '^$' -fuzz '^FuzzTargeted$' -fuzztime 30s

// FuzzTargeted: DaemonSet pods, mirror pods and finished pods are never targeted, whatever else
// they carry; every other pod is (KEP-4212: unreplicated, emptyDir, terminating pods included).
func FuzzTargeted(f *testing.F) {
	f.Add("apps/v1", "DaemonSet", true, false, "Running", false)
	f.Add("apps/v1", "ReplicaSet", true, true, "Running", false)
	f.Add("example.com/v1", "DaemonSet", true, false, "Pending", true)
	f.Add("apps/v1", "DaemonSet", false, false, "Running", false)
	f.Add("", "", false, false, "Succeeded", false)
	f.Fuzz(func(t *testing.T, apiVersion, kind string, controller, mirror bool, phase string, terminating bool) {
		pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPhase(phase)}}
		if kind != "" {
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "uid", Controller: ptr.To(controller)}}
		}
		if mirror {
			pod.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
		}
		if terminating {
			pod.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}
		daemon := controller && kind == "DaemonSet" && strings.HasPrefix(apiVersion, "apps/")
		finished := phase == string(corev1.PodSucceeded) || phase == string(corev1.PodFailed)
		want := !daemon && !mirror && !finished
		if got := Targeted(pod); got != want {
			t.Fatalf("Targeted(owner %s %s controller=%v, mirror=%v, phase %q, terminating=%v) = %v, want %v",
				apiVersion, kind, controller, mirror, phase, terminating, got, want)
		}
	})
}

// FuzzEntries: the node annotation never yields an entry without a name, and what FormatEntries
// writes reads back the same, sorted by name.
func FuzzEntries(f *testing.F) {
	f.Add("b=Drain,a=Cordon")
	f.Add("a=Drain,,=Cordon,b,c=")
	f.Add(" x = Planning , y=DrainComplete")
	f.Fuzz(func(t *testing.T, value string) {
		entries := ParseEntries(value)
		for _, e := range entries {
			if e.Name == "" || strings.Contains(e.Name, ",") || strings.Contains(e.Name, "=") {
				t.Fatalf("ParseEntries(%q) yields a bad name %q", value, e.Name)
			}
		}
		// Names with surrounding spaces or "=" in the phase do not round-trip by design; keep the
		// well-formed ones.
		var clean []NodeEntry
		for _, e := range entries {
			if e.Name == strings.TrimSpace(e.Name) && !strings.ContainsAny(string(e.Phase), ",=") && string(e.Phase) == strings.TrimSpace(string(e.Phase)) {
				clean = append(clean, e)
			}
		}
		formatted := FormatEntries(slices.Clone(clean))
		back := ParseEntries(formatted)
		if len(back) != len(clean) {
			t.Fatalf("%q -> %v -> %q -> %v", value, clean, formatted, back)
		}
		for i := 1; i < len(back); i++ {
			if back[i-1].Name > back[i].Name {
				t.Fatalf("FormatEntries does not sort: %q", formatted)
			}
		}
	})
}

var phases = []nodemaintv1alpha1.Phase{"", nodemaintv1alpha1.PhasePlanning, nodemaintv1alpha1.PhaseCordon, nodemaintv1alpha1.PhaseDrain,
	nodemaintv1alpha1.PhaseDrainComplete, nodemaintv1alpha1.PhaseMaintenanceComplete}

// FuzzIntent: the intent of several maintenances on one node is their union, and does not depend
// on the order they are listed in: cordoned while any cordons, drained while any drains, the
// shortest response timeout of those that evict, the planned taint only when nothing cordons.
func FuzzIntent(f *testing.F) {
	f.Add([]byte{0x0b, 0x12, 0x27})
	f.Add([]byte{0x03, 0x83, 0x41})
	f.Add([]byte{0x01, 0x00, 0x05})
	f.Fuzz(func(t *testing.T, data []byte) {
		var nms []*nodemaintv1alpha1.NodeMaintenance
		for i, b := range data {
			if i == 8 {
				break
			}
			nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("nm-%d", i), CreationTimestamp: metav1.NewTime(time.Unix(int64(b>>6), 0)),
			}}
			nm.Spec.Cordon = b&1 != 0
			nm.Spec.Drain = nm.Spec.Cordon && b&2 != 0
			nm.Spec.Reason = fmt.Sprintf("reason %d", i)
			if b&4 != 0 {
				nm.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
			}
			if b&8 != 0 {
				nm.Spec.EvacuationResponseTimeout = &nodemaintv1alpha1.Duration{Duration: time.Duration(b>>4) * time.Minute}
			}
			nm.Status.Phase = phases[int(b>>4)%len(phases)]
			if b&0x20 != 0 && b&0x10 != 0 {
				nm.DeletionTimestamp = &metav1.Time{Time: time.Unix(9, 0)}
			}
			nms = append(nms, nm)
		}
		phaseOf := func(nm *nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase { return Phase(nm, false) }
		got := Intent(nms, phaseOf)

		var want NodeIntent
		for _, nm := range nms {
			p := phaseOf(nm)
			if p == nodemaintv1alpha1.PhaseMaintenanceComplete {
				continue
			}
			want.Entries = append(want.Entries, NodeEntry{Name: nm.Name, Phase: p})
			want.Cordon = want.Cordon || nm.Spec.Cordon
			if nm.Spec.Drain {
				want.Drain = true
				// A response timeout of 0 is out of bounds (1s..24h): the spec is not usable and
				// the maintenance only requests evacuation.
				usable := nm.Spec.EvacuationResponseTimeout == nil || nm.Spec.EvacuationResponseTimeout.Duration >= time.Second
				if usable && nm.Spec.EvictionPolicy != nodemaintv1alpha1.EvictionPolicySignalOnly {
					timeout := DefaultResponseTimeout
					if nm.Spec.EvacuationResponseTimeout != nil {
						timeout = nm.Spec.EvacuationResponseTimeout.Duration
					}
					if !want.Evict || timeout < want.ResponseTimeout {
						want.ResponseTimeout = timeout
					}
					want.Evict = true
				}
			}
		}
		if len(got.Entries) != len(want.Entries) {
			t.Errorf("Intent: %d entries; want %d (got %+v)", len(got.Entries), len(want.Entries), got)
		}
		if got.Cordon != want.Cordon {
			t.Errorf("Intent: cordon %v; want %v", got.Cordon, want.Cordon)
		}
		if got.Drain != want.Drain {
			t.Errorf("Intent: drain %v; want %v", got.Drain, want.Drain)
		}
		if got.Evict != want.Evict {
			t.Errorf("Intent: evict %v; want %v", got.Evict, want.Evict)
		}
		if got.ResponseTimeout != want.ResponseTimeout {
			t.Errorf("Intent: response timeout %v; want %v", got.ResponseTimeout, want.ResponseTimeout)
		}
		if t.Failed() {
			t.FailNow()
		}
		if got.PlannedTaint != (len(want.Entries) > 0 && !want.Cordon) {
			t.Fatalf("PlannedTaint %v with %d entries, cordon %v", got.PlannedTaint, len(want.Entries), want.Cordon)
		}
		if (got.Condition() == nil) != (len(want.Entries) == 0) {
			t.Fatalf("the UnderMaintenance condition is there iff some maintenance is: %+v", got.Condition())
		}
		if got.Drain && !slices.ContainsFunc(nms, func(nm *nodemaintv1alpha1.NodeMaintenance) bool { return nm.Spec.Drain && nm.Spec.Reason == got.Reason }) {
			t.Fatalf("the drain reason %q is no draining maintenance's", got.Reason)
		}
		reversed := slices.Clone(nms)
		slices.Reverse(reversed)
		if again := Intent(reversed, phaseOf); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("listing order matters:\n%+v\n%+v", got, again)
		}
	})
}

// FuzzSelector: a selector with multi-value metadata.name requirements selects exactly the nodes
// that nodeaffinity selects with the same selector written with single values, as KEP-4212's
// terms mean: In [a, b] in a term is the OR of the term with In [a] and with In [b]; NotIn
// [a, b] is NotIn [a] and NotIn [b] in the same term. Each byte of data is one requirement:
// bits 0-1 the term it goes in (of 3), bit 2 a label (zone In/NotIn) or a name requirement,
// bit 3 the operator (In or NotIn), bits 4-7 the set of values (of 4 names or 4 zones; none
// gives one value).
func FuzzSelector(f *testing.F) {
	f.Add([]byte{0x70})                   // one term: metadata.name In [n1 n2 n3]
	f.Add([]byte{0x78, 0x14})             // NotIn [n1 n2 n3], and zone In [z0] in the same term
	f.Add([]byte{0x30, 0xc1, 0x5c, 0x21}) // two terms, names and zones ANDed in each
	f.Add([]byte{0x30, 0x60, 0x18})       // two In lists in one term: their intersection
	names := []string{"n0", "n1", "n2", "n3"}
	zones := []string{"z0", "z1", "z2", "z3"}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8 {
			data = data[:8]
		}
		terms := make([]corev1.NodeSelectorTerm, 3)
		for _, b := range data {
			var values []string
			from := names
			if b&4 != 0 {
				from = zones
			}
			for i := range 4 {
				if b>>(4+i)&1 != 0 {
					values = append(values, from[i])
				}
			}
			if len(values) == 0 {
				values = from[:1]
			}
			op := corev1.NodeSelectorOpIn
			if b&8 != 0 {
				op = corev1.NodeSelectorOpNotIn
			}
			term := &terms[int(b&3)%3]
			if b&4 != 0 {
				term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: op, Values: values})
			} else {
				term.MatchFields = append(term.MatchFields, corev1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: op, Values: values})
			}
		}
		sel := NewSelector(&nodemaintv1alpha1.NodeMaintenance{Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: corev1.NodeSelector{NodeSelectorTerms: terms}}})
		if sel.Err() != nil {
			t.Fatalf("NewSelector(%+v): %v", terms, sel.Err())
		}
		// The same selector with single-valued metadata.name requirements.
		var single []corev1.NodeSelectorTerm
		for _, term := range terms {
			expanded := []corev1.NodeSelectorTerm{{MatchExpressions: term.MatchExpressions}}
			for _, r := range term.MatchFields {
				if r.Operator == corev1.NodeSelectorOpNotIn {
					for i := range expanded {
						for _, v := range r.Values {
							expanded[i].MatchFields = append(expanded[i].MatchFields, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: []string{v}})
						}
					}
					continue
				}
				var next []corev1.NodeSelectorTerm
				for _, e := range expanded {
					for _, v := range r.Values {
						c := *e.DeepCopy()
						c.MatchFields = append(c.MatchFields, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: []string{v}})
						next = append(next, c)
					}
				}
				expanded = next
			}
			single = append(single, expanded...)
		}
		want, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: single})
		if err != nil {
			t.Fatalf("nodeaffinity refuses the single-valued selector %+v: %v", single, err)
		}
		for _, name := range names {
			for _, zone := range zones {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
				if got, want := sel.Matches(node), want.Match(node); got != want {
					t.Fatalf("node %s in %s: selected %v, nodeaffinity with single values says %v\nterms %+v\nsingle-valued %+v", name, zone, got, want, terms, single)
				}
			}
		}
	})
}

// FuzzAdmit: at most the bound of the maintenances asking something of a node act on it, and the
// others wait; a maintenance the node records is never displaced by one it does not record, nor
// an older one by a newer; which act does not depend on the listing order; once admitted and
// recorded, the acting maintenances keep their places whatever comes to select the node; and
// when one of them ends, the first waiting takes its place. Each byte of data is a maintenance:
// bit 0 it asks something of the node, bit 1 the node records it, bits 4-5 its creation second;
// the first byte also gives the bound (1 to 4).
func FuzzAdmit(f *testing.F) {
	f.Add([]byte{0x02, 0x01, 0x11, 0x21, 0x03, 0x31})
	f.Add([]byte{0x00, 0x03, 0x03, 0x01, 0x01, 0x00, 0x13})
	f.Add([]byte{0x03, 0x31, 0x21, 0x11, 0x01, 0x33, 0x23, 0x13, 0x03})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		most := 1 + int(data[0])%4
		data = data[1:min(len(data), 17)]
		present := map[string]bool{}
		var nms []*nodemaintv1alpha1.NodeMaintenance
		var recorded []NodeEntry
		for i, b := range data {
			nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("nm-%02d", i), CreationTimestamp: metav1.NewTime(time.Unix(int64(b>>4&3), 0))}}
			present[nm.Name] = b&1 != 0
			if b&2 != 0 {
				recorded = append(recorded, NodeEntry{Name: nm.Name, Phase: nodemaintv1alpha1.PhaseCordon})
			}
			nms = append(nms, nm)
		}
		asks := func(nm *nodemaintv1alpha1.NodeMaintenance) bool { return present[nm.Name] }
		onNode := map[string]bool{}
		for _, e := range recorded {
			onNode[e.Name] = true
		}
		before := func(a, b *nodemaintv1alpha1.NodeMaintenance) bool {
			if onNode[a.Name] != onNode[b.Name] {
				return onNode[a.Name]
			}
			return Older(a, b) < 0
		}

		acting, beyond := admit(nms, recorded, asks, most)
		if len(acting)+len(beyond) != len(nms) {
			t.Fatalf("%d acting and %d beyond of %d", len(acting), len(beyond), len(nms))
		}
		seen := map[string]bool{}
		actingPresent := 0
		for _, nm := range acting {
			seen[nm.Name] = true
			if present[nm.Name] {
				actingPresent++
			}
		}
		for _, nm := range beyond {
			if seen[nm.Name] {
				t.Fatalf("%s waits, and acts too", nm.Name)
			}
			if !present[nm.Name] {
				t.Fatalf("%s waits, and asks nothing of the node", nm.Name)
			}
			seen[nm.Name] = true
			for _, a := range acting {
				if present[a.Name] && before(nm, a) {
					t.Fatalf("%s waits while %s, which comes after it, acts", nm.Name, a.Name)
				}
			}
		}
		if actingPresent > most {
			t.Fatalf("%d act; want at most the bound %d", actingPresent, most)
		}
		if len(beyond) > 0 && actingPresent != most {
			t.Fatalf("%d act with %d waiting; want the bound %d full while any waits", actingPresent, len(beyond), most)
		}
		for i := 1; i < len(beyond); i++ {
			if before(beyond[i], beyond[i-1]) {
				t.Fatalf("the waiting are not in the order they will act: %s before %s", beyond[i-1].Name, beyond[i].Name)
			}
		}
		names := func(list []*nodemaintv1alpha1.NodeMaintenance) string {
			var out []string
			for _, nm := range list {
				out = append(out, nm.Name)
			}
			slices.Sort(out)
			return strings.Join(out, ",")
		}
		reversed := slices.Clone(nms)
		slices.Reverse(reversed)
		if a2, _ := admit(reversed, recorded, asks, most); names(a2) != names(acting) {
			t.Fatalf("listing order matters: %s, reversed %s", names(acting), names(a2))
		}

		// Recorded as the node reconciler records them, the acting keep their places against any
		// newcomer, even older ones.
		var nowRecorded []NodeEntry
		for _, nm := range acting {
			if present[nm.Name] {
				nowRecorded = append(nowRecorded, NodeEntry{Name: nm.Name, Phase: nodemaintv1alpha1.PhaseCordon})
			}
		}
		newcomer := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "a-newcomer", CreationTimestamp: metav1.NewTime(time.Unix(-1, 0))}}
		present[newcomer.Name] = true
		a3, _ := admit(append(slices.Clone(nms), newcomer), nowRecorded, asks, most)
		if names(a3) != names(acting) && !(actingPresent < most && names(a3) == names(append(slices.Clone(acting), newcomer))) {
			t.Fatalf("a newcomer displaced: %s, then %s", names(acting), names(a3))
		}
		// One acting ends: the first waiting (as the node now records the acting) acts.
		present[newcomer.Name] = false
		_, waiting := admit(nms, nowRecorded, asks, most)
		for _, nm := range acting {
			if !present[nm.Name] || len(waiting) == 0 {
				continue
			}
			present[nm.Name] = false
			a4, b4 := admit(nms, nowRecorded, asks, most)
			if !slices.Contains(a4, waiting[0]) {
				t.Fatalf("%s ended, and %s, first to wait, does not act: %s", nm.Name, waiting[0].Name, names(a4))
			}
			if slices.Contains(b4, waiting[0]) {
				t.Fatalf("%s ended, and %s, first to wait, still waits: %s", nm.Name, waiting[0].Name, names(b4))
			}
			present[nm.Name] = true
			break
		}
	})
}
