// Package maintenance holds the pure logic of a NodeMaintenance: which nodes it selects, which pods
// it targets, which phase it is in, and what it wants of a node. It does no I/O.
package maintenance

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/few"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// Selector matches nodes against a NodeMaintenance's nodeSelector, with the semantics of a
// pod's required node affinity (k8s.io/component-helpers' nodeaffinity): terms are ORed, the
// requirements of a term ANDed, an empty term selects nothing. One thing nodeaffinity refuses is
// evaluated here: a matchFields requirement on metadata.name with several values (In: the node
// is one of them; NotIn: it is none of them), so that one term can name up to 256 nodes.
type Selector struct {
	terms []selectorTerm
	err   error
}

// selectorTerm is one parsed nodeSelectorTerm.
type selectorTerm struct {
	// labels are the term's matchExpressions; nil when it has none.
	labels *nodeaffinity.NodeSelector
	// names are the term's matchFields, all on metadata.name.
	names []nameRequirement
}

// nameRequirement is metadata.name In (in) or NotIn (!in) a set of names.
type nameRequirement struct {
	in     bool
	values sets.Set[string]
}

// NewSelector parses a NodeMaintenance's node selector. A selector that does not parse selects no
// node; Err says why.
func NewSelector(nm *nodemaintv1alpha1.NodeMaintenance) Selector {
	terms := nm.Spec.NodeSelector.NodeSelectorTerms
	var s Selector
	var errs []error
	// The label requirements are nodeaffinity's; parse them all at once so that its errors name
	// the term they are in.
	onlyLabels := corev1.NodeSelector{NodeSelectorTerms: make([]corev1.NodeSelectorTerm, len(terms))}
	for i := range terms {
		onlyLabels.NodeSelectorTerms[i].MatchExpressions = terms[i].MatchExpressions
	}
	if _, err := nodeaffinity.NewNodeSelector(&onlyLabels); err != nil {
		errs = append(errs, err)
	}
	path := field.NewPath("nodeSelectorTerms")
	for i := range terms {
		t := &terms[i]
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue // an empty term selects no node
		}
		var st selectorTerm
		if len(t.MatchExpressions) > 0 {
			st.labels, _ = nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: t.MatchExpressions}}})
		}
		for j, r := range t.MatchFields {
			p := path.Index(i).Child("matchFields").Index(j)
			switch {
			case r.Key != metav1.ObjectNameField:
				errs = append(errs, field.NotSupported(p.Child("key"), r.Key, []string{metav1.ObjectNameField}))
			case r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn:
				errs = append(errs, field.NotSupported(p.Child("operator"), r.Operator,
					[]string{string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn)}))
			case len(r.Values) == 0:
				errs = append(errs, field.Required(p.Child("values"), "at least one node name"))
			default:
				st.names = append(st.names, nameRequirement{in: r.Operator == corev1.NodeSelectorOpIn, values: sets.New(r.Values...)})
			}
		}
		s.terms = append(s.terms, st)
	}
	if len(errs) > 0 {
		return Selector{err: utilerrors.Flatten(utilerrors.NewAggregate(errs))}
	}
	return s
}

// Matches reports whether the node is selected.
func (s Selector) Matches(node *corev1.Node) bool {
	if s.err != nil || node == nil {
		return false
	}
	for i := range s.terms {
		if s.terms[i].matches(node) {
			return true
		}
	}
	return false
}

func (t *selectorTerm) matches(node *corev1.Node) bool {
	if t.labels != nil && !t.labels.Match(node) {
		return false
	}
	if node.Name == "" {
		// As nodeaffinity: a node without a name has no fields to match.
		return true
	}
	for _, r := range t.names {
		if r.values.Has(node.Name) != r.in {
			return false
		}
	}
	return true
}

// Err is the parse error of the selector, if any.
func (s Selector) Err() error { return s.err }

