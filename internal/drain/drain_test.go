package drain

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

func newRule(name string, behavior nodemaintv1alpha1.DrainBehavior, order *int32, nodes map[string]string, pods, namespaces map[string]string) nodemaintv1alpha1.DrainRule {
	dr := nodemaintv1alpha1.DrainRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.DrainRuleSpec{
			Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: behavior, Order: order},
		},
	}
	if nodes != nil {
		dr.Spec.Nodes = []nodemaintv1alpha1.DrainRuleNodeSelector{{Selector: metav1.LabelSelector{MatchLabels: nodes}}}
	}
	ps := nodemaintv1alpha1.DrainRulePodSelector{}
	if pods != nil {
		ps.Selector = &metav1.LabelSelector{MatchLabels: pods}
	}
	if namespaces != nil {
		ps.NamespaceSelector = &metav1.LabelSelector{MatchLabels: namespaces}
	}
	dr.Spec.Pods = []nodemaintv1alpha1.DrainRulePodSelector{ps}
	return dr
}

func pod(labels map[string]string, tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Tolerations: tolerations}}
}

func TestClassify(t *testing.T) {
	rules := NewRules([]nodemaintv1alpha1.DrainRule{
		newRule("b-db-late", nodemaintv1alpha1.DrainBehaviorDrain, ptr.To[int32](100), nil, map[string]string{"app": "db"}, nil),
		newRule("a-db-gpu-skip", nodemaintv1alpha1.DrainBehaviorSkip, nil, map[string]string{"pool": "gpu"}, map[string]string{"app": "db"}, nil),
		newRule("c-monitoring", nodemaintv1alpha1.DrainBehaviorWaitCompleted, nil, nil, nil, map[string]string{"team": "monitoring"}),
	})
	if errs := rules.Errors(); len(errs) != 0 {
		t.Fatal(errs)
	}
	gpu := map[string]string{"pool": "gpu"}
	cpu := map[string]string{"pool": "cpu"}
	cases := []struct {
		name     string
		pod      *corev1.Pod
		ns, node map[string]string
		want     nodemaintv1alpha1.DrainBehavior
		order    int32
		source   string
	}{
		{"no rule matches", pod(map[string]string{"app": "web"}), nil, cpu, nodemaintv1alpha1.DrainBehaviorDrain, 0, ""},
		{"first rule alphabetically wins", pod(map[string]string{"app": "db"}), nil, gpu, nodemaintv1alpha1.DrainBehaviorSkip, 0, "DrainRule a-db-gpu-skip"},
		{"node selector limits a rule", pod(map[string]string{"app": "db"}), nil, cpu, nodemaintv1alpha1.DrainBehaviorDrain, 100, "DrainRule b-db-late"},
		{"namespace selector", pod(nil), map[string]string{"team": "monitoring"}, cpu, nodemaintv1alpha1.DrainBehaviorWaitCompleted, 0, "DrainRule c-monitoring"},
		{"label skip overrides rules", pod(map[string]string{"app": "db", "nodemaint.dev/drain": "skip"}), nil, cpu, nodemaintv1alpha1.DrainBehaviorSkip, 0, "label nodemaint.dev/drain=skip"},
		{"label wait-completed", pod(map[string]string{"nodemaint.dev/drain": "wait-completed"}), nil, cpu, nodemaintv1alpha1.DrainBehaviorWaitCompleted, 0, "label nodemaint.dev/drain=wait-completed"},
		{"tolerates unschedulable", pod(nil, corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}), nil, cpu, nodemaintv1alpha1.DrainBehaviorSkip, 0, "tolerates node.kubernetes.io/unschedulable"},
		{"tolerates everything", pod(nil, corev1.Toleration{Operator: corev1.TolerationOpExists}), nil, cpu, nodemaintv1alpha1.DrainBehaviorSkip, 0, "tolerates node.kubernetes.io/unschedulable"},
		{"tolerates another taint", pod(nil, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists}), nil, cpu, nodemaintv1alpha1.DrainBehaviorDrain, 0, ""},
	}
	for _, tc := range cases {
		got := rules.Classify(tc.pod, tc.ns, tc.node)
		if got.Behavior != tc.want {
			t.Errorf("%s: behavior %s; want %s", tc.name, got.Behavior, tc.want)
		}
		if got.Order != tc.order {
			t.Errorf("%s: order %d; want %d", tc.name, got.Order, tc.order)
		}
		if got.Source != tc.source {
			t.Errorf("%s: source %q; want %q", tc.name, got.Source, tc.source)
		}
	}
}

