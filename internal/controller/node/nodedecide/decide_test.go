package nodedecide

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// A maintenance's life on one node, decision by decision: cordon and ask, wait for the owner,
// evict after the response timeout, then restore the node once the maintenance ends.
func TestDecideLifecycle(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "kernel"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true, Reason: "kernel upgrade",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Minute}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-1", UID: "web-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)}}}}
	observe := func(node *corev1.Node, pods []*corev1.Pod, nms ...*nodemaintv1alpha1.NodeMaintenance) Observation {
		obs := Observation{Node: node, Pods: pods}
		obs.Admit(nms)
		var cs []drain.Classified
		for i := range obs.Pods {
			cs = append(cs, drain.Classified{Pod: obs.Pods[i], Class: drain.Class{Behavior: nodemaintv1alpha1.DrainBehaviorDrain}})
		}
		obs.Plan = drain.NewPlan(cs)
		obs.Derive()
		return obs
	}

	// 1. Cordon, and ask the pod's owner; nothing evicted yet.
	d := Decide(observe(node, []*corev1.Pod{&pod}, nm), now)
	if !d.NodeChanged || !d.Node.Spec.Unschedulable || !d.Change.Cordoned || d.Node.Annotations[nodemaintv1alpha1.CordonedAnnotation] != "true" {
		t.Fatalf("not cordoned: %+v", d)
	}
	if got := d.Node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation]; got != "kernel=Drain" {
		t.Errorf("annotation %q, want kernel=Drain", got)
	}
	conds := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range d.Node.Status.Conditions {
		conds[c.Type] = c
	}
	if !d.ConditionChanged || len(conds) != 3 || conds[nodemaintv1alpha1.NodeConditionUnderMaintenance].Reason != string(nodemaintv1alpha1.PhaseDrain) ||
		conds[corev1.NodeMaintenanceInProgress].Status != corev1.ConditionTrue || conds[corev1.NodeDrainInProgress].Status != corev1.ConditionTrue {
		t.Errorf("conditions %+v; want UnderMaintenance (Drain), MaintenanceInProgress and DrainInProgress", d.Node.Status.Conditions)
	}
	if len(d.Request) != 1 || d.RequestReason != "kernel upgrade" || len(d.Evict) > 0 || d.RecheckAfter != 0 {
		t.Fatalf("request %d (%q), evict %d, recheck %v; want one request, none evicted, no timed look (the request's write brings it)", len(d.Request), d.RequestReason, len(d.Evict), d.RecheckAfter)
	}

	// 2. Asked 20s ago, no answer: wait the 40s left, and the second the condition's time cannot
	// say.
	cordoned := d.Node
	requested := *pod.DeepCopy()
	cond := maintenance.EvacuationRequest("kernel upgrade")
	cond.LastTransitionTime = metav1.NewTime(now.Add(-20 * time.Second))
	evacuation.SetCondition(&requested, cond)
	d = Decide(observe(cordoned, []*corev1.Pod{&requested}, nm), now)
	if d.NodeChanged || d.ConditionChanged || len(d.Request)+len(d.Withdraw)+len(d.Evict) > 0 || d.RecheckAfter != 41*time.Second {
		t.Fatalf("changed %v/%v, request %d, withdraw %d, evict %d, recheck %v; want nothing but a look in 41s",
			d.NodeChanged, d.ConditionChanged, len(d.Request), len(d.Withdraw), len(d.Evict), d.RecheckAfter)
	}
	if b := d.Report.Blocked; len(b) != 1 || b[0].Reason != nodemaintv1alpha1.BlockedReasonWaitingForOwner || d.Report.Pending != 1 {
		t.Errorf("report %+v", d.Report)
	}

	// 3. The response timeout ran out: evict; a refusal backs off, then the pod is evicted again.
	later := now.Add(41 * time.Second)
	d = Decide(observe(cordoned, []*corev1.Pod{&requested}, nm), later)
	if len(d.Evict) != 1 || d.Report.Blocked[0].Reason != nodemaintv1alpha1.BlockedReasonEvicting {
		t.Fatalf("evict %d, blocked %+v; want the pod evicted", len(d.Evict), d.Report.Blocked)
	}
	obs := observe(cordoned, []*corev1.Pod{&requested}, nm)
	obs.Refusals = map[types.UID]drain.Refusal{"web-1": {NotBefore: later.Add(2 * time.Second), Reason: nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, Message: "budget"}}
	d = Decide(obs, later)
	if len(d.Evict) != 0 || d.RecheckAfter != 2*time.Second || d.Report.Blocked[0].Reason != nodemaintv1alpha1.BlockedReasonPodDisruptionBudget {
		t.Fatalf("evict %d, recheck %v, blocked %+v; want a 2s back-off held by the budget", len(d.Evict), d.RecheckAfter, d.Report.Blocked)
	}

	// 4. The pod is gone and the maintenance ended: uncordon, drop the annotation and condition.
	ended := nm.DeepCopy()
	ended.Spec.Cordon, ended.Spec.Drain = false, false
	ended.Status.Phase = nodemaintv1alpha1.PhaseDrainComplete
	d = Decide(observe(cordoned, nil, ended), later)
	if !d.Change.Uncordoned || d.Node.Spec.Unschedulable || len(d.Node.Annotations) != 0 || len(d.Node.Status.Conditions) != 0 || !d.ConditionChanged {
		t.Fatalf("not restored: %+v, annotations %v, conditions %v", d.Change, d.Node.Annotations, d.Node.Status.Conditions)
	}

	// A node someone else cordoned stays cordoned; a request of nodemaint's is withdrawn.
	theirs := node.DeepCopy()
	theirs.Spec.Unschedulable = true
	d = Decide(observe(theirs, []*corev1.Pod{&requested}), later)
	if d.NodeChanged || !d.Node.Spec.Unschedulable || len(d.Withdraw) != 1 {
		t.Fatalf("changed %v, unschedulable %v, withdraw %d; want the cordon kept and the request withdrawn", d.NodeChanged, d.Node.Spec.Unschedulable, len(d.Withdraw))
	}
}