// Phase derives the phase of a NodeMaintenance from its spec, from whether its selected nodes are
// drained, and from the phase it reported last: cordon=false and drain=false is Planning before the
// maintenance was ever cordoned and Maintenance Complete after.
func Phase(nm *nodemaintv1alpha1.NodeMaintenance, drained bool) nodemaintv1alpha1.Phase {
	switch {
	case !nm.DeletionTimestamp.IsZero():
		return nodemaintv1alpha1.PhaseMaintenanceComplete
	case nm.Spec.Drain && drained:
		return nodemaintv1alpha1.PhaseDrainComplete
	case nm.Spec.Drain:
		return nodemaintv1alpha1.PhaseDrain
	case nm.Spec.Cordon:
		return nodemaintv1alpha1.PhaseCordon
	}
	switch nm.Status.Phase {
	case "", nodemaintv1alpha1.PhasePlanning:
		return nodemaintv1alpha1.PhasePlanning
	}
	return nodemaintv1alpha1.PhaseMaintenanceComplete
}

// Targeted reports whether a pod on a node under maintenance is to leave it. Following KEP-4212,
// every pod is targeted except DaemonSet pods and mirror (static) pods; unreplicated pods, pods
// with emptyDir volumes and terminating pods are included. Pods that already finished (Succeeded or
// Failed) run nothing and hold the node up for nothing, so they are not targeted.
func Targeted(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/") {
		return false
	}
	return true
}

// NodeEntry is one NodeMaintenance's claim on a node, as advertised in the node's annotation.
type NodeEntry struct {
	Name  string
	Phase nodemaintv1alpha1.Phase
}

// FormatEntries renders the node annotation value: "a=Drain,b=Cordon", sorted by name.
func FormatEntries(entries []NodeEntry) string {
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	parts := make([]string, 0, len(entries))
	for _, e := range entries {
		parts = append(parts, e.Name+"="+string(e.Phase))
	}
	return strings.Join(parts, ",")
}

// NodeEntries are the entries of the node's maintenances annotation
// (nodemaintv1alpha1.MaintenancesAnnotation), parsed by ParseEntries.
func NodeEntries(node metav1.Object) []NodeEntry {
	return ParseEntries(node.GetAnnotations()[nodemaintv1alpha1.MaintenancesAnnotation])
}

// ParseEntries reads the node annotation value. Malformed parts are ignored.
func ParseEntries(value string) []NodeEntry {
	var entries []NodeEntry
	for _, part := range strings.Split(value, ",") {
		name, phase, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			continue
		}
		entries = append(entries, NodeEntry{Name: name, Phase: nodemaintv1alpha1.Phase(phase)})
	}
	return entries
}

// Cordons reports whether a NodeMaintenance in this phase keeps its nodes unschedulable.
func Cordons(p nodemaintv1alpha1.Phase) bool {
	return p == nodemaintv1alpha1.PhaseCordon || p == nodemaintv1alpha1.PhaseDrain || p == nodemaintv1alpha1.PhaseDrainComplete
}

// Drains reports whether a NodeMaintenance in this phase requests evacuation of its nodes' pods.
func Drains(p nodemaintv1alpha1.Phase) bool {
	return p == nodemaintv1alpha1.PhaseDrain || p == nodemaintv1alpha1.PhaseDrainComplete
}

// rank orders phases by how much they ask of a node, for the node condition's reason.
func rank(p nodemaintv1alpha1.Phase) int {
	switch p {
	case nodemaintv1alpha1.PhasePlanning:
		return 1
	case nodemaintv1alpha1.PhaseCordon:
		return 2
	case nodemaintv1alpha1.PhaseDrainComplete:
		return 3
	case nodemaintv1alpha1.PhaseDrain:
		return 4
	}
	return 0
}

// NodeIntent is what the active NodeMaintenances selecting one node want of it, together.
type NodeIntent struct {
	// Entries are the maintenances with their phase on this node, sorted by name.
	Entries []NodeEntry
	// Cordon: some maintenance wants the node unschedulable.
	Cordon bool
	// HoldAutoscalers: some maintenance that cordons or drains the node keeps autoscalers from
	// removing it (spec.autoscalers Hold).
	HoldAutoscalers bool
	// PlannedTaint: the node is only planned for maintenance (no maintenance cordons it).
	PlannedTaint bool
	// Drain: some maintenance requests evacuation of the node's pods.
	Drain bool
	// Reason is the EvacuationRequest message: the reason of the oldest draining maintenance.
	Reason string
	// Evict: some draining maintenance evicts pods whose owners do not answer.
	Evict bool
	// ResponseTimeout is the shortest response timeout of the maintenances that evict.
	ResponseTimeout time.Duration
	// OutOfService: a draining maintenance opted in to the out-of-service taint, applied once the
	// node has been NotReady for OutOfServiceGrace (the shortest of theirs).
	OutOfService      bool
	OutOfServiceGrace time.Duration
	// Beyond names the maintenances that select the node but do not act on it, past
	// MaxMaintenancesPerNode (Admit), in the order they will act; the caller of Intent sets it.
	// The UnderMaintenance condition says that some wait.
	Beyond []string

	// active: some maintenance asks something of the node (Entries may also hold rollouts whose
	// turn on the node ended).
	active bool
}

