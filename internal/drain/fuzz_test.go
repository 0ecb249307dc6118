package drain

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nodemaint/nodemaint/internal/testutil"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// The fuzz targets build DrainRules, pods, namespaces and nodes from the fuzzer's bytes (gen) and
// check properties of the result against a plain re-statement of the documented rules (the
// oracle), not merely that nothing panics. Run one with e.g.
//
//	go test ./internal/drain -run '^$' -fuzz '^FuzzClassify$' -fuzztime 30s
//
// The seed corpus is under testdata/fuzz/<FuzzTarget>/.

// gen hands out the fuzzer's bytes; past their end it hands out zeros.
type gen struct {
	testutil.FuzzBytes
}

var (
	labelKeys   = []string{"app", "tier", "zone"}
	labelValues = []string{"a", "b", "c"}
)

// labelSet picks each key's value (or its absence) from two bits of b.
func labelSet(b byte) map[string]string {
	m := map[string]string{}
	for i, k := range labelKeys {
		if v := (b >> (2 * i)) & 3; v < 3 {
			m[k] = labelValues[v]
		}
	}
	return m
}

// selector returns a label selector, sometimes one that does not parse (In without values).
func (g *gen) selector() *metav1.LabelSelector {
	b, c := g.Byte(), g.Byte()
	key, val := labelKeys[c%3], labelValues[(c/3)%3]
	switch b % 6 {
	case 0:
		return &metav1.LabelSelector{}
	case 1:
		return &metav1.LabelSelector{MatchLabels: map[string]string{key: val}}
	case 2:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: []string{val, labelValues[(c/9)%3]}}}}
	case 3:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpNotIn, Values: []string{val}}}}
	case 4:
		op := metav1.LabelSelectorOpExists
		if c&0x80 != 0 {
			op = metav1.LabelSelectorOpDoesNotExist
		}
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op}}}
	default:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn}}}
	}
}

func (g *gen) optionalSelector() *metav1.LabelSelector {
	if g.Byte()%3 == 0 {
		return nil
	}
	return g.selector()
}

var behaviors = []nodemaintv1alpha1.DrainBehavior{nodemaintv1alpha1.DrainBehaviorDrain, nodemaintv1alpha1.DrainBehaviorSkip, nodemaintv1alpha1.DrainBehaviorWaitCompleted}

// rules returns up to 6 DrainRules with distinct names (as in a cluster), in no particular order.
func (g *gen) rules() []nodemaintv1alpha1.DrainRule {
	n := int(g.Byte() % 7)
	seen := map[string]bool{}
	var out []nodemaintv1alpha1.DrainRule
	for range n {
		b := g.Byte()
		name := fmt.Sprintf("rule-%c%c", 'a'+b%4, 'a'+(b/4)%4)
		if seen[name] {
			continue
		}
		seen[name] = true
		dr := nodemaintv1alpha1.DrainRule{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cfg := g.Byte()
		dr.Spec.Drain.Behavior = behaviors[cfg%3]
		if dr.Spec.Drain.Behavior == nodemaintv1alpha1.DrainBehaviorDrain && cfg&0x10 != 0 {
			dr.Spec.Drain.Order = ptr.To(int32(int8(g.Byte())))
		}
		for range int(cfg>>5) % 3 {
			dr.Spec.Nodes = append(dr.Spec.Nodes, nodemaintv1alpha1.DrainRuleNodeSelector{Selector: *g.selector()})
		}
		for range 1 + int(g.Byte()%2) {
			dr.Spec.Pods = append(dr.Spec.Pods, nodemaintv1alpha1.DrainRulePodSelector{Selector: g.optionalSelector(), NamespaceSelector: g.optionalSelector()})
		}
		out = append(out, dr)
	}
	return out
}

// pod returns a pod with labels, maybe the drain label, and maybe tolerations.
func (g *gen) pod(i int) *corev1.Pod {
	b, t := g.Byte(), g.Byte()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)), Labels: labelSet(b),
	}}
	switch t % 5 {
	case 1:
		pod.Labels[nodemaintv1alpha1.DrainLabel] = nodemaintv1alpha1.DrainLabelSkip
	case 2:
		pod.Labels[nodemaintv1alpha1.DrainLabel] = nodemaintv1alpha1.DrainLabelWaitCompleted
	case 3:
		pod.Labels[nodemaintv1alpha1.DrainLabel] = "Skip" // not a value of the label: ignored
	}
	switch (t / 5) % 6 {
	case 1:
		pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	case 2:
		pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	case 3:
		pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	case 4:
		pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}}
	case 5:
		pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpEqual, Value: "", Effect: ""}}
	}
	return pod
}

