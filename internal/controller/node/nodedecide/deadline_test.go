package nodedecide

import (
	"strings"
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

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// deleting is a maintenance that drains with drainTimeout 5m, drainTimeoutAction Delete and the
// default response timeout (3m), whose drain started an hour ago (status.drainStartTime).
func deleting(name string) *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{
		Status:     nodemaintv1alpha1.NodeMaintenanceStatus{DrainStartTime: ptr.To(metav1.NewTime(t0.Add(-time.Hour)))},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(t0.Add(-2 * time.Hour))},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true, Reason: "kernel upgrade",
			DrainTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Minute}, DrainTimeoutAction: nodemaintv1alpha1.DrainTimeoutActionDelete},
	}
}

// cordonedNode is n1 cordoned and held from autoscalers by nodemaint, with the drain starts
// recorded (none: nil).
func cordonedNode(starts map[string]maintenance.DrainStart) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{nodemaintv1alpha1.CordonedAnnotation: "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true}}
	holdAutoscalers(node, true)
	if v := maintenance.FormatDrainStarts(starts); v != "" {
		node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation] = v
	}
	return node
}

// replicaPod is a ReplicaSet's pod, asked by nodemaint at asked (zero: not asked).
func replicaPod(name string, asked time.Time, labels map[string]string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID(name), Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)}}}}
	if !asked.IsZero() {
		cond := maintenance.EvacuationRequest("kernel upgrade")
		cond.LastTransitionTime = metav1.NewTime(asked)
		evacuation.SetCondition(pod, cond)
	}
	return pod
}

// observeClassed observes the node with the pods classified Drain, in the order groups given
// (by pod name; 0 otherwise), and the label ignored or not as the plan's classification.
func observeClassed(node *corev1.Node, pods []*corev1.Pod, ignoreLabel bool, order map[string]int32, nms ...*nodemaintv1alpha1.NodeMaintenance) Observation {
	obs := Observation{Node: node, Pods: pods, IgnoreDrainLabel: ignoreLabel}
	obs.Admit(nms)
	var cs []drain.Classified
	for i := range obs.Pods {
		class := drain.Class{Behavior: nodemaintv1alpha1.DrainBehaviorDrain, Order: order[obs.Pods[i].Name]}
		if l := obs.Pods[i].Labels[nodemaintv1alpha1.DrainLabel]; l == nodemaintv1alpha1.DrainLabelSkip && !ignoreLabel {
			class = drain.Class{Behavior: nodemaintv1alpha1.DrainBehaviorSkip, Source: "label"}
		}
		cs = append(cs, drain.Classified{Pod: obs.Pods[i], Class: class})
	}
	obs.Plan = drain.NewPlan(cs)
	obs.Derive()
	return obs
}

func names(cs []drain.Classified) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Pod.Name)
	}
	return strings.Join(out, ",")
}

