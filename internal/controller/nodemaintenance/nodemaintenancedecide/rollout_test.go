package nodemaintenancedecide

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// A maintenance without a rollout that selects two control-plane nodes is refused, naming them;
// with a rollout, or one control-plane node, it is not.
func TestEtcdQuorumAtRisk(t *testing.T) {
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true,
		NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "pool", Operator: corev1.NodeSelectorOpExists}}}}}}}
	sel := maintenance.NewSelector(nm)
	c := nodesSelectedCondition(nm, sel, 5, 9, []string{"cp1", "cp2"})
	if c.Status != metav1.ConditionFalse {
		t.Errorf("two control-plane nodes: %s; want False", c.Status)
	}
	if c.Reason != nodemaintv1alpha1.ReasonEtcdQuorumAtRisk {
		t.Errorf("two control-plane nodes: reason %s; want %s", c.Reason, nodemaintv1alpha1.ReasonEtcdQuorumAtRisk)
	}
	if c.ObservedGeneration != 3 {
		t.Errorf("two control-plane nodes: observed generation %d; want 3", c.ObservedGeneration)
	}
	if want := "2 control-plane nodes (cp1, cp2)"; !strings.Contains(c.Message, want) {
		t.Fatalf("two control-plane nodes: message %q; want it to name them, %q", c.Message, want)
	}
	if c := nodesSelectedCondition(nm, sel, 5, 9, []string{"cp1"}); c.Status != metav1.ConditionTrue {
		t.Fatalf("one control-plane node: %s %s", c.Status, c.Reason)
	}
	nm.Spec.Rollout = &nodemaintv1alpha1.RolloutSpec{}
	if c := nodesSelectedCondition(nm, sel, 5, 9, []string{"cp1", "cp2"}); c.Status != metav1.ConditionTrue {
		t.Fatalf("a rollout: %s %s", c.Status, c.Reason)
	}
}

// The status of a soaking rollout says until when; blocked nodes are counted and named.
func TestRolloutStatusSoakBlocked(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	nm := &nodemaintv1alpha1.NodeMaintenance{Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true,
		Rollout: &nodemaintv1alpha1.RolloutSpec{SoakTime: &nodemaintv1alpha1.Duration{Duration: time.Minute}, MaxBlockedNodes: 1}}}
	d := &rollout.Decision{Budget: 1, Done: 1, Waiting: 2, LastRelease: now, SoakingUntil: now.Add(time.Minute), Blocked: []string{"n2"},
		InTurn: []nodemaintv1alpha1.NodeTurn{{Name: "n2", Blocked: true}}}
	var status nodemaintv1alpha1.NodeMaintenanceStatus
	rolloutStatus(nm, d, &status, now)
	r := status.Rollout
	if r.NodesBlocked != 1 {
		t.Errorf("rollout status: %d nodes blocked; want 1", r.NodesBlocked)
	}
	if !r.LastReleaseTime.Time.Equal(now) {
		t.Errorf("rollout status: last release %v; want %v", r.LastReleaseTime, now)
	}
	if want := now.Add(time.Minute); !r.SoakingUntil.Time.Equal(want) {
		t.Errorf("rollout status: soaking until %v; want %v", r.SoakingUntil, want)
	}
	c := meta.FindStatusCondition(status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
	if c.Status != metav1.ConditionFalse {
		t.Errorf("RolloutHalted %s; want False", c.Status)
	}
	if c.Reason != nodemaintv1alpha1.ReasonSoaking {
		t.Errorf("RolloutHalted reason %s; want %s", c.Reason, nodemaintv1alpha1.ReasonSoaking)
	}
	if want := "no new node starts until 2026-01-01T12:01:00Z (soakTime 1m0s)"; !strings.Contains(c.Message, want) {
		t.Errorf("RolloutHalted message %q; want it to say %q", c.Message, want)
	}
	if !strings.Contains(c.Message, "1 blocked") {
		t.Errorf("RolloutHalted message %q; want it to count 1 blocked", c.Message)
	}
}
