package nodemaintenancedecide

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/controller/preflightworker"
)

// TestPreflightBlock: a rollout with spec.rollout.preflight Block starts no node while its
// forecast is not computed (PreflightPending) or finds a deadlock (PreflightBlocked, naming the
// findings that block), starts once it is clean, and, once started, is no longer held by it;
// with Warn the forecast holds nothing.
func TestPreflightBlock(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	deadlock := &nodemaintv1alpha1.PreflightStatus{Deadlocks: 1, NodesBlocked: 1, Findings: []nodemaintv1alpha1.PreflightFinding{
		{Node: "a", Severity: "Blocks", Reason: nodemaintv1alpha1.PreflightReasonBudgetBlocked, Object: "PodDisruptionBudget shop/db", Message: "never", Count: 1},
		{Node: "a", Severity: "Loses", Reason: nodemaintv1alpha1.PreflightReasonCannotSurge, Object: "StatefulSet shop/cache", Message: "down", Count: 1},
	}}
	clean := &nodemaintv1alpha1.PreflightStatus{NodesLosing: 1, Findings: deadlock.Findings[1:]}
	started := &nodemaintv1alpha1.RolloutStatus{InTurn: []nodemaintv1alpha1.NodeTurn{{Name: "a", Since: metav1.NewTime(now)}}}
	for _, tc := range []struct {
		name      string
		policy    nodemaintv1alpha1.PreflightPolicy
		preflight *nodemaintv1alpha1.PreflightStatus
		status    *nodemaintv1alpha1.RolloutStatus
		reason    string // RolloutHalted's; "" when a node starts
		inMessage string
	}{
		{name: "pending", policy: nodemaintv1alpha1.PreflightBlock, reason: nodemaintv1alpha1.ReasonPreflightPending, inMessage: "until the preflight's deadlock forecast is computed"},
		{name: "deadlock", policy: nodemaintv1alpha1.PreflightBlock, preflight: deadlock, reason: nodemaintv1alpha1.ReasonPreflightBlocked,
			inMessage: "the preflight forecasts 1 deadlock: a: BudgetBlocked (PodDisruptionBudget shop/db); no node starts"},
		{name: "clean", policy: nodemaintv1alpha1.PreflightBlock, preflight: clean},
		{name: "started", policy: nodemaintv1alpha1.PreflightBlock, preflight: deadlock, status: started},
		{name: "warn", policy: nodemaintv1alpha1.PreflightWarn, preflight: deadlock},
		{name: "unset", preflight: deadlock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1},
				Spec:   nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true, Rollout: &nodemaintv1alpha1.RolloutSpec{Preflight: tc.policy}},
				Status: nodemaintv1alpha1.NodeMaintenanceStatus{Rollout: tc.status}}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
			o := Observation{Maintenance: nm, Nodes: []*corev1.Node{node}, Preflight: tc.preflight, Planning: preflightworker.Gates(nm),
				Reports: []nodedecide.Report{{}}}
			d, hold := decideTurns(o, []NodeDecision{{Name: "a", Node: node}}, now)
			if d.HaltReason != tc.reason || !strings.Contains(hold, tc.inMessage) {
				t.Errorf("halt %q %q, want %q containing %q", d.HaltReason, hold, tc.reason, tc.inMessage)
			}
			if started := len(d.InTurn) == 1; started != (tc.reason == "") {
				t.Errorf("in turn %+v with halt %q", d.InTurn, d.HaltReason)
			}
			if tc.reason != "" && strings.Contains(hold, "CannotSurge") {
				t.Errorf("the message names a finding that does not block: %q", hold)
			}
			if tc.reason == "" {
				return
			}
			full := Decide(o, "", now)
			for _, typ := range []string{nodemaintv1alpha1.ConditionRolloutHalted, nodemaintv1alpha1.ConditionReady} {
				var c *metav1.Condition
				for i := range full.Status.Conditions {
					if full.Status.Conditions[i].Type == typ {
						c = &full.Status.Conditions[i]
					}
				}
				if c == nil || c.Reason != tc.reason || c.Message != hold {
					t.Errorf("%s %+v, want reason %s and %q", typ, c, tc.reason, hold)
				}
			}
			if full.RecheckAfter <= 0 || full.RecheckAfter > preflightworker.GatedRefresh {
				t.Errorf("looks again after %s, want within %s", full.RecheckAfter, preflightworker.GatedRefresh)
			}
		})
	}
}
