package nodemaintenancedecide

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
	"github.com/nodemaint/nodemaint/internal/rollout"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// FuzzDecide: on arbitrary observations, the NodeMaintenance controller's decision leaves its
// Observation as it was, is the same when taken twice, and writes a status within its bounds
// that agrees with itself: every selected node counted, Drained only with nothing left, nothing
// drained without a drain asked for.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 3, 2, 1, 0, 4, 1, 2, 3, 0, 1})
	f.Add([]byte{3, 2, 7, 0, 2, 5, 3, 1, 1, 2, 2, 0, 1, 3})
	f.Add([]byte{2, 1, 1, 1, 1, 2, 0, 0, 2, 1, 1, 1, 3, 3, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &testutil.FuzzBytes{Data: data}
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		o := Observation{Maintenance: fuzzMaintenance(g, now)}
		for i := range int(g.Byte() % 6) {
			node, obs := fuzzNode(g, i, o.Maintenance, now)
			o.Nodes = append(o.Nodes, node)
			// The node controller's report of its decision, as it would make it at now.
			o.Reports = append(o.Reports, nodedecide.Decide(obs, now).Report)
		}
		o.Total = len(o.Nodes) + int(g.Byte()%3)
		o.Selector = maintenance.NewSelectors(time.Minute, clock.RealClock{}).Of(o.Maintenance)
		if o.Maintenance.Spec.Rollout != nil && g.Byte()%2 == 1 {
			o.Unschedulable = []string{"default/unplaced"}
		}
		o.Planning = g.Byte()%2 == 1
		before := fuzzSnapshot(t, o)
		d := Decide(o, nodemaintv1alpha1.EvacuationProtocolPodConditions, now)
		if after := fuzzSnapshot(t, o); after != before {
			t.Fatalf("decide changed its Observation:\n%s\n%s", before, after)
		}
		if again := Decide(o, nodemaintv1alpha1.EvacuationProtocolPodConditions, now); !equality.Semantic.DeepEqual(again.Status, d.Status) || again.RecheckAfter != d.RecheckAfter {
			t.Fatalf("two decisions from one Observation differ:\n%+v\n%+v", d.Status, again.Status)
		}
		checkStatus(t, o, d)
	})
}

func checkStatus(t *testing.T, o Observation, d Decision) {
	t.Helper()
	s := d.Status
	if int(s.SelectedNodes) != len(o.Nodes) || len(s.Nodes) > nodemaintv1alpha1.MaxStatusNodes || s.Phase == "" || d.RecheckAfter < 0 {
		t.Fatalf("selected %d of %d nodes, %d listed, phase %q, recheck %v", s.SelectedNodes, len(o.Nodes), len(s.Nodes), s.Phase, d.RecheckAfter)
	}
	seen := map[string]bool{}
	for _, c := range s.Conditions {
		if seen[c.Type] || len(c.Message) > nodemaintv1alpha1.MaxConditionMessageLength || c.Reason == "" {
			t.Fatalf("condition %+v: twice, too long or without a reason", c)
		}
		seen[c.Type] = true
	}
	for node, n := range s.Nodes {
		for _, b := range n.Blocked {
			if len(b.Message) > nodemaintv1alpha1.MaxBlockedMessageLength {
				t.Fatalf("node %s: blocked message of %d bytes", node, len(b.Message))
			}
		}
	}
	// Control-plane nodes: never two in their turn; without a rollout, two selected refuse it.
	var controlPlanes []string
	for _, n := range o.Nodes {
		if rollout.ControlPlane(n) {
			controlPlanes = append(controlPlanes, n.Name)
		}
	}
	selected := meta.FindStatusCondition(s.Conditions, nodemaintv1alpha1.ConditionNodesSelected)
	refused := selected != nil && selected.Reason == nodemaintv1alpha1.ReasonEtcdQuorumAtRisk
	if want := o.Maintenance.Spec.Rollout == nil && len(controlPlanes) > 1; refused != want {
		t.Fatalf("NodesSelected %+v with control-plane nodes %v, rollout %v", selected, controlPlanes, o.Maintenance.Spec.Rollout != nil)
	}
	if r := s.Rollout; r != nil {
		n := 0
		for _, turn := range r.InTurn {
			if slices.Contains(controlPlanes, turn.Name) {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%d control-plane nodes in their turn: %+v", n, r.InTurn)
		}
		if r.SoakingUntil != nil && len(d.Turns.Admitted) > 0 {
			t.Fatalf("admitted %v while soaking until %v", d.Turns.Admitted, r.SoakingUntil)
		}
		if int(r.NodesBlocked) > int(o.Maintenance.Spec.Rollout.MaxBlockedNodes) {
			t.Fatalf("%d nodes blocked, maxBlockedNodes %d", r.NodesBlocked, o.Maintenance.Spec.Rollout.MaxBlockedNodes)
		}
	}
	drained := meta.IsStatusConditionTrue(s.Conditions, nodemaintv1alpha1.ConditionDrained)
	if ready := meta.FindStatusCondition(s.Conditions, nodemaintv1alpha1.ConditionReady); ready == nil ||
		ready.Status == metav1.ConditionTrue && o.Maintenance.Spec.Drain && !drained && s.Phase != nodemaintv1alpha1.PhaseMaintenanceComplete {
		t.Fatalf("Ready %+v with Drained %t in phase %s", ready, drained, s.Phase)
	}
	switch {
	case !o.Maintenance.Spec.Drain && (drained || s.DrainStartTime != nil || s.VolumesAttached != 0):
		t.Fatalf("no drain asked for, yet Drained %t, drain start %v, %d volumes reported", drained, s.DrainStartTime, s.VolumesAttached)
	case drained && o.Maintenance.Spec.Rollout == nil && (len(o.Nodes) == 0 || s.PodsPendingEvacuation > 0 || s.VolumesAttached > 0):
		t.Fatalf("Drained with %d nodes, %d pods pending, %d volumes attached", len(o.Nodes), s.PodsPendingEvacuation, s.VolumesAttached)
	case o.Maintenance.Spec.Drain && len(o.Nodes) > 0 && !drained && !waitsEverywhere(o.Maintenance, d.Nodes) && d.RecheckAfter == 0:
		t.Fatal("a drain under way is not looked at again")
	}
}

func fuzzMaintenance(g *testutil.FuzzBytes, now time.Time) *nodemaintv1alpha1.NodeMaintenance {
	b := g.Byte()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "nm", UID: "nm-uid", Generation: 2, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor("n0", "n1", "n2", "n3", "n4"),
			Cordon:       b&1 != 0, Drain: b&2 != 0,
		},
	}
	if b&4 != 0 {
		nm.Spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: time.Duration(g.Byte()%4) * 20 * time.Minute}
		nm.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionDelete
	}
	if b&8 != 0 {
		nm.Spec.Rollout = &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intOrPercent(g.Byte()))}
		if r := g.Byte(); r != 0 {
			nm.Spec.Rollout.SoakTime = &nodemaintv1alpha1.Duration{Duration: time.Duration(r&0x0f) * time.Minute}
			nm.Spec.Rollout.MaxBlockedNodes = int32(r >> 6)
		}
		if g.Byte()%2 == 1 {
			nm.Status.Rollout = &nodemaintv1alpha1.RolloutStatus{InTurn: []nodemaintv1alpha1.NodeTurn{{Name: "n0", Since: metav1.NewTime(now.Add(-time.Duration(g.Byte()) * time.Minute))}}}
		}
	}
	if b&16 != 0 {
		nm.Status.DrainStartTime = &metav1.Time{Time: now.Add(-time.Duration(g.Byte()) * time.Minute)}
	}
	return nm
}

