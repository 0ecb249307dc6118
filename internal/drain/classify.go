package drain

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Class is how one pod is drained, and why.
type Class struct {
	Behavior nodemaintv1alpha1.DrainBehavior
	// Order is the pod's order group (Drain only): lower groups are drained first.
	Order int32
	// Source says what decided: "DrainRule <name>", "label nodemaint.dev/drain=skip", ...
	Source string
	// Protected, when set, says why nodemaint never evicts or deletes the pod (e.g. it is one of
	// nodemaint-controller's own pods): it is asked to move like any other, and only its owner
	// moves it.
	Protected string
	// InvalidRule, when set, is the error of the DrainRule (Source) that could match the pod but
	// does not parse: the pod is held (Plan.Held), never evicted nor deleted, until the rule is
	// fixed or deleted, for the rule may have been meant to protect it.
	InvalidRule string
}

// Rules are the DrainRules of the cluster, compiled, in the order they apply: alphabetical by name.
type Rules struct {
	rules []rule
	// ignoreDrainLabel: the pod label nodemaint.dev/drain does not override the rules.
	ignoreDrainLabel bool
}

// IgnoringDrainLabel returns the rules with the pod label nodemaint.dev/drain ignored when ignore
// is true (a NodeMaintenance's drainLabelPolicy Ignore): only DrainRules, which the cluster's
// admins write, then decide, not the pods' owners.
func (rs *Rules) IgnoringDrainLabel(ignore bool) *Rules {
	out := &Rules{ignoreDrainLabel: ignore}
	if rs != nil {
		out.rules = rs.rules
	}
	return out
}

type rule struct {
	name     string
	drain    nodemaintv1alpha1.DrainRuleDrainConfig
	nodes    []labels.Selector // ORed; none means every node
	podSels  []podSelector     // ORed
	parseErr error
}

type podSelector struct {
	pods, namespaces labels.Selector
}

// NewRules compiles DrainRules. A rule whose selectors do not parse (stored before the API server
// refused them) is not ignored: a selector that does not parse counts as selecting everything, so
// the rule could match every pod (or node) it may have been meant for, and Classify holds those
// pods (Class.InvalidRule). Errors names the rule.
func NewRules(list []nodemaintv1alpha1.DrainRule) *Rules {
	rs := &Rules{}
	for i := range list {
		dr := &list[i]
		r := rule{name: dr.Name, drain: dr.Spec.Drain}
		for _, n := range dr.Spec.Nodes {
			sel, err := metav1.LabelSelectorAsSelector(&n.Selector)
			if err != nil {
				r.parseErr = fmt.Errorf("DrainRule %s: nodes: %w", dr.Name, err)
				sel = labels.Everything()
			}
			r.nodes = append(r.nodes, sel)
		}
		for _, p := range dr.Spec.Pods {
			ps, err := optionalSelector(p.Selector)
			if err != nil {
				r.parseErr = fmt.Errorf("DrainRule %s: pods: %w", dr.Name, err)
				ps = labels.Everything()
			}
			ns, err := optionalSelector(p.NamespaceSelector)
			if err != nil {
				r.parseErr = fmt.Errorf("DrainRule %s: pods: namespaceSelector: %w", dr.Name, err)
				ns = labels.Everything()
			}
			r.podSels = append(r.podSels, podSelector{pods: ps, namespaces: ns})
		}
		rs.rules = append(rs.rules, r)
	}
	sort.Slice(rs.rules, func(i, j int) bool { return rs.rules[i].name < rs.rules[j].name })
	return rs
}

func optionalSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// Errors lists the rules that do not parse.
func (rs *Rules) Errors() []error {
	var errs []error
	for _, r := range rs.rules {
		if r.parseErr != nil {
			errs = append(errs, r.parseErr)
		}
	}
	return errs
}

// matches reports whether the rule matches the pod on the node; for a rule that does not parse,
// whether it could (its broken selectors select everything).
func (r *rule) matches(pod *corev1.Pod, namespaceLabels, nodeLabels labels.Set) bool {
	nodeOK := len(r.nodes) == 0
	for _, sel := range r.nodes {
		nodeOK = nodeOK || sel.Matches(nodeLabels)
	}
	if !nodeOK {
		return false
	}
	for _, ps := range r.podSels {
		if ps.pods.Matches(labels.Set(pod.Labels)) && ps.namespaces.Matches(namespaceLabels) {
			return true
		}
	}
	return false
}

// Classify decides how a targeted pod (see maintenance.Targeted) is drained. First match wins:
// the pod label nodemaint.dev/drain (unless the rules ignore it, see IgnoringDrainLabel); then a
// pod that tolerates the unschedulable taint is skipped (evicted, it would come straight back); then the first DrainRule in alphabetical order that
// matches the pod, its namespace and the node (or could: a rule that does not parse holds the pod,
// see Class.InvalidRule); else Drain in order 0.
func (rs *Rules) Classify(pod *corev1.Pod, namespaceLabels, nodeLabels map[string]string) Class {
	label := pod.Labels[nodemaintv1alpha1.DrainLabel]
	if rs != nil && rs.ignoreDrainLabel {
		label = ""
	}
	switch label {
	case nodemaintv1alpha1.DrainLabelSkip:
		return Class{Behavior: nodemaintv1alpha1.DrainBehaviorSkip, Source: "label " + nodemaintv1alpha1.DrainLabel + "=" + nodemaintv1alpha1.DrainLabelSkip}
	case nodemaintv1alpha1.DrainLabelWaitCompleted:
		return Class{Behavior: nodemaintv1alpha1.DrainBehaviorWaitCompleted, Source: "label " + nodemaintv1alpha1.DrainLabel + "=" + nodemaintv1alpha1.DrainLabelWaitCompleted}
	}
	if ToleratesUnschedulable(pod) {
		return Class{Behavior: nodemaintv1alpha1.DrainBehaviorSkip, Source: "tolerates " + corev1.TaintNodeUnschedulable}
	}
	if rs != nil {
		for i := range rs.rules {
			r := &rs.rules[i]
			if !r.matches(pod, namespaceLabels, nodeLabels) {
				continue
			}
			c := Class{Behavior: r.drain.Behavior, Source: "DrainRule " + r.name}
			if r.parseErr != nil {
				c.InvalidRule = r.parseErr.Error()
				return c
			}
			if r.drain.Order != nil {
				c.Order = *r.drain.Order
			}
			return c
		}
	}
	return Class{Behavior: nodemaintv1alpha1.DrainBehaviorDrain}
}