// TestDeleteCountsFromTheNodesOwnDrain: drainTimeoutAction Delete counts per node from that
// node's own drain start for the maintenance, recorded in the node, never from the maintenance's
// drainStartTime or the node's turn; and deletes only pods asked at least the response timeout
// ago.
func TestDeleteCountsFromTheNodesOwnDrain(t *testing.T) {
	// A rollout that cordoned first (drain false) for an hour, then drain true: the node's turn
	// started an hour ago, its drain starts now.
	t.Run("rollout cordoned first", func(t *testing.T) {
		nm := deleting("pool")
		nm.Generation = 2 // drain: true came with the second generation
		nm.Spec.Rollout = &nodemaintv1alpha1.RolloutSpec{Release: nodemaintv1alpha1.ReleaseDrained}
		nm.Status.Rollout = &nodemaintv1alpha1.RolloutStatus{InTurn: []nodemaintv1alpha1.NodeTurn{{Name: "n1", Since: metav1.NewTime(t0.Add(-time.Hour))}}}
		nm.Status.DrainStartTime = ptr.To(metav1.NewTime(t0.Add(-time.Second)))
		node := cordonedNode(nil)
		node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation] = "pool=Cordon"
		d := Decide(observeClassed(node, []*corev1.Pod{replicaPod("web-1", time.Time{}, nil)}, false, nil, nm), t0)
		if len(d.Delete) > 0 {
			t.Fatalf("deleted %s the moment drain turned true, an hour into the node's turn", names(d.Delete))
		}
		if len(d.Request) != 1 {
			t.Fatalf("%d requests; want the pod asked", len(d.Request))
		}
		if !d.NodeChanged {
			t.Fatalf("node not changed; want the node's drain start recorded")
		}
		starts := maintenance.ParseDrainStarts(d.Node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])
		r := starts["pool"]
		if !r.Start.Equal(t0) {
			t.Errorf("recorded drain start %v (of %+v); want now, %v", r.Start, starts, t0)
		}
		if r.Generation != 2 {
			t.Errorf("recorded generation %d; want 2", r.Generation)
		}
		if r.UID != nm.UID {
			t.Errorf("recorded UID %q; want the maintenance's, %q", r.UID, nm.UID)
		}
		if t.Failed() {
			t.FailNow()
		}
		if d.RecheckAfter == 0 || d.RecheckAfter > 5*time.Minute {
			t.Errorf("recheck %v; want at most the drainTimeout", d.RecheckAfter)
		}

		// Asked with the record's write; 4m later the node's drainTimeout has not run out, 5m
		// later it has, and the pod was asked 5m ago: deleted.
		recorded := d.Node
		asked := []*corev1.Pod{replicaPod("web-1", t0, nil)}
		d = Decide(observeClassed(recorded, asked, false, nil, nm), t0.Add(4*time.Minute))
		if len(d.Delete) > 0 {
			t.Fatalf("4m into the node's drain: deleted %q; want none deleted", names(d.Delete))
		}
		if d.RecheckAfter != time.Minute {
			t.Fatalf("4m into the node's drain: recheck %v; want a look in 1m", d.RecheckAfter)
		}
		if d := Decide(observeClassed(recorded, asked, false, nil, nm), t0.Add(5*time.Minute)); names(d.Delete) != "web-1" {
			t.Fatalf("past the node's drainTimeout: deleted %q, want web-1", names(d.Delete))
		}
	})

	// A node that comes to match the selector an hour after the maintenance started draining has
	// a drain of its own.
	t.Run("node selected late", func(t *testing.T) {
		nm := deleting("kernel")
		nm.Status.DrainStartTime = ptr.To(metav1.NewTime(t0.Add(-time.Hour)))
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		d := Decide(observeClassed(node, []*corev1.Pod{replicaPod("web-1", time.Time{}, nil)}, false, nil, nm), t0)
		if len(d.Delete) > 0 {
			t.Fatalf("deleted %s on a node selected an hour after the maintenance's drain started", names(d.Delete))
		}
		if !d.Node.Spec.Unschedulable {
			t.Errorf("the node is schedulable; want it cordoned in the same write as its drain start")
		}
		if got := maintenance.ParseDrainStarts(d.Node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])["kernel"].Start; got != t0 {
			t.Errorf("recorded drain start %v (annotations %v); want now, %v", got, d.Node.Annotations, t0)
		}
	})

	// The record of an hour ago is of generation 1; the maintenance is at generation 3: its
	// drain may have been switched off and on while the controller was down. The clock restarts.
	t.Run("changed while nobody looked", func(t *testing.T) {
		nm := deleting("kernel")
		nm.Generation = 3
		nm.Status.DrainStartTime = ptr.To(metav1.NewTime(t0.Add(-time.Hour)))
		node := cordonedNode(map[string]maintenance.DrainStart{"kernel": {Start: t0.Add(-time.Hour), Generation: 1, UID: nm.UID}})
		d := Decide(observeClassed(node, []*corev1.Pod{replicaPod("web-1", t0.Add(-time.Hour), nil)}, false, nil, nm), t0)
		if len(d.Delete) > 0 {
			t.Fatalf("deleted %s counting from a start the record cannot vouch for", names(d.Delete))
		}
		r := maintenance.ParseDrainStarts(d.Node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation])["kernel"]
		if r.Start != t0 {
			t.Errorf("recorded drain start %v; want the node's drain restarted now, %v", r.Start, t0)
		}
		if r.Generation != 3 {
			t.Errorf("recorded generation %d; want 3", r.Generation)
		}
	})

	// Past the node's deadline: a pod asked an hour ago is deleted; one asked 90s ago waits
	// the 1m30s left of its response timeout; one of a later order group, never asked, stays.
	// (Asked over nodedecide.UnansweredAfter ago, the waiting pod brings no earlier look.)
	t.Run("only asked pods, after their response timeout", func(t *testing.T) {
		nm := deleting("kernel")
		node := cordonedNode(map[string]maintenance.DrainStart{"kernel": {Start: t0.Add(-time.Hour), Generation: 1, UID: nm.UID}})
		node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation] = "kernel=Drain"
		pods := []*corev1.Pod{replicaPod("a", t0.Add(-time.Hour), nil), replicaPod("b", time.Time{}, nil), replicaPod("c", t0.Add(-90*time.Second), nil)}
		d := Decide(observeClassed(node, pods, false, map[string]int32{"b": 1}, nm), t0)
		if names(d.Delete) != "a" {
			t.Fatalf("deleted %q; want a only", names(d.Delete))
		}
		if d.RecheckAfter != 90*time.Second {
			t.Fatalf("recheck %v; want a look in 1m30s", d.RecheckAfter)
		}
		if d.NodeChanged {
			t.Fatalf("node changed: %v", d.Node.Annotations)
		}
	})

	// A maintenance that no longer drains the node loses its record; with none left the
	// annotation goes.
	t.Run("record removed", func(t *testing.T) {
		nm := deleting("kernel")
		nm.Spec.Drain = false
		node := cordonedNode(map[string]maintenance.DrainStart{"kernel": {Start: t0.Add(-time.Hour), Generation: 1, UID: nm.UID}})
		d := Decide(observeClassed(node, nil, false, nil, nm), t0)
		if _, ok := d.Node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation]; ok {
			t.Errorf("annotations %v; want the drain start removed", d.Node.Annotations)
		}
		if !d.NodeChanged {
			t.Errorf("node not changed; want the removal written")
		}
	})
}