// tolerates restates which tolerations match node.kubernetes.io/unschedulable:NoSchedule.
func tolerates(pod *corev1.Pod) bool {
	for _, t := range pod.Spec.Tolerations {
		keyOK := t.Key == corev1.TaintNodeUnschedulable || (t.Key == "" && t.Operator == corev1.TolerationOpExists)
		effectOK := t.Effect == "" || t.Effect == corev1.TaintEffectNoSchedule
		valueOK := t.Operator == corev1.TolerationOpExists || t.Value == ""
		if keyOK && effectOK && valueOK {
			return true
		}
	}
	return false
}

// oracle restates Classify's contract: the drain label, then tolerating the unschedulable taint,
// then the first rule by name that matches the node (any node selector, or none) and the pod (any
// pod selector whose pod and namespace parts both match), where a selector that does not parse
// matches everything and makes the rule hold the pod (InvalidRule).
func oracle(rules []nodemaintv1alpha1.DrainRule, pod *corev1.Pod, nsLabels, nodeLabels map[string]string) (Class, int) {
	sorted := append([]nodemaintv1alpha1.DrainRule(nil), rules...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	broken := 0
	var match *nodemaintv1alpha1.DrainRule
	matchBroken := false
	for i := range sorted {
		dr := &sorted[i]
		parse := func(s *metav1.LabelSelector) labels.Selector {
			if s == nil {
				return labels.Everything()
			}
			sel, err := metav1.LabelSelectorAsSelector(s)
			if err != nil {
				return nil
			}
			return sel
		}
		matches := func(sel labels.Selector, set map[string]string) bool {
			return sel == nil || sel.Matches(labels.Set(set))
		}
		ok, nodeOK, podOK := true, len(dr.Spec.Nodes) == 0, false
		for _, n := range dr.Spec.Nodes {
			sel := parse(&n.Selector)
			ok = ok && sel != nil
			nodeOK = nodeOK || matches(sel, nodeLabels)
		}
		for _, p := range dr.Spec.Pods {
			ps, ns := parse(p.Selector), parse(p.NamespaceSelector)
			ok = ok && ps != nil && ns != nil
			podOK = podOK || (matches(ps, pod.Labels) && matches(ns, nsLabels))
		}
		if !ok {
			broken++
		}
		if match == nil && nodeOK && podOK {
			match, matchBroken = dr, !ok
		}
	}
	switch pod.Labels[nodemaintv1alpha1.DrainLabel] {
	case "skip":
		return Class{Behavior: nodemaintv1alpha1.DrainBehaviorSkip, Source: "label nodemaint.dev/drain=skip"}, broken
	case "wait-completed":
		return Class{Behavior: nodemaintv1alpha1.DrainBehaviorWaitCompleted, Source: "label nodemaint.dev/drain=wait-completed"}, broken
	}
	if tolerates(pod) {
		return Class{Behavior: nodemaintv1alpha1.DrainBehaviorSkip, Source: "tolerates " + corev1.TaintNodeUnschedulable}, broken
	}
	if match == nil {
		return Class{Behavior: nodemaintv1alpha1.DrainBehaviorDrain}, broken
	}
	c := Class{Behavior: match.Spec.Drain.Behavior, Source: "DrainRule " + match.Name}
	if matchBroken {
		c.InvalidRule = "DrainRule " + match.Name + ": ..."
		return c, broken
	}
	if match.Spec.Drain.Order != nil {
		c.Order = *match.Spec.Drain.Order
	}
	return c, broken
}

// FuzzClassify: classification is total, deterministic, independent of the order the rules are
// listed in, and follows the documented precedence: the nodemaint.dev/drain label, then a
// toleration of the unschedulable taint, then the first matching DrainRule in alphabetical order.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0x05, 0x01, 0x40, 1, 1, 0, 2, 0x06, 0x10, 7, 0, 1, 1, 0, 0x00, 0x01, 0x01, 0x00})
	f.Add([]byte{2, 0x01, 0x00, 0, 1, 0, 0x02, 0x01, 0, 1, 0, 0x00, 0x00, 0x00, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{FuzzBytes: testutil.FuzzBytes{Data: data}}
		list := g.rules()
		rs := NewRules(list)
		nodeLabels, nsLabels := labelSet(g.Byte()), labelSet(g.Byte())
		for i := 0; i == 0 || (g.More() && i < 8); i++ {
			pod := g.pod(i)
			got := rs.Classify(pod, nsLabels, nodeLabels)
			want, broken := oracle(list, pod, nsLabels, nodeLabels)
			if want.InvalidRule != "" && strings.HasPrefix(got.InvalidRule, got.Source+": ") {
				want.InvalidRule = got.InvalidRule // the oracle does not restate the parse error
			}
			if got != want {
				t.Fatalf("pod labels %v tolerations %v, namespace %v, node %v, rules %s:\ngot  %+v\nwant %+v",
					pod.Labels, pod.Spec.Tolerations, nsLabels, nodeLabels, describe(list), got, want)
			}
			if len(rs.Errors()) != broken {
				t.Fatalf("Errors() = %v, want %d rules that do not parse", rs.Errors(), broken)
			}
			if got.Order != 0 && got.Behavior != nodemaintv1alpha1.DrainBehaviorDrain {
				t.Fatalf("order %d with behavior %s; an order only comes with Drain (%+v)", got.Order, got.Behavior, got)
			}
			if got.Order != 0 && !strings.HasPrefix(got.Source, "DrainRule ") {
				t.Fatalf("order %d from source %q; an order only comes from a DrainRule (%+v)", got.Order, got.Source, got)
			}
			// Deterministic, and the listing order of the rules does not matter.
			reversed := append([]nodemaintv1alpha1.DrainRule(nil), list...)
			for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
				reversed[i], reversed[j] = reversed[j], reversed[i]
			}
			if again := NewRules(reversed).Classify(pod, nsLabels, nodeLabels); again != got {
				t.Fatalf("rules listed in reverse: %+v, before %+v", again, got)
			}
		}
	})
}