func TestPlanOrderGroups(t *testing.T) {
	c := func(b nodemaintv1alpha1.DrainBehavior, order int32) Classified {
		return Classified{Pod: &corev1.Pod{}, Class: Class{Behavior: b, Order: order}}
	}
	plan := NewPlan([]Classified{
		c(nodemaintv1alpha1.DrainBehaviorDrain, 100), c(nodemaintv1alpha1.DrainBehaviorDrain, -5),
		c(nodemaintv1alpha1.DrainBehaviorDrain, -5), c(nodemaintv1alpha1.DrainBehaviorSkip, 0),
		c(nodemaintv1alpha1.DrainBehaviorWaitCompleted, 0), c(nodemaintv1alpha1.DrainBehaviorDrain, 0),
	})
	if len(plan.Current) != 2 {
		t.Errorf("%d current; want the two of order -5 (plan %+v)", len(plan.Current), plan)
	} else if got := plan.Current[0].Class.Order; got != -5 {
		t.Errorf("current of order %d; want -5, the lowest", got)
	}
	if len(plan.Later) != 2 {
		t.Errorf("%d later; want 2 (orders 0 and 100)", len(plan.Later))
	}
	if len(plan.Skipped) != 1 {
		t.Errorf("%d skipped; want 1", len(plan.Skipped))
	}
	if len(plan.WaitCompleted) != 1 {
		t.Errorf("%d wait-completed; want 1", len(plan.WaitCompleted))
	}
	if plan.Pending() != 5 {
		t.Errorf("%d pending; want 5", plan.Pending())
	}
	p := NewPlan(nil)
	if p.Pending() != 0 {
		t.Errorf("empty plan: %d pending; want 0", p.Pending())
	}
	if p.Current != nil {
		t.Errorf("empty plan: current %+v; want nil", p.Current)
	}
}

