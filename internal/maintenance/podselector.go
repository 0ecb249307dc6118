package maintenance

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// PodSelector is the maintenance's spec.podSelector as a selector of pods: every pod when it has
// none, no pod when it does not parse (stored before the API server refused it: the spec's
// Problems name it, and the maintenance is not Usable), so that a selector nobody can read never
// widens what is drained.
func PodSelector(nm *nodemaintv1alpha1.NodeMaintenance) labels.Selector {
	if nm.Spec.PodSelector == nil {
		return labels.Everything()
	}
	sel, err := metav1.LabelSelectorAsSelector(nm.Spec.PodSelector)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// PodScope is which pods of a node its maintenances drain by their podSelectors, and under which
// label policy: a pod is drained when one of the maintenances that drain the node selects it, and
// its label nodemaint.dev/drain is ignored when one of those that select it ignores the label
// (drainLabelPolicy Ignore). Before any maintenance drains the node, the maintenances that act on
// it say which pods a drain would concern (a maintenance that only cordons reports the pods its
// drain would leave as skipped), and labels count. So the node's plan drains a pod exactly when
// some maintenance's own classification drains it.
type PodScope struct {
	scopes []podScope
}

// podScope is one maintenance's part of a PodScope.
type podScope struct {
	pods        labels.Selector
	ignoreLabel bool
}

// NewPodScope is the scope of the maintenances acting on one node (the observation's, admitted),
// phaseOf giving each one's phase on the node (in a rollout, its turn: rollout.Phase, before the
// node is known drained), so that a maintenance waiting for its turn on the node does not widen
// what another one drains there.
func NewPodScope(nms []*nodemaintv1alpha1.NodeMaintenance, phaseOf func(*nodemaintv1alpha1.NodeMaintenance) nodemaintv1alpha1.Phase) PodScope {
	var s PodScope
	for _, nm := range nms {
		if Drains(phaseOf(nm)) {
			s.scopes = append(s.scopes, podScope{pods: PodSelector(nm), ignoreLabel: nm.Spec.DrainLabelPolicy == nodemaintv1alpha1.DrainLabelPolicyIgnore})
		}
	}
	if len(s.scopes) > 0 {
		return s
	}
	for _, nm := range nms {
		s.scopes = append(s.scopes, podScope{pods: PodSelector(nm)})
	}
	return s
}

// Selects reports whether some maintenance of the scope selects the pod, and whether one that
// selects it ignores the pod label nodemaint.dev/drain. A scope of no maintenance selects every
// pod and honors the label.
func (s PodScope) Selects(pod *corev1.Pod) (selected, ignoreLabel bool) {
	if len(s.scopes) == 0 {
		return true, false
	}
	set := labels.Set(pod.Labels)
	for _, sc := range s.scopes {
		if sc.pods.Matches(set) {
			selected = true
			ignoreLabel = ignoreLabel || sc.ignoreLabel
		}
	}
	return selected, ignoreLabel
}