func describe(rules []nodemaintv1alpha1.DrainRule) string {
	var b strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&b, "\n  %s: %+v", r.Name, r.Spec)
	}
	return b.String()
}

// FuzzPlanAndBlocked: a node's plan partitions its pods (none lost, none twice), drains the lowest
// order group first, and the blocked status built from it accounts for every held pod exactly
// once, names at most 5 pods per reason and at most 16 reasons, most pods first.
func FuzzPlanAndBlocked(f *testing.F) {
	f.Add([]byte{}, true, true)
	f.Add([]byte{0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 5, 1, 0, 9, 2}, true, false)
	f.Add([]byte{0x10, 1, 0x21, 2, 0x32, 3, 0x43, 4, 0x54, 5, 0x65, 6, 0x76, 7, 0x87, 8, 0x98, 9, 0xa9, 10, 0xba, 11, 0xcb, 12, 0xdc, 13, 0xed, 14, 0xfe, 15, 0x0f, 16, 0x1e, 17, 0x2d, 18}, false, true)
	f.Fuzz(func(t *testing.T, data []byte, draining, evict bool) {
		g := &gen{FuzzBytes: testutil.FuzzBytes{Data: data}}
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		policy := Policy{Evict: evict, ResponseTimeout: time.Duration(g.Byte()%4) * time.Minute}
		// The refusal memory's first back-off of a pod (evictor.Refusals): a second.
		refusals := map[types.UID]Refusal{}
		var pods []Classified
		for i := 0; g.More() && i < 64; i++ {
			pod := g.pod(i)
			k, s := g.Byte(), g.Byte()
			c := Class{Behavior: behaviors[k%3]}
			switch c.Behavior {
			case nodemaintv1alpha1.DrainBehaviorDrain:
				c.Order = int32(int8(s)) / 8
			default:
				c.Source = fmt.Sprintf("DrainRule r%d", s%20)
			}
			if k%7 == 6 {
				c.Source = fmt.Sprintf("DrainRule r%d", s%20)
				c.InvalidRule = c.Source + `: "Equals" is not a valid label selector operator`
			}
			// What the owner, the API server and the kubelet made of the pod.
			if k&0x08 != 0 {
				evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
					Reason: evacuation.ReasonNodeMaintenance, LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(s%5) * time.Minute))})
			}
			switch (k >> 4) % 4 {
			case 1:
				evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Owner"})
			case 2:
				evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: "Declined"})
			case 3:
				pod.DeletionTimestamp = &metav1.Time{Time: now}
			}
			if k&0x40 != 0 {
				pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}}
			}
			if k&0x80 != 0 {
				refusals[pod.UID] = Refusal{NotBefore: now.Add(time.Second - time.Duration(s%3)*time.Second), Reason: nodemaintv1alpha1.BlockedReasonPodDisruptionBudget,
					Message: fmt.Sprintf("The disruption budget pdb-%d does not allow evicting pods currently", s%24)}
			}
			if i%7 == 3 {
				c.Protected = "nodemaint-controller's own pod"
			}
			pods = append(pods, Classified{Pod: pod, Class: c})
		}

		plan := NewPlan(pods)
		checkPlan(t, pods, plan)

		// Decisions about the current group.
		for _, c := range plan.Current {
			d := Judge(c, now, policy)
			if d.Evict && !policy.Evict {
				t.Fatalf("pod %s evicted by a signal-only drain: %+v", c.Pod.Name, d)
			}
			if d.Evict && c.Pod.DeletionTimestamp != nil {
				t.Fatalf("pod %s evicted though terminating: %+v", c.Pod.Name, d)
			}
			if d.Evict && evacuation.Accepted(c.Pod) {
				t.Fatalf("pod %s evicted though its owner accepted the evacuation: %+v", c.Pod.Name, d)
			}
			if d.Evict && c.Class.Protected != "" {
				t.Fatalf("pod %s evicted though protected (%s): %+v", c.Pod.Name, c.Class.Protected, d)
			}
			if d.Evict && !evacuation.Declined(c.Pod) {
				// Without a decline, only a response timeout run out evicts, bare pod or not.
				if req := evacuation.Condition(c.Pod, evacuation.Request); req == nil || now.Sub(req.LastTransitionTime.Time) < policy.ResponseTimeout {
					t.Fatalf("pod %s evicted before its response timeout: %+v", c.Pod.Name, d)
				}
			}
			if d.Evict == (d.Reason != "") {
				t.Fatalf("a decision either evicts or says why not: %+v", d)
			}
			if d.RecheckAfter < 0 {
				t.Fatalf("recheck %v; want none negative (%+v)", d.RecheckAfter, d)
			}
			if again := Judge(c, now, policy); again != d {
				t.Fatalf("Judge is not deterministic: %+v then %+v", d, again)
			}
		}

		var current []Verdict
		if draining {
			current = JudgeCurrent(plan.Current, now, policy, refusals)
			for i, d := range current {
				c := plan.Current[i]
				plain := Judge(c, now, policy)
				if d.Reason == "" {
					t.Fatalf("pod %s: JudgeCurrent %+v names no reason; want one always", c.Pod.Name, d)
				}
				if d.Evict && !plain.Evict {
					t.Fatalf("pod %s: JudgeCurrent %+v evicts, Judge %+v does not; want it to evict only what Judge evicts", c.Pod.Name, d, plain)
				}
				if d.Evict && refusals[c.Pod.UID].NotBefore.After(now) {
					t.Fatalf("pod %s evicted while its refused eviction backs off: %+v", c.Pod.Name, d)
				}
			}
		}
		got := Blocked(plan, current, now)
		checkBlocked(t, plan, draining, policy, got)
		if again := Blocked(plan, current, now); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("Blocked is not deterministic:\n%+v\n%+v", got, again)
		}
	})
}