// TestDestructiveActsFollowTheirOwnMaintenance: a maintenance that ignores the drain label next
// to one that honors it: the label is ignored for the requests (the plan), but a pod labelled
// skip is evicted or deleted only by a maintenance that ignores the label itself.
func TestDestructiveActsFollowTheirOwnMaintenance(t *testing.T) {
	skip := map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip}
	pods := func() []*corev1.Pod {
		return []*corev1.Pod{replicaPod("kept", t0.Add(-time.Hour), skip), replicaPod("web", t0.Add(-time.Hour), nil)}
	}
	tenant := func(policy nodemaintv1alpha1.EvictionPolicy) *nodemaintv1alpha1.NodeMaintenance {
		nm := deleting("tenant")
		nm.Spec.DrainLabelPolicy = nodemaintv1alpha1.DrainLabelPolicyIgnore
		nm.Spec.DrainTimeout, nm.Spec.DrainTimeoutAction = nil, ""
		nm.Spec.EvictionPolicy = policy
		return nm
	}
	for _, tc := range []struct {
		name             string
		nms              []*nodemaintv1alpha1.NodeMaintenance
		deleted, evicted string
	}{
		{name: "admin Honor+Delete next to a tenant's Ignore", deleted: "web",
			nms: []*nodemaintv1alpha1.NodeMaintenance{tenant(nodemaintv1alpha1.EvictionPolicySignalOnly), deleting("admin")}},
		{name: "admin Honor+Evict next to a signal-only tenant's Ignore", evicted: "web",
			nms: func() []*nodemaintv1alpha1.NodeMaintenance {
				admin := deleting("admin")
				admin.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionReport
				return []*nodemaintv1alpha1.NodeMaintenance{tenant(nodemaintv1alpha1.EvictionPolicySignalOnly), admin}
			}()},
		// The maintenance that ignores the label evicts: it asked for it, through the budgets.
		{name: "the tenant's Ignore evicts itself", evicted: "kept,web",
			nms: []*nodemaintv1alpha1.NodeMaintenance{tenant(nodemaintv1alpha1.EvictionPolicyEvict)}},
		// Its deletions are still the admin's only, by the admin's own label policy.
		{name: "the tenant evicts, the admin deletes", deleted: "web", evicted: "kept",
			nms: []*nodemaintv1alpha1.NodeMaintenance{tenant(nodemaintv1alpha1.EvictionPolicyEvict), deleting("admin")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starts := map[string]maintenance.DrainStart{}
			for _, nm := range tc.nms {
				starts[nm.Name] = maintenance.DrainStart{Start: t0.Add(-time.Hour), Generation: nm.Generation, UID: nm.UID}
			}
			obs := observeClassed(cordonedNode(starts), pods(), maintenance.IgnoreDrainLabel(tc.nms), nil, tc.nms...)
			d := Decide(obs, t0)
			if got := names(d.Delete); got != tc.deleted {
				t.Errorf("deleted %q; want %q", got, tc.deleted)
			}
			if got := names(d.Evict); got != tc.evicted {
				t.Errorf("evicted %q; want %q", got, tc.evicted)
			}
			if t.Failed() {
				t.FailNow()
			}
			if tc.evicted == "web" {
				found := false
				for _, b := range d.Report.Blocked {
					found = found || b.Reason == nodemaintv1alpha1.BlockedReasonWaitingForOwner && strings.Contains(b.Message, "honor")
				}
				if !found {
					t.Errorf("blocked %+v; want the kept pod reported waiting for its owner, saying why", d.Report.Blocked)
				}
			}
		})
	}
}
