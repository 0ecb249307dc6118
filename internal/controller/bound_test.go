package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// boundName is the i-th maintenance of TestMaintenancesPastTheBound: long names (230
// characters; an Event about an object is named after it, with 17 characters more, within 253),
// in the order they are created.
func boundName(i int) string {
	name := fmt.Sprintf("bound-%03d-", i)
	return name + strings.Repeat("x", 230-len(name))
}

// TestMaintenancesPastTheBound: 100 maintenances drain one node. The node is cordoned and drained
// by the 64 oldest (maintenance.MaxMaintenancesPerNode), the only ones its annotations name; the
// 36 others say they wait for a place (NodesOverMaintenanceLimit, a Warning Event). When one
// acting maintenance goes, the oldest waiting takes its place.
func TestMaintenancesPastTheBound(t *testing.T) {
	const total = 100
	bound := maintenance.MaxMaintenancesPerNode
	createNode(t, "bound-n1", nil, false)
	createPod(t, "bound-app", "bound-n1")
	for i := range total {
		// One after the other: their creation times, then names, give their order.
		createNM(t, boundName(i), true, true, "bounded", "bound-n1")
	}
	t.Cleanup(func() {
		for i := range total {
			if i != 10 {
				deleteNMAndWait(t, boundName(i))
			}
		}
	})

	acting := func(ctx context.Context) ([]maintenance.NodeEntry, map[string]maintenance.DrainStart, *corev1.Node, error) {
		node := &corev1.Node{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: "bound-n1"}, node); err != nil {
			return nil, nil, nil, err
		}
		return maintenance.NodeEntries(node),
			maintenance.ParseDrainStarts(node.Annotations[nodemaintv1alpha1.DrainStartedAnnotation]), node, nil
	}
	eventually(t, "the node cordoned and drained by the 64 oldest, named alone", func(ctx context.Context) (bool, string, error) {
		entries, starts, node, err := acting(ctx)
		if err != nil {
			return false, "", err
		}
		ok := node.Spec.Unschedulable && len(entries) == bound && len(starts) == bound
		for i, e := range entries {
			ok = ok && e.Name == boundName(i) && e.Phase == nodemaintv1alpha1.PhaseDrain
		}
		size := 0
		for k, v := range node.Annotations {
			size += len(k) + len(v)
		}
		return ok, fmt.Sprintf("unschedulable %v, %d named, %d drain starts, annotations %d bytes", node.Spec.Unschedulable, len(entries), len(starts), size), nil
	})
	expectRequest(t, "bound-app", "True/NodeMaintenance/bounded")

	if _, _, node, err := acting(context.Background()); err == nil {
		size := 0
		for k, v := range node.Annotations {
			size += len(k) + len(v)
		}
		t.Logf("the node's annotations take %d bytes", size)
	}
	getNM := func(ctx context.Context, name string) (*nodemaintv1alpha1.NodeMaintenance, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		return nm, k8s.Get(ctx, types.NamespacedName{Name: name}, nm)
	}
	eventually(t, "the 36 others wait for a place, and say so; the 64 do not", func(ctx context.Context) (bool, string, error) {
		for i := range total {
			nm, err := getNM(ctx, boundName(i))
			if err != nil {
				return false, "", err
			}
			c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit)
			if nm.Status.ObservedGeneration != nm.Generation {
				return false, fmt.Sprintf("%s: status of generation %d", nm.Name[:9], nm.Status.ObservedGeneration), nil
			}
			if i < bound && c != nil {
				return false, fmt.Sprintf("%s acts, and says %+v", nm.Name[:9], c), nil
			}
			if i >= bound && (c == nil || c.Reason != nodemaintv1alpha1.ReasonTooManyMaintenances ||
				!strings.HasPrefix(c.Message, "waiting for a place on 1 of the 1 selected nodes (bound-n1): at most 64 NodeMaintenances act on a node at once")) {
				return false, fmt.Sprintf("%s waits, and says %+v", nm.Name[:9], c), nil
			}
			if d := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained); i >= bound && (d == nil || d.Reason != nodemaintv1alpha1.ReasonPodsPending) {
				return false, fmt.Sprintf("%s waits, Drained %+v", nm.Name[:9], d), nil
			}
		}
		return true, "", nil
	})
	w := expectWarning(t, "NodeMaintenance", boundName(total-1), nodemaintv1alpha1.ReasonTooManyMaintenances)
	t.Logf("Warning %s: %s", w.Reason, w.Note)
	nm, err := getNM(context.Background(), boundName(bound))
	if err != nil {
		t.Fatal(err)
	}
	if b := nm.Status.Nodes["bound-n1"].Blocked; len(b) != 1 {
		t.Errorf("the first waiting reports bound-n1 blocked by %+v; want one reason", b)
	} else {
		if b[0].Reason != nodemaintv1alpha1.ReasonTooManyMaintenances {
			t.Errorf("the first waiting reports bound-n1 blocked by %s; want %s", b[0].Reason, nodemaintv1alpha1.ReasonTooManyMaintenances)
		}
		if b[0].Count != 1 {
			t.Errorf("the first waiting reports bound-n1 blocked with count %d; want 1", b[0].Count)
		}
	}

	// One acting maintenance goes: the oldest waiting takes its place, and stops waiting.
	deleteNMAndWait(t, boundName(10))
	eventually(t, boundName(bound)[:9]+" takes the place of "+boundName(10)[:9], func(ctx context.Context) (bool, string, error) {
		entries, starts, node, err := acting(ctx)
		if err != nil {
			return false, "", err
		}
		named := map[string]bool{}
		for _, e := range entries {
			named[e.Name] = true
		}
		_, took := starts[boundName(bound)]
		nm, err := getNM(ctx, boundName(bound))
		if err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit)
		return node.Spec.Unschedulable && len(entries) == bound && named[boundName(bound)] && !named[boundName(10)] && !named[boundName(bound+1)] && took && c == nil,
			fmt.Sprintf("%d named, the first waiting named %v (drain start %v), the gone one %v; its condition %+v", len(entries), named[boundName(bound)], took, named[boundName(10)], c), nil
	})
}