func checkPlan(t *testing.T, pods []Classified, plan Plan) {
	t.Helper()
	seen := map[*corev1.Pod]string{}
	note := func(list string, cs []Classified) {
		for _, c := range cs {
			if prev, ok := seen[c.Pod]; ok {
				t.Fatalf("pod %s in %s and %s", c.Pod.Name, prev, list)
			}
			seen[c.Pod] = list
		}
	}
	note("Current", plan.Current)
	note("Later", plan.Later)
	note("WaitCompleted", plan.WaitCompleted)
	note("Skipped", plan.Skipped)
	note("Held", plan.Held)
	if len(seen) != len(pods) {
		t.Fatalf("plan holds %d pods, given %d", len(seen), len(pods))
	}
	lowest, anyDrain := int32(0), false
	for _, c := range pods {
		want := map[nodemaintv1alpha1.DrainBehavior][]string{
			nodemaintv1alpha1.DrainBehaviorDrain:         {"Current", "Later"},
			nodemaintv1alpha1.DrainBehaviorSkip:          {"Skipped"},
			nodemaintv1alpha1.DrainBehaviorWaitCompleted: {"WaitCompleted"},
		}[c.Class.Behavior]
		if c.Class.InvalidRule != "" {
			// A rule that does not parse holds its pods, whatever its behavior.
			want = []string{"Held"}
		}
		if !contains(want, seen[c.Pod]) {
			t.Fatalf("pod %s of behavior %s in %s", c.Pod.Name, c.Class.Behavior, seen[c.Pod])
		}
		if c.Class.Behavior == nodemaintv1alpha1.DrainBehaviorDrain && c.Class.InvalidRule == "" {
			if !anyDrain || c.Class.Order < lowest {
				lowest = c.Class.Order
			}
			anyDrain = true
		}
	}
	if anyDrain != (len(plan.Current) > 0) {
		t.Fatalf("Current is empty iff no pod is drained: %d current, drain pods %v", len(plan.Current), anyDrain)
	}
	for _, c := range plan.Current {
		if c.Class.Order != lowest {
			t.Fatalf("Current holds order %d, the lowest is %d", c.Class.Order, lowest)
		}
	}
	for _, c := range plan.Later {
		if c.Class.Order <= lowest {
			t.Fatalf("Later holds order %d, not above the lowest %d", c.Class.Order, lowest)
		}
	}
	if plan.Pending() != len(plan.Current)+len(plan.Later)+len(plan.WaitCompleted)+len(plan.Held) {
		t.Fatalf("Pending() = %d", plan.Pending())
	}
}