func TestDecide(t *testing.T) {
	now := time.Unix(1000, 0)
	policy := Policy{Evict: true, ResponseTimeout: 3 * time.Minute}
	requested := func(ago time.Duration, initiated ...corev1.ConditionStatus) *corev1.Pod {
		p := &corev1.Pod{}
		evacuation.SetCondition(p, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago))})
		for _, s := range initiated {
			evacuation.SetCondition(p, corev1.PodCondition{Type: evacuation.Initiated, Status: s, Message: "surging"})
		}
		return p
	}
	terminating := requested(time.Hour)
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-10 * time.Second)))
	owned := func(p *corev1.Pod) *corev1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}
		return p
	}
	const own = "nodemaint-controller's own pod"
	cases := []struct {
		name      string
		pod       *corev1.Pod
		policy    Policy
		protected string
		evict     bool
		reason    string
		recheck   time.Duration
		message   string // a part of the message, when it matters
	}{
		{"not requested yet: looked at again when written", &corev1.Pod{}, policy, "", false, nodemaintv1alpha1.BlockedReasonWaitingForOwner, 0, ""},
		{"within the timeout", owned(requested(time.Minute)), policy, "", false, nodemaintv1alpha1.BlockedReasonWaitingForOwner, 2*time.Minute + time.Second, "for the owner to accept"},
		// The condition's time has whole seconds: the timeout counts from the end of its second.
		{"the timeout's last second", requested(3 * time.Minute), policy, "", false, nodemaintv1alpha1.BlockedReasonWaitingForOwner, time.Second, "for someone to accept"},
		{"timeout passed", requested(3*time.Minute + time.Second), policy, "", true, "", 0, ""},
		{"accepted, long ago", requested(time.Hour, corev1.ConditionTrue), policy, "", false, nodemaintv1alpha1.BlockedReasonEvacuatingByOwner, 0, ""},
		{"declined: the status quotes the owner", requested(time.Second, corev1.ConditionFalse), policy, "", true, "", 0, "the owner declined the evacuation (surging)"},
		{"a bare pod waits the timeout, and is told it will not come back", requested(time.Second), policy, "", false, nodemaintv1alpha1.BlockedReasonWaitingForOwner, 3 * time.Minute, "will not be recreated"},
		{"a bare pod past the timeout", requested(3*time.Minute + time.Second), policy, "", true, "", 0, ""},
		{"signal only never evicts", requested(time.Hour), Policy{ResponseTimeout: time.Minute}, "", false, nodemaintv1alpha1.BlockedReasonWaitingForOwner, 0, ""},
		{"terminating", terminating, policy, "", false, nodemaintv1alpha1.BlockedReasonTerminating, 0, ""},
		{"protected, past the timeout", requested(time.Hour), policy, own, false, nodemaintv1alpha1.BlockedReasonProtected, 0, own + ": never evicted"},
		{"protected and declined", requested(time.Hour, corev1.ConditionFalse), policy, own, false, nodemaintv1alpha1.BlockedReasonProtected, 0, ""},
		{"protected, accepted", requested(time.Hour, corev1.ConditionTrue), policy, own, false, nodemaintv1alpha1.BlockedReasonEvacuatingByOwner, 0, ""},
		{"requested before this replica led: counted from its leading", requested(time.Hour),
			Policy{Evict: true, ResponseTimeout: 3 * time.Minute, CountFrom: now.Add(-time.Minute)}, "", false, nodemaintv1alpha1.BlockedReasonWaitingForOwner, 2 * time.Minute, ""},
		{"requested after this replica led", requested(3*time.Minute + time.Second),
			Policy{Evict: true, ResponseTimeout: 3 * time.Minute, CountFrom: now.Add(-time.Hour)}, "", true, "", 0, ""},
	}
	for _, tc := range cases {
		d := Judge(Classified{Pod: tc.pod, Class: Class{Protected: tc.protected}}, now, tc.policy)
		if d.Evict != tc.evict {
			t.Errorf("%s: evict %v; want %v", tc.name, d.Evict, tc.evict)
		}
		if d.Reason != tc.reason {
			t.Errorf("%s: reason %q; want %q", tc.name, d.Reason, tc.reason)
		}
		if d.RecheckAfter != tc.recheck {
			t.Errorf("%s: recheck %v; want %v", tc.name, d.RecheckAfter, tc.recheck)
		}
		if msg := d.Message(); !strings.Contains(msg, tc.message) {
			t.Errorf("%s: message %q; want it to say %q", tc.name, msg, tc.message)
		}
	}
}

