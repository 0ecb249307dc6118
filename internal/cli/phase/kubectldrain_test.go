package phase

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/target"
)

// kubectlFlagsFrom parses drain's kubectl drain flags from a command line.
func kubectlFlagsFrom(t *testing.T, args ...string) *kubectlDrainFlags {
	t.Helper()
	f := &kubectlDrainFlags{}
	cmd := &cobra.Command{Use: "drain"}
	f.addFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return f
}

// TestKubectlDrainFlagsCheck: kubectl drain's --pod-selector and --grace-period are taken where
// a NodeMaintenance can say them; --grace-period=0 (kubectl's forced deletion), a grace period
// past the API's bound and a selector a LabelSelector cannot hold are refused in one line.
func TestKubectlDrainFlagsCheck(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: nil},
		{args: []string{"--ignore-daemonsets", "--delete-emptydir-data"}},
		{args: []string{"--pod-selector", "app=web,tier!=db", "--grace-period", "30"}},
		{args: []string{"--grace-period=-1"}},
		{args: []string{"--grace-period=1"}},
		{args: []string{"--grace-period=86400"}},
		{args: []string{"--grace-period=0"}, wantErr: "--grace-period=0: the pods would be killed at once"},
		{args: []string{"--grace-period=86401"}, wantErr: "--grace-period=86401: at most 86400 seconds"},
		{args: []string{"--pod-selector", "replicas>1"}, wantErr: `--pod-selector "replicas>1"`},
		{args: []string{"--pod-selector", "app in (web"}, wantErr: `--pod-selector "app in (web"`},
		{args: []string{"--force", "--grace-period=10"}, wantErr: "--force: nodemaint evicts pods that no controller manages"},
		{args: []string{"--disable-eviction"}, wantErr: "--disable-eviction"},
		{args: []string{"--skip-wait-for-delete-timeout", "5"}, wantErr: "--skip-wait-for-delete-timeout"},
	} {
		err := kubectlFlagsFrom(t, tc.args...).check()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: refused: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestKubectlDrainFlagsSetTheSpec: --pod-selector sets spec.podSelector and --grace-period
// spec.evictionGracePeriodSeconds, on creation and when the command runs again; as with kubectl
// drain, each line states its drain: one without them (or a negative --grace-period) unsets
// them, while --reason, nodemaint's own, is kept.
func TestKubectlDrainFlagsSetTheSpec(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).Build()
	tg := &target.Target{}
	if err := tg.Complete([]string{"node-1"}); err != nil {
		t.Fatal(err)
	}
	drain := func(args ...string) *nodemaintv1alpha1.NodeMaintenance {
		t.Helper()
		if _, err := applyMaintenance(ctx, c, tg, true, true, specEdits{kubectl: kubectlFlagsFrom(t, args...)}, cmdutil.DryRunNone); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := c.Get(ctx, client.ObjectKey{Name: tg.Name()}, nm); err != nil {
			t.Fatal(err)
		}
		return nm
	}
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}}
	same := func(what string, nm *nodemaintv1alpha1.NodeMaintenance, sel *metav1.LabelSelector, grace *int64) {
		t.Helper()
		gotSel, _ := metav1.LabelSelectorAsSelector(nm.Spec.PodSelector)
		wantSel, _ := metav1.LabelSelectorAsSelector(sel)
		if (nm.Spec.PodSelector == nil) != (sel == nil) || sel != nil && gotSel.String() != wantSel.String() {
			t.Errorf("%s: podSelector %v, want %v", what, nm.Spec.PodSelector, sel)
		}
		if g := nm.Spec.EvictionGracePeriodSeconds; (g == nil) != (grace == nil) || g != nil && *g != *grace {
			t.Errorf("%s: evictionGracePeriodSeconds %v, want %v", what, g, grace)
		}
	}
	same("created", drain("--pod-selector", "app=web,tier!=db", "--grace-period", "30", "--ignore-daemonsets"), web, ptr.To[int64](30))
	same("again", drain("--pod-selector", "app=web,tier!=db", "--grace-period", "5"), web, ptr.To[int64](5))
	same("negative: the pods' own", drain("--pod-selector", "app=web,tier!=db", "--grace-period=-1"), web, nil)
	same("again, without the flags: every pod, its own grace period", drain("--ignore-daemonsets"), nil, nil)
	same("a grace period alone", drain("--grace-period=7"), nil, ptr.To[int64](7))

	// nodemaint's own --reason is kept when left out, kubectl drain's flags are not.
	if _, err := applyMaintenance(ctx, c, tg, true, true, specEdits{reason: "kernel", kubectl: kubectlFlagsFrom(t, "--pod-selector", "app=web")}, cmdutil.DryRunNone); err != nil {
		t.Fatal(err)
	}
	nm := drain()
	if nm.Spec.Reason != "kernel" {
		t.Errorf("reason %q; want the reason kept (kernel)", nm.Spec.Reason)
	}
	if nm.Spec.PodSelector != nil {
		t.Errorf("podSelector %v; want none", nm.Spec.PodSelector)
	}
}