func checkBlocked(t *testing.T, plan Plan, draining bool, policy Policy, got []nodemaintv1alpha1.BlockedPods) {
	t.Helper()
	// Which reasons each held pod may be reported under.
	allowed := map[string][]string{}
	if draining {
		for _, c := range plan.Current {
			allowed[c.Pod.Namespace+"/"+c.Pod.Name] = []string{nodemaintv1alpha1.BlockedReasonTerminating, nodemaintv1alpha1.BlockedReasonEvacuatingByOwner, nodemaintv1alpha1.BlockedReasonWaitingForOwner, nodemaintv1alpha1.BlockedReasonEvicting, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, nodemaintv1alpha1.BlockedReasonOther}
			if c.Class.Protected != "" {
				// Never evicted: never reported as being evicted or refused.
				allowed[c.Pod.Namespace+"/"+c.Pod.Name] = []string{nodemaintv1alpha1.BlockedReasonTerminating, nodemaintv1alpha1.BlockedReasonEvacuatingByOwner, nodemaintv1alpha1.BlockedReasonWaitingForOwner, nodemaintv1alpha1.BlockedReasonProtected, nodemaintv1alpha1.BlockedReasonOther}
			}
		}
	}
	for _, c := range plan.Later {
		allowed[c.Pod.Namespace+"/"+c.Pod.Name] = []string{nodemaintv1alpha1.BlockedReasonWaitingForOrder, nodemaintv1alpha1.BlockedReasonOther}
	}
	for _, c := range plan.WaitCompleted {
		allowed[c.Pod.Namespace+"/"+c.Pod.Name] = []string{nodemaintv1alpha1.BlockedReasonWaitCompleted, nodemaintv1alpha1.BlockedReasonOther}
	}
	for _, c := range plan.Skipped {
		allowed[c.Pod.Namespace+"/"+c.Pod.Name] = []string{nodemaintv1alpha1.BlockedReasonSkipped, nodemaintv1alpha1.BlockedReasonOther}
	}
	for _, c := range plan.Held {
		allowed[c.Pod.Namespace+"/"+c.Pod.Name] = []string{nodemaintv1alpha1.BlockedReasonInvalidDrainRule, nodemaintv1alpha1.BlockedReasonOther}
	}
	if (len(allowed) == 0) != (got == nil) {
		t.Fatalf("%d pods held, blocked %+v", len(allowed), got)
	}
	if len(got) > MaxBlockedEntries {
		t.Fatalf("%d blocked entries, at most %d", len(got), MaxBlockedEntries)
	}
	total := 0
	named := map[string]bool{}
	keys := map[string]bool{}
	for i, b := range got {
		total += int(b.Count)
		if b.Reason == "" {
			t.Fatalf("entry %d has no reason: %+v", i, b)
		}
		if b.Count <= 0 {
			t.Fatalf("entry %d counts %d pods; want some: %+v", i, b.Count, b)
		}
		if len(b.Pods) == 0 {
			t.Fatalf("entry %d names no pod: %+v", i, b)
		}
		if len(b.Pods) > MaxBlockedNames {
			t.Fatalf("entry %d names %d pods; want at most %d", i, len(b.Pods), MaxBlockedNames)
		}
		if len(b.Pods) > int(b.Count) {
			t.Fatalf("entry %d names %d pods, more than its count %d", i, len(b.Pods), b.Count)
		}
		if b.Reason != nodemaintv1alpha1.BlockedReasonOther && len(b.Pods) != min(int(b.Count), MaxBlockedNames) {
			t.Fatalf("entry %d names %d of its %d pods: %+v", i, len(b.Pods), b.Count, b)
		}
		if b.Reason == nodemaintv1alpha1.BlockedReasonOther && i != len(got)-1 {
			t.Fatalf("the Other entry is not last: %+v", got)
		}
		if i > 0 && b.Reason != nodemaintv1alpha1.BlockedReasonOther && b.Count > got[i-1].Count {
			t.Fatalf("entries not sorted by count: %+v", got)
		}
		if keys[b.Reason+"\x00"+b.Message] {
			t.Fatalf("reason and message twice: %+v", got)
		}
		keys[b.Reason+"\x00"+b.Message] = true
		if !policy.Evict && (b.Reason == nodemaintv1alpha1.BlockedReasonEvicting || b.Reason == nodemaintv1alpha1.BlockedReasonPodDisruptionBudget) {
			t.Fatalf("signal-only drain reports %s", b.Reason)
		}
		for _, p := range b.Pods {
			if named[p] {
				t.Fatalf("pod %s named twice: %+v", p, got)
			}
			named[p] = true
			if !contains(allowed[p], b.Reason) {
				t.Fatalf("pod %s reported as %s, may be %v", p, b.Reason, allowed[p])
			}
		}
	}
	if total != len(allowed) {
		t.Fatalf("counts sum to %d, %d pods are held: %+v", total, len(allowed), got)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
