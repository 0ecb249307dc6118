package nodemaintenancedecide

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Ready says whether the maintenance reached what its spec asks, with the reason of what it
// waits for otherwise, as GitOps tools (kstatus) read it.
func TestReadyCondition(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message"}
	}
	selected := cond(nodemaintv1alpha1.ConditionNodesSelected, metav1.ConditionTrue, nodemaintv1alpha1.ReasonNodesSelected)
	pending := cond(nodemaintv1alpha1.ConditionDrained, metav1.ConditionFalse, nodemaintv1alpha1.ReasonPodsPending)
	drained := cond(nodemaintv1alpha1.ConditionDrained, metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrained)
	for _, tc := range []struct {
		name          string
		cordon, drain bool
		rollout       bool
		phase         nodemaintv1alpha1.Phase
		cordoned      int
		conds         []metav1.Condition
		want          metav1.ConditionStatus
		reason        string
	}{
		{name: "planning", phase: nodemaintv1alpha1.PhasePlanning, conds: []metav1.Condition{selected}, want: metav1.ConditionTrue, reason: nodemaintv1alpha1.ReasonPlanned},
		{name: "cordon under way", cordon: true, phase: nodemaintv1alpha1.PhaseCordon, cordoned: 1, conds: []metav1.Condition{selected}, want: metav1.ConditionFalse, reason: nodemaintv1alpha1.ReasonCordoning},
		{name: "cordoned", cordon: true, phase: nodemaintv1alpha1.PhaseCordon, cordoned: 2, conds: []metav1.Condition{selected}, want: metav1.ConditionTrue, reason: nodemaintv1alpha1.ReasonCordoned},
		{name: "draining", cordon: true, drain: true, phase: nodemaintv1alpha1.PhaseDrain, cordoned: 2, conds: []metav1.Condition{selected, pending}, want: metav1.ConditionFalse, reason: nodemaintv1alpha1.ReasonPodsPending},
		{name: "drained", cordon: true, drain: true, phase: nodemaintv1alpha1.PhaseDrainComplete, cordoned: 2, conds: []metav1.Condition{selected, drained}, want: metav1.ConditionTrue, reason: nodemaintv1alpha1.ReasonDrained},
		{name: "drained but a node not cordoned", drain: true, phase: nodemaintv1alpha1.PhaseDrainComplete, cordoned: 1, conds: []metav1.Condition{selected, drained}, want: metav1.ConditionFalse, reason: nodemaintv1alpha1.ReasonCordoning},
		{name: "drain timed out", drain: true, phase: nodemaintv1alpha1.PhaseDrain, cordoned: 2, conds: []metav1.Condition{selected, pending,
			cond(nodemaintv1alpha1.ConditionDrainTimedOut, metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrainTimedOut)}, want: metav1.ConditionFalse, reason: nodemaintv1alpha1.ReasonDrainTimedOut},
		{name: "rollout halted", drain: true, rollout: true, phase: nodemaintv1alpha1.PhaseDrain, conds: []metav1.Condition{selected, pending,
			cond(nodemaintv1alpha1.ConditionRolloutHalted, metav1.ConditionTrue, nodemaintv1alpha1.ReasonReplacementsUnschedulable)}, want: metav1.ConditionFalse, reason: nodemaintv1alpha1.ReasonReplacementsUnschedulable},
		{name: "rollout that cordons, complete", cordon: true, rollout: true, phase: nodemaintv1alpha1.PhaseCordon, conds: []metav1.Condition{selected,
			cond(nodemaintv1alpha1.ConditionRolloutHalted, metav1.ConditionFalse, nodemaintv1alpha1.ReasonRolloutComplete)}, want: metav1.ConditionTrue, reason: nodemaintv1alpha1.ReasonRolloutComplete},
		{name: "no node selected", cordon: true, drain: true, phase: nodemaintv1alpha1.PhaseDrain, conds: []metav1.Condition{
			cond(nodemaintv1alpha1.ConditionNodesSelected, metav1.ConditionFalse, nodemaintv1alpha1.ReasonNoNodesSelected)}, want: metav1.ConditionFalse, reason: nodemaintv1alpha1.ReasonNoNodesSelected},
		{name: "invalid spec", drain: true, phase: nodemaintv1alpha1.PhaseDrain, cordoned: 2, conds: []metav1.Condition{selected, drained,
			cond(nodemaintv1alpha1.ConditionSpecValid, metav1.ConditionFalse, nodemaintv1alpha1.ReasonInvalidSpec)}, want: metav1.ConditionFalse, reason: nodemaintv1alpha1.ReasonInvalidSpec},
		{name: "complete", phase: nodemaintv1alpha1.PhaseMaintenanceComplete, conds: []metav1.Condition{selected}, want: metav1.ConditionTrue, reason: nodemaintv1alpha1.ReasonMaintenanceComplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := &nodemaintv1alpha1.NodeMaintenance{Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: tc.cordon, Drain: tc.drain}}
			if tc.rollout {
				nm.Spec.Rollout = &nodemaintv1alpha1.RolloutSpec{}
			}
			got := readyCondition(nm, nodemaintv1alpha1.NodeMaintenanceStatus{Phase: tc.phase, SelectedNodes: 2, Conditions: tc.conds}, tc.cordoned)
			if got.Status != tc.want {
				t.Errorf("Ready %s; want %s", got.Status, tc.want)
			}
			if got.Reason != tc.reason {
				t.Errorf("Ready reason %s; want %s", got.Reason, tc.reason)
			}
			if got.Message == "" {
				t.Errorf("Ready with no message; want one")
			}
		})
	}
}
