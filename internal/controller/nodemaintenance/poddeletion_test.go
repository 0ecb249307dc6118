package nodemaintenance

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/nodemaintenance/nodemaintenancedecide"
)

// TestPodDeletionGranted: a maintenance with drainTimeoutAction Delete says in its status whether
// the controller may delete pods; without the permission its timed-out drain does not claim to
// delete, a Warning Event says so once, and a Normal Event when the permission comes. Any other
// maintenance has no such condition.
func TestPodDeletionGranted(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "kernel", Generation: 1},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true,
			DrainTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Minute}, DrainTimeoutAction: nodemaintv1alpha1.DrainTimeoutActionDelete},
	}
	timedOut := metav1.Condition{Type: nodemaintv1alpha1.ConditionDrainTimedOut, Status: metav1.ConditionTrue, Reason: nodemaintv1alpha1.ReasonDrainTimedOut,
		Message: "not drained 5m0s after drain started: 1 pods and 0 volumes left on 1 nodes" + nodemaintenancedecide.DeletingNote}

	denied := nodemaintv1alpha1.NodeMaintenanceStatus{Conditions: []metav1.Condition{timedOut}}
	nodemaintenancedecide.SetPodDeletionGranted(nm, &denied, true, now)
	c := meta.FindStatusCondition(denied.Conditions, nodemaintv1alpha1.ConditionPodDeletionGranted)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != nodemaintv1alpha1.ReasonPodDeletionNotGranted || !strings.Contains(c.Message, "podDeletion.enabled") {
		t.Fatalf("denied: condition %+v; want False, PodDeletionNotGranted, naming the opt-in", c)
	}
	if m := meta.FindStatusCondition(denied.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut).Message; strings.Contains(m, nodemaintenancedecide.DeletingNote) || !strings.Contains(m, "not deleting them") {
		t.Errorf("denied: DrainTimedOut says %q; want it not to claim deletions", m)
	}

	granted := nodemaintv1alpha1.NodeMaintenanceStatus{Conditions: []metav1.Condition{timedOut}}
	nodemaintenancedecide.SetPodDeletionGranted(nm, &granted, false, now)
	if c := meta.FindStatusCondition(granted.Conditions, nodemaintv1alpha1.ConditionPodDeletionGranted); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("granted: condition %+v; want True", c)
	}
	if m := meta.FindStatusCondition(granted.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut).Message; !strings.HasSuffix(m, nodemaintenancedecide.DeletingNote) {
		t.Errorf("granted: DrainTimedOut says %q", m)
	}

	rec := events.NewFakeRecorder(4)
	before, after := nm.DeepCopy(), nm.DeepCopy()
	before.Status.Conditions = []metav1.Condition{timedOut} // the drain timed out before: no Event of its own
	after.Status = denied
	sinkOf(rec).statusWritten(before, after, now)
	if e := <-rec.Events; !strings.Contains(e, "Warning PodDeletionNotGranted") {
		t.Errorf("Event %q; want Warning PodDeletionNotGranted", e)
	}
	sinkOf(rec).statusWritten(after, after.DeepCopy(), now)
	again := after.DeepCopy()
	again.Status = granted
	sinkOf(rec).statusWritten(after, again, now)
	if e := <-rec.Events; !strings.Contains(e, "Normal PodDeletionGranted") {
		t.Errorf("Event %q; want Normal PodDeletionGranted (and no second Warning before it)", e)
	}

	report := nm.DeepCopy()
	report.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionReport
	st := denied.DeepCopy()
	nodemaintenancedecide.SetPodDeletionGranted(report, st, true, now)
	if c := meta.FindStatusCondition(st.Conditions, nodemaintv1alpha1.ConditionPodDeletionGranted); c != nil {
		t.Errorf("Report: condition %+v; want none", c)
	}
}
