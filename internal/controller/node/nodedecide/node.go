package nodedecide

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// wantNode is the node as the intent wants it: cordoned while a maintenance cordons it (and
// uncordoned only when nodemaint cordoned it, as its annotation's entries recorded), the maintenances annotation, the drain starts
// annotation (drainStarts, maintenance.FormatDrainStarts), the autoscaler annotations
// (holdAutoscalers), the PreferNoSchedule
// taint while the node is only planned, the out-of-service taint when oos, and the
// UnderMaintenance condition. It returns the observed node itself when nothing changes.
func wantNode(node *corev1.Node, recorded []maintenance.NodeEntry, intent maintenance.NodeIntent, drainStarts string, oos bool, now time.Time) (want *corev1.Node, change NodeChange, changed, conditionChanged bool) {
	want = node.DeepCopy()
	wasCordonedByUs := false
	for _, e := range recorded {
		wasCordonedByUs = wasCordonedByUs || maintenance.Cordons(e.Phase)
	}
	switch {
	case intent.Cordon && !node.Spec.Unschedulable:
		want.Spec.Unschedulable = true
		setAnnotation(want, nodemaintv1alpha1.CordonedAnnotation, "true")
		change.Cordoned, change.Reverted = true, wasCordonedByUs
	case !intent.Cordon && node.Annotations[nodemaintv1alpha1.CordonedAnnotation] != "":
		change.Uncordoned = node.Spec.Unschedulable
		want.Spec.Unschedulable = false
		delete(want.Annotations, nodemaintv1alpha1.CordonedAnnotation)
	}
	if len(intent.Entries) > 0 {
		setAnnotation(want, nodemaintv1alpha1.MaintenancesAnnotation, maintenance.FormatEntries(intent.Entries))
	} else {
		delete(want.Annotations, nodemaintv1alpha1.MaintenancesAnnotation)
	}
	if drainStarts != "" {
		setAnnotation(want, nodemaintv1alpha1.DrainStartedAnnotation, drainStarts)
	} else {
		delete(want.Annotations, nodemaintv1alpha1.DrainStartedAnnotation)
	}
	completeOnlyPending(want, intent)
	holdAutoscalers(want, intent.HoldAutoscalers)
	want.Spec.Taints = withTaint(want.Spec.Taints, corev1.Taint{
		Key: nodemaintv1alpha1.PlannedMaintenanceTaint, Effect: corev1.TaintEffectPreferNoSchedule,
	}, intent.PlannedTaint)
	hadOutOfService := node.Annotations[nodemaintv1alpha1.OutOfServiceAnnotation] != ""
	if oos || hadOutOfService {
		want.Spec.Taints = withTaint(want.Spec.Taints, OutOfServiceTaint, oos)
	}
	if oos {
		setAnnotation(want, nodemaintv1alpha1.OutOfServiceAnnotation, "true")
	} else {
		delete(want.Annotations, nodemaintv1alpha1.OutOfServiceAnnotation)
	}
	change.OutOfService = oos && !hadOutOfService
	change.BackInService = !oos && hadOutOfService
	changed = !equality.Semantic.DeepEqual(node.Spec, want.Spec) || !equality.Semantic.DeepEqual(node.Annotations, want.Annotations)
	if !changed {
		change = NodeChange{}
	}
	conditions, changed1 := withCondition(node.Status.Conditions, nodemaintv1alpha1.NodeConditionUnderMaintenance, intent.Condition(), false, now)
	lifecycle := intent.LifecycleConditions()
	for _, t := range LifecycleConditionTypes {
		var changed2 bool
		conditions, changed2 = withCondition(conditions, t, lifecycle[t], true, now)
		changed1 = changed1 || changed2
	}
	want.Status.Conditions, conditionChanged = conditions, changed1
	if !changed && !conditionChanged {
		return node, change, false, false
	}
	return want, change, changed, conditionChanged
}

// LifecycleConditionTypes are the KEP-5683 node lifecycle conditions nodemaint keeps.
var LifecycleConditionTypes = []corev1.NodeConditionType{corev1.NodeMaintenancePlanned, corev1.NodeMaintenanceInProgress, corev1.NodeDrainInProgress, corev1.NodeDrained}

// withCondition returns conditions with the condition of type t as wanted (nil: absent), and
// whether that changes them. Its times are now when it changes, its transition time kept while
// its status stays. onlyOurs: a condition of another reason than nodemaint's is never removed
// (KEP-5683's conditions are the admin's; another tool may set them). The kubelet's conditions
// are left as they are.
func withCondition(conditions []corev1.NodeCondition, t corev1.NodeConditionType, want *corev1.NodeCondition, onlyOurs bool, now time.Time) ([]corev1.NodeCondition, bool) {
	idx := -1
	for i, c := range conditions {
		if c.Type == t {
			idx = i
		}
	}
	switch {
	case want == nil && idx < 0:
		return conditions, false
	case want == nil && onlyOurs && conditions[idx].Reason != nodemaintv1alpha1.NodeConditionReasonNodeMaintenance:
		return conditions, false
	case want == nil:
		out := append([]corev1.NodeCondition(nil), conditions[:idx]...)
		return append(out, conditions[idx+1:]...), true
	case idx >= 0 && conditions[idx].Status == want.Status && conditions[idx].Reason == want.Reason && conditions[idx].Message == want.Message:
		return conditions, false
	}
	c := *want
	c.LastHeartbeatTime, c.LastTransitionTime = metav1.NewTime(now), metav1.NewTime(now)
	out := append([]corev1.NodeCondition(nil), conditions...)
	if idx < 0 {
		return append(out, c), true
	}
	if out[idx].Status == c.Status {
		c.LastTransitionTime = out[idx].LastTransitionTime
	}
	out[idx] = c
	return out, true
}

// completeOnlyPending drops from the node annotation nodemaint.dev/complete the maintenances whose
// turn on the node is recorded as ended: the completion was used, and must not complete the turn
// of a later maintenance of the same name.
func completeOnlyPending(node *corev1.Node, intent maintenance.NodeIntent) {
	value := node.Annotations[nodemaintv1alpha1.CompleteAnnotation]
	if value == "" {
		return
	}
	ended := map[string]bool{}
	for _, e := range intent.Entries {
		ended[e.Name] = e.Phase == nodemaintv1alpha1.PhaseReleased || e.Phase == nodemaintv1alpha1.PhaseFailed
	}
	var keep []string
	for _, name := range strings.Split(value, ",") {
		if name = strings.TrimSpace(name); name != "" && !ended[name] {
			keep = append(keep, name)
		}
	}
	if len(keep) == 0 {
		delete(node.Annotations, nodemaintv1alpha1.CompleteAnnotation)
		return
	}
	node.Annotations[nodemaintv1alpha1.CompleteAnnotation] = strings.Join(keep, ",")
}

func setAnnotation(obj metav1.Object, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}

// withTaint returns taints with t present or absent (matched by key and effect).
func withTaint(taints []corev1.Taint, t corev1.Taint, present bool) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints)+1)
	found := false
	for _, cur := range taints {
		if cur.Key == t.Key && cur.Effect == t.Effect {
			if !present {
				continue
			}
			found = true
		}
		out = append(out, cur)
	}
	if present && !found {
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
