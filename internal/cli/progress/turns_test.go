package progress

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
)

// rollingMaintenance is a rollout of 8 nodes, 2 at a time, release Rebooted: node-a in its turn
// held by a budget, node-b drained and waiting for its reboot, 3 done, 3 waiting, halted.
func rollingMaintenance() *nodemaintv1alpha1.NodeMaintenance {
	two := intstr.FromInt32(2)
	since := metav1.NewTime(time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC))
	return &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-a", Generation: 1},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true,
			Rollout: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two, Release: nodemaintv1alpha1.ReleaseRebooted}},
		Status: nodemaintv1alpha1.NodeMaintenanceStatus{
			ObservedGeneration: 1, Phase: nodemaintv1alpha1.PhaseDrain, SelectedNodes: 8, NodesPending: 1, NodesDrained: 1,
			PodsPendingEvacuation: 1, PodsSkipped: 1,
			Nodes: map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus{
				"node-a": {PodsPendingEvacuation: 1, PodsSkipped: 1, Blocked: []nodemaintv1alpha1.BlockedPods{
					{Reason: nodemaintv1alpha1.BlockedReasonSkipped, Pods: []string{"kube-system/agent"}, Count: 1},
					{Reason: nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, Message: "The disruption budget db needs 1 healthy pods", Pods: []string{"prod/db-0"}, Count: 1},
				}},
			},
			Rollout: &nodemaintv1alpha1.RolloutStatus{NodesDone: 3, NodesFailed: 1, NodesInTurn: 2, NodesWaiting: 3, InTurn: []nodemaintv1alpha1.NodeTurn{
				{Name: "node-a", Since: since, BootID: "boot-1"},
				{Name: "node-b", Since: metav1.NewTime(since.Add(5 * time.Minute)), BootID: "boot-2"},
			}},
			Conditions: []metav1.Condition{{Type: nodemaintv1alpha1.ConditionRolloutHalted, Status: metav1.ConditionTrue,
				Reason: nodemaintv1alpha1.ReasonReplacementsUnschedulable, Message: "1 pods cannot be scheduled (prod/db-0x): no new node starts until they are"}},
		},
	}
}