// Active reports whether some maintenance asks something of the node: planned, cordoned or
// drained. A node whose every entry is a rollout turn that ended is restored.
func (in NodeIntent) Active() bool { return in.active }

// IgnoreDrainLabel reports whether the pod label nodemaint.dev/drain is ignored on a node these
// maintenances select: one that drains it asks so (drainLabelPolicy Ignore). The admin's
// choice to drain the node wins over a tenant's label.
func IgnoreDrainLabel(nms []*nodemaintv1alpha1.NodeMaintenance) bool {
	for _, nm := range nms {
		if Drains(Phase(nm, false)) && nm.Spec.DrainLabelPolicy == nodemaintv1alpha1.DrainLabelPolicyIgnore {
			return true
		}
	}
	return false
}

// DefaultNotReadyGracePeriod is how long a node is NotReady before the out-of-service taint.
const DefaultNotReadyGracePeriod = time.Minute

// DrainDeadline is when a maintenance's drain times out as its status reports it (the
// DrainTimedOut condition), counted from status.drainStartTime; zero without drainTimeout,
// before the drain started, or when the spec is not usable (Usable). Deletions do not count from
// it but from each node's own drain start (NodeDrainDeadline).
func DrainDeadline(nm *nodemaintv1alpha1.NodeMaintenance) time.Time {
	if nm.Spec.DrainTimeout == nil || nm.Status.DrainStartTime == nil || !Usable(nm) {
		return time.Time{}
	}
	return nm.Status.DrainStartTime.Add(nm.Spec.DrainTimeout.Duration)
}

// Usable reports whether the controller may act destructively for the maintenance: its spec has
// no Problems (a duration that does not parse or is out of bounds, stored before the API server
// refused them). A maintenance that is not usable still cordons and may request evacuation, but
// never has a pod evicted or deleted, nor a node tainted out-of-service, and never uncordons
// because of the bad field.
func Usable(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return len(nm.Spec.Problems()) == 0
}

// DefaultResponseTimeout is KEP-4212's time for an owner to accept an evacuation request.
const DefaultResponseTimeout = 3 * time.Minute