func fuzzNode(g *testutil.FuzzBytes, i int, nm *nodemaintv1alpha1.NodeMaintenance, now time.Time) (*corev1.Node, nodedecide.Observation) {
	b := g.Byte()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i)}, Spec: corev1.NodeSpec{Unschedulable: b&1 != 0}}
	if b&4 != 0 {
		node.Labels = map[string]string{nodemaintv1alpha1.ControlPlaneLabel: ""}
	}
	obs := nodedecide.Observation{Node: node}
	if b&2 != 0 {
		obs.Beyond = []*nodemaintv1alpha1.NodeMaintenance{nm} // past the bound on this node
		obs.Admit(nil)
	} else {
		obs.Admit([]*nodemaintv1alpha1.NodeMaintenance{nm})
	}
	rules := drain.NewRules(nil)
	var classified []drain.Classified
	for j := range int(g.Byte() % 5) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("p%d-%d", i, j), UID: types.UID(fmt.Sprintf("u%d-%d", i, j))},
			Spec:       corev1.PodSpec{NodeName: node.Name},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
		pb := g.Byte()
		if pb&1 != 0 {
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}}
		}
		if pb&2 != 0 {
			evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance,
				LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(pb>>4) * time.Minute))})
		}
		if pb&4 != 0 {
			evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionStatus([]string{"True", "False"}[pb>>3&1])})
		}
		if pb&64 != 0 {
			pod.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
		}
		obs.Pods = append(obs.Pods, pod)
		if maintenance.Targeted(pod) {
			classified = append(classified, drain.Classified{Pod: pod, Class: rules.Classify(pod, nil, node.Labels)})
		}
	}
	obs.Plan = drain.NewPlan(classified)
	if obs.Plan.Pending() == 0 {
		obs.VolumesAttached = int(g.Byte() % 2)
	}
	obs.Derive()
	return node, obs
}

func intOrPercent(b byte) intstr.IntOrString {
	if b%2 == 0 {
		return intstr.FromInt32(int32(b%4) + 1)
	}
	return intstr.FromString(fmt.Sprintf("%d%%", int(b%100)+1))
}

// fuzzSnapshot is the Observation as JSON: what decide must leave as it was.
func fuzzSnapshot(t *testing.T, o Observation) string {
	t.Helper()
	raw, err := json.Marshal(struct {
		NM      *nodemaintv1alpha1.NodeMaintenance
		Nodes   []*corev1.Node
		Reports []nodedecide.Report
	}{o.Maintenance, o.Nodes, o.Reports})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
