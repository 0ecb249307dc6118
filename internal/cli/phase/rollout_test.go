package phase

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/intstr"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/target"
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

		{args: []string{"--max-unavailable", "2", "--soak-time", "10m", "--max-blocked-nodes", "1"},
			want: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two, SoakTime: &nodemaintv1alpha1.Duration{Duration: 10 * time.Minute}, MaxBlockedNodes: 1}},
		{args: []string{"--soak-time", "0s"}, current: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two, SoakTime: &nodemaintv1alpha1.Duration{Duration: time.Minute}},
			want: &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: &two, SoakTime: &nodemaintv1alpha1.Duration{}}},
		{args: []string{"--soak-time", "1m"}, wantErr: "--soak-time: set how many nodes roll at once with --max-unavailable"},
		{args: []string{"--max-unavailable", "1", "--soak-time", "25h"}, wantErr: "--soak-time 25h0m0s: want a duration between 0s and 24h"},
		{args: []string{"--max-unavailable", "1", "--max-blocked-nodes", "101"}, wantErr: "--max-blocked-nodes 101: want a number from 0 to 100"},
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
	if s.SoakTime != nil {
		b.WriteString(" soakTime=" + s.SoakTime.Raw())
	}
	if s.MaxBlockedNodes != 0 {
		fmt.Fprintf(&b, " maxBlockedNodes=%d", s.MaxBlockedNodes)
	}
	return b.String()
}

// TestApplyRolloutMaintenance: drain with --max-unavailable creates the rollout; drain again
// without rollout flags keeps it; drain again with one flag changes that field only.
func TestApplyRolloutMaintenance(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).Build()
	tg := &target.Target{Selector: "pool=a"}
	if err := tg.Complete(nil); err != nil {
		t.Fatal(err)
	}
	nm, err := applyMaintenance(ctx, c, tg, true, true, specEdits{roll: rolloutFlagsFrom(t, "--max-unavailable", "2", "--release", "rebooted")}, cmdutil.DryRunNone)
	if err != nil {
		t.Fatal(err)
	}
	if got := specString(nm.Spec.Rollout); got != "maxUnavailable=2 release=Rebooted onNodeFailure=" {
		t.Fatalf("created rollout %s", got)
	}
	if got := verbPast("drain", nm); got != "rolling, 2 nodes at a time, release Rebooted" {
		t.Errorf("the line after creating it says %q", got)
	}
	if _, err := applyMaintenance(ctx, c, tg, true, true, specEdits{roll: rolloutFlagsFrom(t)}, cmdutil.DryRunNone); err != nil {
		t.Fatal(err)
	}
	nm, err = applyMaintenance(ctx, c, tg, true, true, specEdits{roll: rolloutFlagsFrom(t, "--on-node-failure", "continue")}, cmdutil.DryRunNone)
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
	plain := &target.Target{}
	if err := plain.Complete([]string{"node-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := applyMaintenance(ctx, c, plain, true, true, specEdits{roll: rolloutFlagsFrom(t, "--release", "manual")}, cmdutil.DryRunNone); err == nil ||
		!strings.Contains(err.Error(), "--max-unavailable") {
		t.Errorf("--release alone: error %v, want to be told --max-unavailable", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "node-1"}, &nodemaintv1alpha1.NodeMaintenance{}); err == nil {
		t.Errorf("a refused drain created its NodeMaintenance")
	}
}