// The status says how long pods have been terminating, the longest of a group, in steps of 10s
// so that it does not change on every refresh.
// Overtaken: a pod decided for eviction is still evicted as the API server has it now only
// while it is asked to leave and its owner has not accepted (a declined pod is evicted).
func TestOvertaken(t *testing.T) {
	pod := func(conds ...corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{}
		for _, c := range conds {
			evacuation.SetCondition(p, c)
		}
		return p
	}
	asked := corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue}
	terminating := pod(asked)
	terminating.DeletionTimestamp = ptr.To(metav1.Now())
	for _, tc := range []struct {
		name string
		live *corev1.Pod
		want string
	}{
		{"still unanswered", pod(asked), ""},
		{"declined", pod(asked, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse}), ""},
		{"accepted since", pod(asked, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue}), "the owner accepted the evacuation"},
		{"withdrawn since", pod(), "the evacuation request was withdrawn"},
		{"terminating", terminating, "terminating"},
		{"gone", nil, "gone"},
	} {
		if got := Overtaken(tc.live); got != tc.want {
			t.Errorf("%s: Overtaken = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBlockedTerminatingFor(t *testing.T) {
	now := time.Unix(1000, 0)
	deleted := func(name string, ago time.Duration) Classified {
		// The API server sets deletionTimestamp to when the grace period runs out.
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name,
			DeletionTimestamp: ptr.To(metav1.NewTime(now.Add(-ago).Add(30 * time.Second))), DeletionGracePeriodSeconds: ptr.To[int64](30)}}
		return Classified{Pod: p, Class: Class{Behavior: nodemaintv1alpha1.DrainBehaviorDrain}}
	}
	for _, tc := range []struct {
		name string
		pods []Classified
		want string
	}{
		{"just deleted", []Classified{deleted("a", 3*time.Second)}, "terminating"},
		{"one, for 47s", []Classified{deleted("a", 47*time.Second)}, "terminating for 40s"},
		{"several", []Classified{deleted("a", 5*time.Second), deleted("b", 125*time.Second), deleted("c", 30*time.Second)},
			"terminating, the longest for 2m0s"},
	} {
		plan := NewPlan(tc.pods)
		got := Blocked(plan, JudgeCurrent(plan.Current, now, Policy{Evict: true, ResponseTimeout: time.Minute}, nil), now)
		if len(got) != 1 {
			t.Errorf("%s: blocked %+v, want one Terminating entry %q", tc.name, got, tc.want)
			continue
		}
		if got[0].Reason != nodemaintv1alpha1.BlockedReasonTerminating {
			t.Errorf("%s: reason %s; want %s", tc.name, got[0].Reason, nodemaintv1alpha1.BlockedReasonTerminating)
		}
		if got[0].Message != tc.want {
			t.Errorf("%s: message %q; want %q", tc.name, got[0].Message, tc.want)
		}
		if int(got[0].Count) != len(tc.pods) {
			t.Errorf("%s: count %d; want %d", tc.name, got[0].Count, len(tc.pods))
		}
	}
}

func TestUnanswerable(t *testing.T) {
	bare := &corev1.Pod{}
	owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Controller: ptr.To(true)}}}}
	referenced := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "ConfigMap"}}}}
	if !Unanswerable(bare) {
		t.Errorf("a bare pod: answerable; want unanswerable")
	}
	if Unanswerable(owned) {
		t.Errorf("a pod of a controller: unanswerable; want answerable")
	}
	if !Unanswerable(referenced) {
		t.Errorf("a pod only referenced, not controlled: answerable; want unanswerable")
	}
}

