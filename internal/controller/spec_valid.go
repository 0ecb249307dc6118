package controller

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// setSpecValid reports on the maintenance's own status a spec the controller cannot use (stored
// before the API server refused it): SpecValid False naming the fields and their values, removed
// once the spec is fixed. The maintenance then does nothing destructive (maintenance.Usable).
func setSpecValid(nm *nodemaintv1alpha1.NodeMaintenance, status *nodemaintv1alpha1.NodeMaintenanceStatus) {
	problems := nm.Spec.Problems()
	if len(problems) == 0 {
		meta.RemoveStatusCondition(&status.Conditions, nodemaintv1alpha1.ConditionSpecValid)
		return
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: nodemaintv1alpha1.ConditionSpecValid, Status: metav1.ConditionFalse, Reason: nodemaintv1alpha1.ReasonInvalidSpec,
		ObservedGeneration: nm.Generation,
		Message: strings.Join(problems, "; ") +
			"; until it is fixed, nodemaint only cordons and requests evacuation: it evicts, deletes and taints nothing for this maintenance",
	})
}

// recordSpecValid emits a Warning Event when the maintenance's spec becomes unusable, or changes
// while it is.
func (r *NodeMaintenanceReconciler) recordSpecValid(old, cur *nodemaintv1alpha1.NodeMaintenance) {
	c := meta.FindStatusCondition(cur.Status.Conditions, nodemaintv1alpha1.ConditionSpecValid)
	if c == nil {
		return
	}
	if was := meta.FindStatusCondition(old.Status.Conditions, nodemaintv1alpha1.ConditionSpecValid); was != nil && was.Message == c.Message {
		return
	}
	r.Recorder.Eventf(cur, nil, corev1.EventTypeWarning, nodemaintv1alpha1.ReasonInvalidSpec, "Reconcile", "%s", c.Message)
}
