package rollout

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// Turn returns the node's turn in the maintenance's rollout, nil when it is not in its turn.
func Turn(nm *nodemaintv1alpha1.NodeMaintenance, node string) *nodemaintv1alpha1.NodeTurn {
	if nm.Status.Rollout == nil {
		return nil
	}
	for i := range nm.Status.Rollout.InTurn {
		if nm.Status.Rollout.InTurn[i].Name == node {
			return &nm.Status.Rollout.InTurn[i]
		}
	}
	return nil
}

// Phase is the maintenance's phase on the node. Without a rollout, the maintenance's own phase
// (maintenance.Phase), but Planning while it is refused (Refused). In a rollout: Released or Failed once the node's turn ended (recorded in
// the node's annotation, whose entries are recorded, and kept until the maintenance ends); in its
// turn, the maintenance's phase until the release policy releases it (drained: no targeted pod
// and no volume left); Planning while it waits.
func Phase(nm *nodemaintv1alpha1.NodeMaintenance, node *corev1.Node, recorded []maintenance.NodeEntry, drained bool) nodemaintv1alpha1.Phase {
	p := maintenance.Phase(nm, false)
	if p == nodemaintv1alpha1.PhaseDrain && drained {
		p = nodemaintv1alpha1.PhaseDrainComplete
	}
	if p == nodemaintv1alpha1.PhaseMaintenanceComplete || p == nodemaintv1alpha1.PhasePlanning {
		return p
	}
	if nm.Spec.Rollout == nil {
		if Refused(nm, node) {
			return nodemaintv1alpha1.PhasePlanning
		}
		return p
	}
	if done := Recorded(nm.Name, recorded); done != "" {
		return done
	}
	turn := Turn(nm, node.Name)
	switch {
	case turn == nil:
		return nodemaintv1alpha1.PhasePlanning
	case turn.Failed:
		return nodemaintv1alpha1.PhaseFailed
	case Released(nm, node, turn, drained):
		return nodemaintv1alpha1.PhaseReleased
	}
	return p
}

// Refused reports whether a maintenance without a rollout does not start on the node because it
// would take control-plane nodes (etcd members) together: its status says it selects more than
// one (NodesSelected False, reason EtcdQuorumAtRisk), or, on a control-plane node, its status
// has not said yet, for its generation, how many it selects. Every node it selects stays in
// Planning while it is refused.
func Refused(nm *nodemaintv1alpha1.NodeMaintenance, node *corev1.Node) bool {
	if nm.Spec.Rollout != nil {
		return false
	}
	c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionNodesSelected)
	if c != nil && c.Reason == nodemaintv1alpha1.ReasonEtcdQuorumAtRisk {
		return true
	}
	return ControlPlane(node) && (c == nil || c.ObservedGeneration != nm.Generation)
}

// ControlPlane reports whether the node is a control-plane node (label
// node-role.kubernetes.io/control-plane, whatever its value): a member of a stacked etcd, as
// kubeadm sets clusters up.
func ControlPlane(node *corev1.Node) bool {
	_, ok := node.Labels[nodemaintv1alpha1.ControlPlaneLabel]
	return ok
}

// Recorded returns Released or Failed when the node's annotation (its entries, recorded:
// maintenance.NodeEntries) records that its turn in the maintenance ended, and "" otherwise.
func Recorded(name string, recorded []maintenance.NodeEntry) nodemaintv1alpha1.Phase {
	for _, e := range recorded {
		if e.Name == name && Ended(e.Phase) {
			return e.Phase
		}
	}
	return ""
}

// Ended reports whether a node's phase says its turn ended.
func Ended(p nodemaintv1alpha1.Phase) bool {
	return p == nodemaintv1alpha1.PhaseReleased || p == nodemaintv1alpha1.PhaseFailed
}

// Released reports whether the release policy ends the node's turn now. Drained: drained.
// Rebooted: drained, booted again since the turn started (another bootID), and Ready. Manual:
// the node's annotation nodemaint.dev/complete names the maintenance.
func Released(nm *nodemaintv1alpha1.NodeMaintenance, node *corev1.Node, turn *nodemaintv1alpha1.NodeTurn, drained bool) bool {
	switch nm.Spec.Rollout.Release {
	case nodemaintv1alpha1.ReleaseManual:
		return Completed(nm.Name, node)
	case nodemaintv1alpha1.ReleaseRebooted:
		return drained && node.Status.NodeInfo.BootID != turn.BootID && ready(node)
	}
	return drained && nm.Spec.Drain
}

// Completed reports whether the node's annotation nodemaint.dev/complete names the maintenance.
func Completed(name string, node *corev1.Node) bool {
	for _, n := range strings.Split(node.Annotations[nodemaintv1alpha1.CompleteAnnotation], ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

func ready(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}