// TestInvalidRuleHolds: a DrainRule whose selector does not parse (stored before the API server
// refused it) is not ignored: the pods it could match, on the nodes it could apply to, are held
// and reported with reason InvalidDrainRule naming the rule; a Skip rule meant to protect them
// never lets them be evicted (issue 16).
func TestInvalidRuleHolds(t *testing.T) {
	badExpr := []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"db"}}}
	badPods := newRule("protect-db", nodemaintv1alpha1.DrainBehaviorSkip, nil, map[string]string{"pool": "db"}, nil, nil)
	badPods.Spec.Pods[0].Selector = &metav1.LabelSelector{MatchExpressions: badExpr}
	badNodes := newRule("protect-gpu", nodemaintv1alpha1.DrainBehaviorSkip, nil, nil, map[string]string{"app": "gpu"}, nil)
	badNodes.Spec.Nodes = []nodemaintv1alpha1.DrainRuleNodeSelector{{Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn}}}}}
	good := newRule("a-web", nodemaintv1alpha1.DrainBehaviorWaitCompleted, nil, nil, map[string]string{"app": "web"}, nil)
	rules := NewRules([]nodemaintv1alpha1.DrainRule{badPods, badNodes, good})
	if errs := rules.Errors(); len(errs) != 2 {
		t.Fatalf("Errors() = %v, want the two rules that do not parse", errs)
	}
	dbNode, otherNode := map[string]string{"pool": "db"}, map[string]string{"pool": "web"}
	cases := []struct {
		name   string
		pod    *corev1.Pod
		node   map[string]string
		source string // "" means not held
	}{
		{"any pod on a node the broken pod selector's rule applies to", pod(map[string]string{"app": "cache"}), dbNode, "DrainRule protect-db"},
		{"not on the nodes its node selector excludes", pod(map[string]string{"app": "cache"}), otherNode, ""},
		{"a broken node selector applies on every node", pod(map[string]string{"app": "gpu"}), otherNode, "DrainRule protect-gpu"},
		{"an earlier valid rule decides first", pod(map[string]string{"app": "web"}), dbNode, ""},
		{"the pod label decides first", pod(map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip}), dbNode, ""},
	}
	for _, tc := range cases {
		c := rules.Classify(tc.pod, nil, tc.node)
		switch {
		case tc.source == "" && c.InvalidRule != "":
			t.Errorf("%s: held by %s: %s", tc.name, c.Source, c.InvalidRule)
		case tc.source != "" && (c.Source != tc.source || !strings.HasPrefix(c.InvalidRule, tc.source+": ")):
			t.Errorf("%s: class %+v, want held by %s", tc.name, c, tc.source)
		}
		if tc.source == "" {
			continue
		}
		tc.pod.Name, tc.pod.Namespace = "held", "default"
		plan := NewPlan([]Classified{{Pod: tc.pod, Class: c}})
		if len(plan.Held) != 1 {
			t.Errorf("%s: %d held; want the pod held (plan %+v)", tc.name, len(plan.Held), plan)
		}
		if n := len(plan.Current) + len(plan.Later) + len(plan.WaitCompleted) + len(plan.Skipped); n != 0 {
			t.Errorf("%s: %d pods in other groups; want the pod in none but held (plan %+v)", tc.name, n, plan)
		}
		if plan.Pending() != 1 {
			t.Errorf("%s: %d pending; want the pod pending", tc.name, plan.Pending())
		}
		blocked := Blocked(plan, JudgeCurrent(plan.Current, time.Now(), Policy{Evict: true}, nil), time.Now())
		if len(blocked) != 1 {
			t.Errorf("%s: blocked %+v; want one entry, reason %s naming %s", tc.name, blocked, nodemaintv1alpha1.BlockedReasonInvalidDrainRule, tc.source)
			continue
		}
		if blocked[0].Reason != nodemaintv1alpha1.BlockedReasonInvalidDrainRule {
			t.Errorf("%s: blocked reason %s; want %s", tc.name, blocked[0].Reason, nodemaintv1alpha1.BlockedReasonInvalidDrainRule)
		}
		if !strings.Contains(blocked[0].Message, tc.source) {
			t.Errorf("%s: blocked message %q; want it to name %s", tc.name, blocked[0].Message, tc.source)
		}
	}
}

// TestDeclinedQuoted: a pod its owner declined is evicted, and the node's blocked entry says what
// the eviction meets (evicting, or the budget's refusal), then why the owner did not move it.
func TestDeclinedQuoted(t *testing.T) {
	now := time.Unix(1000, 0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)})
	evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: "ReplicasReverted", Message: "something reverts its replicas"})
	current := []Classified{{Pod: pod}}
	policy := Policy{Evict: true, ResponseTimeout: time.Minute}
	const declined = "; the owner declined the evacuation (ReplicasReverted: something reverts its replicas)"
	d := JudgeCurrent(current, now, policy, nil)[0]
	if !d.Evict {
		t.Errorf("evicting: %+v; want the pod evicted", d)
	}
	if want := "evicting through the Eviction API" + declined; d.Message() != want {
		t.Errorf("evicting: message %q; want %q", d.Message(), want)
	}
	refused := map[types.UID]Refusal{"p": {NotBefore: now.Add(time.Second), Reason: nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, Message: "The disruption budget web needs 1 healthy pods"}}
	d = JudgeCurrent(current, now, policy, refused)[0]
	if d.Evict {
		t.Errorf("refused: %+v; want no eviction during the back-off", d)
	}
	if want := "The disruption budget web needs 1 healthy pods" + declined; d.Message() != want {
		t.Errorf("refused: message %q; want %q", d.Message(), want)
	}
}
