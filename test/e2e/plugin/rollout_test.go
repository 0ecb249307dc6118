package plugin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// TestRolloutDrainAndComplete: drain -l --max-unavailable 1 --release manual rolls through two
// nodes one at a time; status shows the node in its turn waiting for complete; complete refuses
// the node still waiting, then completes the turn of the node in it (found from the node's
// annotation), and the next node starts; complete --maintenance ends the last turn; drain run
// again follows the rollout to its end.
func TestRolloutDrainAndComplete(t *testing.T) {
	framework.Namespace(t) // waits for the pods of earlier tests to go
	framework.NewController(t).Start()
	const name, label = "rollout-e2e", "e2e.nodemaint.dev/rollout"
	first, second := "kwok-node-1", "kwok-node-2" // the order of their turns: by name
	for _, n := range []string{first, second} {
		if out, err := framework.Kubectl(t, "label", "node", n, label+"=pool"); err != nil {
			t.Fatalf("labelling %s: %v\n%s", n, err, out)
		}
		t.Cleanup(func() {
			// The controller leaves nodemaint.dev/complete, which the admin wrote, in place.
			_, _ = framework.Kubectl(t, "annotate", "node", n, nodemaintv1alpha1.CompleteAnnotation+"-")
			_, _ = framework.Kubectl(t, "label", "node", n, label+"-")
		})
	}
	drain := []string{"drain", "-l", label + "=pool", "--name", name, "--max-unavailable", "1", "--release", "manual", "--response-timeout", "2s"}

	out, code := plugin(t, append(drain, "--wait=false")...)
	if code != 0 {
		t.Errorf("drain --max-unavailable: exit %d, want 0", code)
	}
	if !strings.Contains(out, "nodemaintenance.nodemaint.dev/"+name+": rolling, 1 node at a time, release Manual") {
		t.Errorf("drain --max-unavailable: output %q, want the rollout said: 1 node at a time, release Manual", out)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() { _, _ = plugin(t, "complete", "--name", name, "--delete"); noMaintenances(t) })
	inTurn(t, first, second)
	out, code = plugin(t, "status", name)
	if code != 0 {
		t.Errorf("status of the rollout: exit %d, want 0", code)
	}
	if !strings.Contains(out, "0 done, 1 in turn, 1 waiting") {
		t.Errorf("status of the rollout: output %q, want 0 done, 1 in turn, 1 waiting", out)
	}
	if !strings.Contains(out, "drained; waiting for `kubectl maintenance complete "+first+"`") {
		t.Errorf("status of the rollout: output %q, want %s drained, waiting for complete", out, first)
	}

	out, code = plugin(t, "complete", second)
	if code != 1 {
		t.Errorf("complete of a node waiting for its turn: exit %d, want 1", code)
	}
	if !strings.Contains(out, "node "+second+" waits for its turn in "+name) {
		t.Errorf("complete of a node waiting for its turn: output %q, want why", out)
	}
	out, code = plugin(t, "complete", first)
	if code != 0 {
		t.Errorf("complete %s: exit %d, want 0", first, code)
	}
	if !strings.Contains(out, "node/"+first+": turn in nodemaintenance.nodemaint.dev/"+name+" completed") {
		t.Errorf("complete %s: output %q, want its turn completed", first, out)
	}
	inTurn(t, second, first)

	if _, code := plugin(t, "complete", second, "--maintenance", name); code != 0 {
		t.Errorf("complete --maintenance: exit %d", code)
	}
	// drain again: the same maintenance, followed to the end of the rollout.
	out, code = plugin(t, append(drain, "--timeout", "60s")...)
	if code != 0 {
		t.Errorf("drain followed to the end of the rollout: exit %d, want 0", code)
	}
	if !strings.Contains(out, name+": drained, every node in its turn, and released") {
		t.Errorf("drain followed to the end of the rollout: output %q, want drained, every node in its turn, and released", out)
	}
	// Released: uncordoned, the conditions gone; the annotation records the turn that ended.
	for _, n := range []string{first, second} {
		var node corev1.Node
		if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: n}, &node); err != nil {
			t.Fatal(err)
		}
		if node.Spec.Unschedulable {
			t.Errorf("node %s still cordoned after the rollout", n)
		}
		for _, c := range node.Status.Conditions {
			if c.Reason == nodemaintv1alpha1.NodeConditionReasonNodeMaintenance || c.Type == nodemaintv1alpha1.NodeConditionUnderMaintenance {
				t.Errorf("node %s released with the condition %s=%s (%s)", n, c.Type, c.Status, c.Reason)
			}
		}
		if got := node.Annotations[nodemaintv1alpha1.MaintenancesAnnotation]; got != name+"=Released" {
			t.Errorf("node %s: annotation %s %q, want %s=Released", n, nodemaintv1alpha1.MaintenancesAnnotation, got, name)
		}
	}
}

// inTurn waits until node is cordoned in its turn and other is not (kwok nodes drain at once,
// and release Manual keeps the node in its turn until it is completed). Only one of them may be
// cordoned at any poll.
func inTurn(t *testing.T, node, other string) {
	t.Helper()
	testutil.Eventually(t, timeout, node+" in its turn, "+other+" not", func(ctx context.Context) (bool, string, error) {
		var a, b corev1.Node
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: node}, &a); err != nil {
			return false, "", err
		}
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: other}, &b); err != nil {
			return false, "", err
		}
		if a.Spec.Unschedulable && b.Spec.Unschedulable {
			t.Errorf("%s and %s cordoned at once with --max-unavailable 1", node, other)
		}
		drained := false
		for _, c := range a.Status.Conditions {
			if c.Type == corev1.NodeDrained && c.Status == corev1.ConditionTrue {
				drained = true
			}
		}
		return a.Spec.Unschedulable && !b.Spec.Unschedulable && drained,
			fmt.Sprintf("%s unschedulable %v drained %v, %s unschedulable %v", node, a.Spec.Unschedulable, drained, other, b.Spec.Unschedulable), nil
	})
}
