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
	if !d.NodeChanged {
		t.Errorf("1: node not changed; want it cordoned")
	}
	if !d.Node.Spec.Unschedulable {
		t.Errorf("1: node schedulable; want it cordoned")
	}
	if !d.Change.Cordoned {
		t.Errorf("1: change %+v; want Cordoned", d.Change)
	}
	if got := d.Node.Annotations[nodemaintv1alpha1.CordonedAnnotation]; got != "true" {
		t.Errorf("1: cordoned annotation %q; want \"true\"", got)
	}
	if t.Failed() {
		t.FailNow()
	}
	if got := d.Node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation]; got != "kernel=Drain" {
		t.Errorf("annotation %q, want kernel=Drain", got)
	}
	conds := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range d.Node.Status.Conditions {
		conds[c.Type] = c
	}
	if !d.ConditionChanged {
		t.Errorf("1: conditions not changed; want them written")
	}
	if len(conds) != 3 {
		t.Errorf("1: conditions %+v; want UnderMaintenance, MaintenanceInProgress and DrainInProgress", d.Node.Status.Conditions)
	}
	if got := conds[nodemaintv1alpha1.NodeConditionUnderMaintenance].Reason; got != string(nodemaintv1alpha1.PhaseDrain) {
		t.Errorf("1: UnderMaintenance reason %q; want %q", got, nodemaintv1alpha1.PhaseDrain)
	}
	if got := conds[corev1.NodeMaintenanceInProgress].Status; got != corev1.ConditionTrue {
		t.Errorf("1: MaintenanceInProgress %q; want True", got)
	}
	if got := conds[corev1.NodeDrainInProgress].Status; got != corev1.ConditionTrue {
		t.Errorf("1: DrainInProgress %q; want True", got)
	}
	if len(d.Request) != 1 {
		t.Errorf("1: %d requests; want one", len(d.Request))
	}
	if d.RequestReason != "kernel upgrade" {
		t.Errorf("1: request reason %q; want %q", d.RequestReason, "kernel upgrade")
	}
	if len(d.Evict) > 0 {
		t.Errorf("1: %d evicted; want none", len(d.Evict))
	}
	if d.RecheckAfter != 0 {
		t.Errorf("1: recheck %v; want no timed look (the request's write brings it)", d.RecheckAfter)
	}
	if t.Failed() {
		t.FailNow()
	}

	// 2. Asked 20s ago, no answer: wait the 40s left, and the second the condition's time cannot
	// say.
	cordoned := d.Node
	requested := *pod.DeepCopy()
	cond := maintenance.EvacuationRequest("kernel upgrade")
	cond.LastTransitionTime = metav1.NewTime(now.Add(-20 * time.Second))
	evacuation.SetCondition(&requested, cond)
	d = Decide(observe(cordoned, []*corev1.Pod{&requested}, nm), now)
	if d.NodeChanged {
		t.Errorf("2: node changed; want nothing written")
	}
	if d.ConditionChanged {
		t.Errorf("2: conditions changed; want nothing written")
	}
	if n := len(d.Request) + len(d.Withdraw) + len(d.Evict); n > 0 {
		t.Errorf("2: request %d, withdraw %d, evict %d; want no act on a pod", len(d.Request), len(d.Withdraw), len(d.Evict))
	}
	if d.RecheckAfter != 41*time.Second {
		t.Errorf("2: recheck %v; want a look in 41s", d.RecheckAfter)
	}
	if t.Failed() {
		t.FailNow()
	}
	if b := d.Report.Blocked; len(b) != 1 || b[0].Reason != nodemaintv1alpha1.BlockedReasonWaitingForOwner {
		t.Errorf("2: blocked %+v; want the pod waiting for its owner", b)
	}
	if d.Report.Pending != 1 {
		t.Errorf("2: %d pending; want 1", d.Report.Pending)
	}

	// 3. The response timeout ran out: evict; a refusal backs off, then the pod is evicted again.
	later := now.Add(41 * time.Second)
	d = Decide(observe(cordoned, []*corev1.Pod{&requested}, nm), later)
	if len(d.Evict) != 1 {
		t.Fatalf("3: %d evicted; want the pod evicted", len(d.Evict))
	}
	if got := d.Report.Blocked[0].Reason; got != nodemaintv1alpha1.BlockedReasonEvicting {
		t.Fatalf("3: blocked %+v; want the pod reported %s", d.Report.Blocked, nodemaintv1alpha1.BlockedReasonEvicting)
	}
	obs := observe(cordoned, []*corev1.Pod{&requested}, nm)
	obs.Refusals = map[types.UID]drain.Refusal{"web-1": {NotBefore: later.Add(2 * time.Second), Reason: nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, Message: "budget"}}
	d = Decide(obs, later)
	if len(d.Evict) != 0 {
		t.Errorf("3: refused, %d evicted; want none during the back-off", len(d.Evict))
	}
	if d.RecheckAfter != 2*time.Second {
		t.Errorf("3: refused, recheck %v; want the 2s back-off", d.RecheckAfter)
	}
	if got := d.Report.Blocked[0].Reason; got != nodemaintv1alpha1.BlockedReasonPodDisruptionBudget {
		t.Errorf("3: refused, blocked %+v; want held by the budget", d.Report.Blocked)
	}
	if t.Failed() {
		t.FailNow()
	}

	// 4. The pod is gone and the maintenance ended: uncordon, drop the annotation and condition.
	ended := nm.DeepCopy()
	ended.Spec.Cordon, ended.Spec.Drain = false, false
	ended.Status.Phase = nodemaintv1alpha1.PhaseDrainComplete
	d = Decide(observe(cordoned, nil, ended), later)
	if !d.Change.Uncordoned {
		t.Errorf("4: change %+v; want Uncordoned", d.Change)
	}
	if d.Node.Spec.Unschedulable {
		t.Errorf("4: node unschedulable; want it uncordoned")
	}
	if len(d.Node.Annotations) != 0 {
		t.Errorf("4: annotations %v; want none", d.Node.Annotations)
	}
	if len(d.Node.Status.Conditions) != 0 {
		t.Errorf("4: conditions %v; want none", d.Node.Status.Conditions)
	}
	if !d.ConditionChanged {
		t.Errorf("4: conditions not changed; want their removal written")
	}
	if t.Failed() {
		t.FailNow()
	}

	// A node someone else cordoned stays cordoned; a request of nodemaint's is withdrawn.
	theirs := node.DeepCopy()
	theirs.Spec.Unschedulable = true
	d = Decide(observe(theirs, []*corev1.Pod{&requested}), later)
	if d.NodeChanged {
		t.Errorf("their cordon: node changed; want it left as it is")
	}
	if !d.Node.Spec.Unschedulable {
		t.Errorf("their cordon: node schedulable; want the cordon kept")
	}
	if len(d.Withdraw) != 1 {
		t.Errorf("their cordon: %d withdrawn; want the request withdrawn", len(d.Withdraw))
	}
}