// Intent combines the maintenances that select a node. phaseOf gives each one's phase on this node.
func Intent(nms []*nodemaintv1alpha1.NodeMaintenance, phaseOf func(*nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase) NodeIntent {
	sorted := slices.Clone(nms)
	slices.SortFunc(sorted, Older)
	var in NodeIntent
	reasonSet := false
	for _, nm := range sorted {
		p := phaseOf(nm)
		if p == nodemaintv1alpha1.PhaseMaintenanceComplete {
			continue
		}
		in.Entries = append(in.Entries, NodeEntry{Name: nm.Name, Phase: p})
		if p == nodemaintv1alpha1.PhaseReleased || p == nodemaintv1alpha1.PhaseFailed {
			continue // its turn in a rollout ended: recorded, nothing more asked of the node
		}
		in.active = true
		in.Cordon = in.Cordon || Cordons(p)
		in.HoldAutoscalers = in.HoldAutoscalers || Cordons(p) && nm.Spec.Autoscalers != nodemaintv1alpha1.AutoscalerPolicyIgnore
		if Drains(p) {
			in.Drain = true
			if !reasonSet {
				in.Reason, reasonSet = nm.Spec.Reason, true
			}
			if !Usable(nm) {
				continue // evacuation requested only: nothing destructive on an unusable spec
			}
			if nm.Spec.EvictionPolicy != nodemaintv1alpha1.EvictionPolicySignalOnly {
				if timeout := ResponseTimeout(nm); !in.Evict || timeout < in.ResponseTimeout {
					in.ResponseTimeout = timeout
				}
				in.Evict = true
			}
			if sd := nm.Spec.Shutdown; sd != nil && sd.ApplyOutOfServiceTaint {
				grace := DefaultNotReadyGracePeriod
				if sd.NotReadyGracePeriod != nil {
					grace = sd.NotReadyGracePeriod.Duration
				}
				if !in.OutOfService || grace < in.OutOfServiceGrace {
					in.OutOfServiceGrace = grace
				}
				in.OutOfService = true
			}
		}
	}
	sort.Slice(in.Entries, func(i, j int) bool { return in.Entries[i].Name < in.Entries[j].Name })
	in.PlannedTaint = in.active && !in.Cordon
	return in
}

// Condition is the node's UnderMaintenance condition for the intent (status True), or nil when
// the node is not under maintenance.
func (in NodeIntent) Condition() *corev1.NodeCondition {
	if !in.active {
		return nil
	}
	top := nodemaintv1alpha1.Phase("")
	names := make([]string, 0, len(in.Entries))
	for _, e := range in.Entries {
		if e.Phase == nodemaintv1alpha1.PhaseReleased || e.Phase == nodemaintv1alpha1.PhaseFailed {
			continue
		}
		if top == "" || rank(e.Phase) > rank(top) {
			top = e.Phase
		}
		names = append(names, e.Name+" ("+string(e.Phase)+")")
	}
	return &corev1.NodeCondition{
		Type:    nodemaintv1alpha1.NodeConditionUnderMaintenance,
		Status:  corev1.ConditionTrue,
		Reason:  string(top),
		Message: "NodeMaintenance " + few.Names(names, few.Most) + in.beyondNote(),
	}
}

// beyondNote says that maintenances wait for a place on the node, if any do. It does not count
// them (each says so in its own status): the node changes when the first comes and the last goes,
// not at each one, which would have every maintenance selecting the node look again.
func (in NodeIntent) beyondNote() string {
	if len(in.Beyond) == 0 {
		return ""
	}
	return fmt.Sprintf("; at the limit: at most %d NodeMaintenances act on a node at once, others wait for a place", MaxMaintenancesPerNode)
}

// LifecycleConditions are the KEP-5683 node lifecycle conditions the intent wants on the node,
// each True with reason NodeMaintenance, by type; absent types are not wanted.
// MaintenancePlanned while the node only waits for a maintenance (planned, or waiting its turn in
// a rollout), MaintenanceInProgress while one cordons it, DrainInProgress while one drains it
// and it is not drained yet, Drained once it is. A reboot daemon or an autoscaler that knows
// nothing of nodemaint can wait on them.
func (in NodeIntent) LifecycleConditions() map[corev1.NodeConditionType]*corev1.NodeCondition {
	out := map[corev1.NodeConditionType]*corev1.NodeCondition{}
	if !in.active {
		return out
	}
	var names []string
	draining, drained := false, false
	for _, e := range in.Entries {
		switch e.Phase {
		case nodemaintv1alpha1.PhaseDrain:
			draining = true
		case nodemaintv1alpha1.PhaseDrainComplete:
			drained = true
		case nodemaintv1alpha1.PhaseReleased, nodemaintv1alpha1.PhaseFailed:
			continue
		}
		names = append(names, e.Name)
	}
	add := func(t corev1.NodeConditionType, what string) {
		out[t] = &corev1.NodeCondition{Type: t, Status: corev1.ConditionTrue, Reason: nodemaintv1alpha1.NodeConditionReasonNodeMaintenance,
			Message: what + " (NodeMaintenance " + few.Names(names, few.Most) + ")"}
	}
	switch {
	case in.PlannedTaint:
		add(corev1.NodeMaintenancePlanned, "maintenance planned")
	case in.Cordon:
		add(corev1.NodeMaintenanceInProgress, "cordoned for maintenance")
	}
	switch {
	case draining:
		add(corev1.NodeDrainInProgress, "draining")
	case drained:
		add(corev1.NodeDrained, "drained: no targeted pod and no volume of a drained pod left")
	}
	return out
}

// EvacuationRequest is the pod condition nodemaint sets on a targeted pod of a drained node.
func EvacuationRequest(reason string) corev1.PodCondition {
	return corev1.PodCondition{
		Type:    evacuation.Request,
		Status:  corev1.ConditionTrue,
		Reason:  evacuation.ReasonNodeMaintenance,
		Message: reason,
	}
}
