package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// rolloutFlagsFrom parses drain's rollout flags from a command line.
func rolloutFlagsFrom(t *testing.T, args ...string) *rolloutFlags {
	t.Helper()
	f := &rolloutFlags{}
	cmd := &cobra.Command{Use: "drain"}
	f.addFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return f
}

// TestRolloutFlags: the flags give spec.rollout as the CRD admits it and the controller reads
// it; what it would refuse, or not understand, is refused with the flag's name.
func TestRolloutFlags(t *testing.T) {
	two, quarter := intstr.FromInt32(2), intstr.FromString("25%")
	for _, tc := range []struct {
		args    []string
		current *nodemaintv1alpha1.RolloutSpec
		want    *nodemaintv1alpha1.RolloutSpec
		wantErr string
	}{
		{args: nil, want: nil},
		{args: []string{"--max-unavailable", "2", "--release", "rebooted"},
			want: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two, Release: nodemaintv1alpha1.ReleaseRebooted}},
		{args: []string{"--max-unavailable", "25%", "--release", "Manual", "--on-node-failure", "continue"},
			want: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &quarter, Release: nodemaintv1alpha1.ReleaseManual, OnNodeFailure: nodemaintv1alpha1.NodeFailureContinue}},
		{args: []string{"--max-unavailable", "1", "--window-schedule", "0 22 * * 1-5", "--window-duration", "4h", "--window-time-zone", "Europe/Berlin"},
			want: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptrTo(intstr.FromInt32(1)), Window: &nodemaintv1alpha1.MaintenanceWindow{
				Schedule: "0 22 * * 1-5", Duration: nodemaintv1alpha1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}}},
		// A rollout that exists keeps what the flags do not give.
		{args: []string{"--release", "drained"}, current: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two, Release: nodemaintv1alpha1.ReleaseManual},
			want: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two, Release: nodemaintv1alpha1.ReleaseDrained}},
		{args: []string{"--window-time-zone", "Asia/Tokyo"}, current: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two,
			Window: &nodemaintv1alpha1.MaintenanceWindow{Schedule: "0 1 * * *", Duration: nodemaintv1alpha1.Duration{Duration: time.Hour}}},
			want: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two,
				Window: &nodemaintv1alpha1.MaintenanceWindow{Schedule: "0 1 * * *", Duration: nodemaintv1alpha1.Duration{Duration: time.Hour}, TimeZone: "Asia/Tokyo"}}},

		{args: []string{"--release", "rebooted"}, wantErr: "--release: set how many nodes roll at once with --max-unavailable"},
		{args: []string{"--max-unavailable", "0"}, wantErr: `--max-unavailable "0": want a number of nodes of at least 1, or a percentage from 1% to 100%`},
		{args: []string{"--max-unavailable", "150%"}, wantErr: "percentage from 1% to 100%"},
		{args: []string{"--max-unavailable", "two"}, wantErr: "at least 1"},
		{args: []string{"--max-unavailable", "1", "--release", "reboot"}, wantErr: `--release "reboot": want drained, rebooted or manual`},
		{args: []string{"--max-unavailable", "1", "--on-node-failure", "skip"}, wantErr: `--on-node-failure "skip": want pause or continue`},
		{args: []string{"--max-unavailable", "1", "--window-schedule", "0 22 * * *"}, wantErr: "needs --window-duration"},
		{args: []string{"--max-unavailable", "1", "--window-duration", "1h"}, wantErr: "needs --window-schedule"},
		{args: []string{"--max-unavailable", "1", "--window-schedule", "0 22 * *", "--window-duration", "1h"}, wantErr: "five fields"},
		{args: []string{"--max-unavailable", "1", "--window-schedule", "0 25 * * *", "--window-duration", "1h"}, wantErr: "spec.rollout.window.schedule"},
		{args: []string{"--max-unavailable", "1", "--window-schedule", "0 22 * * *", "--window-duration", "30s"}, wantErr: "between 1m and 168h"},
		{args: []string{"--max-unavailable", "1", "--window-schedule", "0 22 * * *", "--window-duration", "1h", "--window-time-zone", "Europe/Berln"},
			wantErr: `"Europe/Berln" is not a time zone`},
	} {
		got, err := rolloutFlagsFrom(t, tc.args...).apply(tc.current)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if !specEqual(got, tc.want) {
			t.Errorf("%v: rollout %s, want %s", tc.args, specString(got), specString(tc.want))
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func specEqual(a, b *nodemaintv1alpha1.RolloutSpec) bool { return specString(a) == specString(b) }

func specString(s *nodemaintv1alpha1.RolloutSpec) string {
	if s == nil {
		return "<none>"
	}
	var b strings.Builder
	if s.MaxUnavailable != nil {
		b.WriteString("maxUnavailable=" + s.MaxUnavailable.String())
	}
	b.WriteString(" release=" + string(s.Release) + " onNodeFailure=" + string(s.OnNodeFailure))
	if s.Window != nil {
		b.WriteString(" window=" + s.Window.Schedule + "/" + s.Window.Duration.Raw() + "/" + s.Window.TimeZone)
	}
	return b.String()
}

// TestApplyRolloutMaintenance: drain with --max-unavailable creates the rollout; drain again
// without rollout flags keeps it; drain again with one flag changes that field only.
func TestApplyRolloutMaintenance(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	tg := &target{selector: "pool=a"}
	if err := tg.complete(nil); err != nil {
		t.Fatal(err)
	}
	nm, err := applyMaintenance(ctx, c, tg, true, true, "", 0, rolloutFlagsFrom(t, "--max-unavailable", "2", "--release", "rebooted"), cmdutil.DryRunNone)
	if err != nil {
		t.Fatal(err)
	}
	if got := specString(nm.Spec.Rollout); got != "maxUnavailable=2 release=Rebooted onNodeFailure=" {
		t.Fatalf("created rollout %s", got)
	}
	if got := verbPast("drain", nm); got != "rolling, 2 nodes at a time, release Rebooted" {
		t.Errorf("the line after creating it says %q", got)
	}
	if _, err := applyMaintenance(ctx, c, tg, true, true, "", 0, rolloutFlagsFrom(t), cmdutil.DryRunNone); err != nil {
		t.Fatal(err)
	}
	nm, err = applyMaintenance(ctx, c, tg, true, true, "", 0, rolloutFlagsFrom(t, "--on-node-failure", "continue"), cmdutil.DryRunNone)
	if err != nil {
		t.Fatal(err)
	}
	stored := &nodemaintv1alpha1.NodeMaintenance{}
	if err := c.Get(ctx, client.ObjectKey{Name: nm.Name}, stored); err != nil {
		t.Fatal(err)
	}
	if got := specString(stored.Spec.Rollout); got != "maxUnavailable=2 release=Rebooted onNodeFailure=Continue" {
		t.Errorf("after drain again, and --on-node-failure: rollout %s", got)
	}

	// Without --max-unavailable, a maintenance that does not roll does not start to.
	plain := &target{}
	if err := plain.complete([]string{"node-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := applyMaintenance(ctx, c, plain, true, true, "", 0, rolloutFlagsFrom(t, "--release", "manual"), cmdutil.DryRunNone); err == nil ||
		!strings.Contains(err.Error(), "--max-unavailable") {
		t.Errorf("--release alone: error %v, want to be told --max-unavailable", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "node-1"}, &nodemaintv1alpha1.NodeMaintenance{}); err == nil {
		t.Errorf("a refused drain created its NodeMaintenance")
	}
}

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
	if got, want := summary(nm), "pool-a: phase Drain, 8 nodes, 2 nodes at a time, release Rebooted: 3 done (1 failed), 2 in turn, 3 waiting; 1 pods pending, 0 evacuating by their owners, 1 skipped and left running"; got != want {
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
	if cell, held := turnCell(nm, nm.Status.Rollout.InTurn[1]); held || cell != "drained; waiting for `kubectl maintenance complete node-b`" {
		t.Errorf("manual release: %q (held %v)", cell, held)
	}
	if got := rolloutCell(nm); got != "3/8 done, 2 in turn, halted (ReplacementsUnschedulable)" {
		t.Errorf("list cell %q", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := waitError(ctx, nm, ctx.Err())
	if ExitCode(err) != ExitTimedOut || !strings.HasPrefix(err.Error(),
		"timed out waiting for the rollout of NodeMaintenance pool-a: 3 of 8 nodes done, 2 in turn (node-a, node-b), 3 waiting; halted (ReplacementsUnschedulable)") {
		t.Errorf("time-out: %v (exit %d)", err, ExitCode(err))
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
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nm).
		WithIndex(&nodemaintv1alpha1.NodeMaintenance{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		Build()
	var out bytes.Buffer
	o := &options{config: genericclioptions.NewConfigFlags(false), streams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}}
	if err := follow(context.Background(), o, listOnly{c}, "pool-a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "8 done, 0 in turn, 0 waiting") || !strings.HasSuffix(out.String(), "pool-a: drained, every node in its turn, and released\n") {
		t.Errorf("output:\n%s", out.String())
	}
}