// TestRolloutViews: the summary counts nodes done, in turn and waiting; the table shows each
// node in its turn, since when, and what holds it, the budget or the reboot its release waits
// for; the halt is named; a pipe gets the same without ages.
func TestRolloutViews(t *testing.T) {
	nm := rollingMaintenance()
	if got, want := Summary(nm), "pool-a: phase Drain, 8 nodes, 2 nodes at a time, release Rebooted: 3 done (1 failed), 2 in turn, 3 waiting; 1 pods pending, 0 evacuating by their owners, 1 skipped and left running"; got != want {
		t.Errorf("summary:\n got %q\nwant %q", got, want)
	}
	var table bytes.Buffer
	writeTurnTable(&table, nm, time.Date(2026, 11, 24, 20, 7, 0, 0, time.UTC))
	want := `halted (ReplacementsUnschedulable): 1 pods cannot be scheduled (prod/db-0x): no new node starts until they are
NODE    IN TURN  PENDING  EVACUATING  SKIPPED  BLOCKED BY
node-a  7m       1        0           1        PodDisruptionBudget prod/db-0; 1 more reasons
node-b  2m       0        0           0        drained; waiting for its reboot (a new boot ID, then Ready)
`
	if table.String() != want {
		t.Errorf("turn table:\n%s\nwant:\n%s", table.String(), want)
	}
	var lines bytes.Buffer
	lineDisplay(&lines)(nm)
	for _, want := range []string{
		"\n  halted (ReplacementsUnschedulable): 1 pods cannot be scheduled",
		"\n  node-b: drained; waiting for its reboot",
		"\n  node-a: PodDisruptionBudget (1) prod/db-0: The disruption budget db needs 1 healthy pods",
	} {
		if !strings.Contains(lines.String(), want) {
			t.Errorf("line display lacks %q:\n%s", want, lines.String())
		}
	}
	if strings.Contains(lines.String(), "7m") {
		t.Errorf("line display shows ages, so it prints again as time passes:\n%s", lines.String())
	}

	nm.Spec.Rollout.Release = nodemaintv1alpha1.ReleaseManual
	cell, held := turnCell(nm, nm.Status.Rollout.InTurn[1])
	if held {
		t.Errorf("manual release: %q held; want not held", cell)
	}
	if want := "drained; waiting for `kubectl maintenance complete node-b`"; cell != want {
		t.Errorf("manual release: %q; want %q", cell, want)
	}
	if got := RolloutCell(nm); got != "3/8 done, 2 in turn, halted (ReplacementsUnschedulable)" {
		t.Errorf("list cell %q", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := waitError(ctx, nm, ctx.Err())
	if code := clioptions.ExitCode(err); code != clioptions.ExitTimedOut {
		t.Fatalf("time-out: %v (exit %d); want exit %d", err, code, clioptions.ExitTimedOut)
	}
	if want := "timed out waiting for the rollout of NodeMaintenance pool-a: 3 of 8 nodes done, 2 in turn (node-a, node-b), 3 waiting; halted (ReplacementsUnschedulable)"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("time-out: %v; want it to start %q", err, want)
	}
}

// TestRolloutViewsSoakBlocked: the plan names the soak and the blocked nodes the rollout goes on
// past; the summary counts the blocked nodes, the table marks them; a soak is named as a halt is.
func TestRolloutViewsSoakBlocked(t *testing.T) {
	nm := rollingMaintenance()
	nm.Spec.Rollout.SoakTime = &nodemaintv1alpha1.Duration{Duration: 5 * time.Minute}
	nm.Spec.Rollout.MaxBlockedNodes = 2
	nm.Status.Rollout.NodesBlocked = 1
	nm.Status.Rollout.InTurn[0].Blocked = true
	nm.Status.Conditions = []metav1.Condition{{Type: nodemaintv1alpha1.ConditionRolloutHalted, Status: metav1.ConditionFalse,
		Reason: nodemaintv1alpha1.ReasonSoaking, Message: "a node's turn ended at 2026-11-24T20:05:00Z: no new node starts until 2026-11-24T20:10:00Z (soakTime 5m0s)"}}
	if got, want := Summary(nm), "pool-a: phase Drain, 8 nodes, 2 nodes at a time, release Rebooted, soaking 5m0s after each node, going on past 2 nodes whose drain is blocked: "+
		"3 done (1 failed), 2 in turn (1 blocked), 3 waiting"; !strings.HasPrefix(got, want) {
		t.Errorf("summary:\n got %q\nwant %q...", got, want)
	}
	var table bytes.Buffer
	writeTurnTable(&table, nm, time.Date(2026, 11, 24, 20, 7, 0, 0, time.UTC))
	for _, want := range []string{"soaking: a node's turn ended at 2026-11-24T20:05:00Z: no new node starts until 2026-11-24T20:10:00Z",
		"node-a  7m       1        0           1        blocked, left cordoned (maxBlockedNodes): PodDisruptionBudget prod/db-0"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("turn table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestFollowEndsWhenTheRolloutIsComplete: drain follows a rollout until every node was drained
// in its turn and released (the controller then reports Drained).
func TestFollowEndsWhenTheRolloutIsComplete(t *testing.T) {
	nm := rollingMaintenance()
	nm.Status.Rollout = &nodemaintv1alpha1.RolloutStatus{NodesDone: 8}
	nm.Status.Nodes, nm.Status.PodsPendingEvacuation = nil, 0
	nm.Status.Phase = nodemaintv1alpha1.PhaseMaintenanceComplete
	nm.Status.Conditions = []metav1.Condition{
		{Type: nodemaintv1alpha1.ConditionDrained, Status: metav1.ConditionTrue, Reason: nodemaintv1alpha1.ReasonDrained, ObservedGeneration: 1},
		{Type: nodemaintv1alpha1.ConditionRolloutHalted, Status: metav1.ConditionFalse, Reason: nodemaintv1alpha1.ReasonRolloutComplete, ObservedGeneration: 1},
	}
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(nm).
		WithIndex(&nodemaintv1alpha1.NodeMaintenance{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		Build()
	var out bytes.Buffer
	if err := Follow(context.Background(), &out, listOnly{c}, "pool-a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if want := "8 done, 0 in turn, 0 waiting"; !strings.Contains(out.String(), want) {
		t.Errorf("output:\n%s\nwant it to say %q", out.String(), want)
	}
	if want := "pool-a: drained, every node in its turn, and released\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("output:\n%s\nwant it to end %q", out.String(), want)
	}
}