// SourcePodSelector is the Source of a pod that no maintenance draining its node selects by its
// spec.podSelector (NotSelected).
const SourcePodSelector = "not selected by spec.podSelector"

// NotSelected is the class of a pod that no maintenance draining its node selects by its
// spec.podSelector: skipped, left running, like a pod a Skip DrainRule keeps.
func NotSelected() Class {
	return Class{Behavior: nodemaintv1alpha1.DrainBehaviorSkip, Source: SourcePodSelector}
}

// Labelled reports whether the pod label nodemaint.dev/drain classifies the pod where it is
// honored: skip or wait-completed.
func Labelled(pod *corev1.Pod) bool {
	switch pod.Labels[nodemaintv1alpha1.DrainLabel] {
	case nodemaintv1alpha1.DrainLabelSkip, nodemaintv1alpha1.DrainLabelWaitCompleted:
		return true
	}
	return false
}

// DrainedBy reports whether one maintenance's own classification drains the pod (behavior
// Drain), with its own label policy (ignoreLabel: drainLabelPolicy Ignore), given the pod's
// class in a plan classified with the label ignored (planIgnoredLabel) or honored. The
// DrainRules are the cluster's, the same for every maintenance; only the label policy differs.
// A maintenance that honors the label never drains a labelled pod; one that ignores it drains it
// as the rules say, which the plan tells only when it ignored the label too: otherwise the pod is
// not drained by it (not known, so not destroyed). A held pod is drained by none.
func (c Classified) DrainedBy(ignoreLabel, planIgnoredLabel bool) bool {
	if c.Class.InvalidRule != "" || c.Class.Behavior != nodemaintv1alpha1.DrainBehaviorDrain {
		return false
	}
	return !Labelled(c.Pod) || ignoreLabel && planIgnoredLabel
}

// ToleratesUnschedulable reports whether the pod tolerates node.kubernetes.io/unschedulable:NoSchedule.
func ToleratesUnschedulable(pod *corev1.Pod) bool {
	taint := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

// Classified is a pod with its class.
type Classified struct {
	Pod   *corev1.Pod
	Class Class
}

// Plan is the drain of one node at one moment.
type Plan struct {
	// Current are the pods drained now: the Drain pods of the lowest order group left.
	Current []Classified
	// Later are the Drain pods of higher order groups, drained once Current is gone.
	Later []Classified
	// WaitCompleted are pods the drain waits for but never evicts.
	WaitCompleted []Classified
	// Skipped stay on the node; the drain does not wait for them.
	Skipped []Classified
	// Held are pods a DrainRule that does not parse could match (Class.InvalidRule): never
	// evicted nor deleted, and the drain waits for them until the rule is fixed or deleted.
	Held []Classified
}

// Pending counts the pods the drain still waits for.
func (p Plan) Pending() int {
	return len(p.Current) + len(p.Later) + len(p.WaitCompleted) + len(p.Held)
}

// NewPlan groups classified pods. A node's plan is made at every look at the node and at each
// maintenance's look at its nodes: the drained groups are sized once, not grown.
func NewPlan(pods []Classified) Plan {
	lowest, current, later := int32(0), 0, 0
	for _, c := range pods {
		switch {
		case !drained(c.Class):
		case current == 0 || c.Class.Order < lowest:
			lowest, later, current = c.Class.Order, later+current, 1
		case c.Class.Order == lowest:
			current++
		default:
			later++
		}
	}
	var plan Plan
	if current > 0 {
		plan.Current = make([]Classified, 0, current)
	}
	if later > 0 {
		plan.Later = make([]Classified, 0, later)
	}
	for _, c := range pods {
		switch {
		case drained(c.Class) && c.Class.Order == lowest:
			plan.Current = append(plan.Current, c)
		case drained(c.Class):
			plan.Later = append(plan.Later, c)
		case c.Class.InvalidRule != "":
			plan.Held = append(plan.Held, c)
		case c.Class.Behavior == nodemaintv1alpha1.DrainBehaviorSkip:
			plan.Skipped = append(plan.Skipped, c)
		default:
			plan.WaitCompleted = append(plan.WaitCompleted, c)
		}
	}
	return plan
}

// drained reports whether the drain evicts pods of the class: Behavior Drain, by a rule that
// parses (Held, Skipped and WaitCompleted are the others).
func drained(c Class) bool {
	return c.InvalidRule == "" && c.Behavior != nodemaintv1alpha1.DrainBehaviorSkip && c.Behavior != nodemaintv1alpha1.DrainBehaviorWaitCompleted
}
