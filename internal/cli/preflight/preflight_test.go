package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/target"
	"github.com/nodemaint/nodemaint/internal/drainpreflight"
)

// TestPreflightReadAndPrint: what readCluster lists reaches the preflight (a budget that allows
// nothing over a StatefulSet's pod, a bare pod), and the table and JSON say it.
func TestPreflightReadAndPrint(t *testing.T) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	nodeOf := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"}}, Status: corev1.NodeStatus{Allocatable: alloc}}
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(
		nodeOf("n1"), nodeOf("n2"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-0", UID: "db-0", Labels: map[string]string{"app": "db"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "db"}}}, Status: running},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "lonely", UID: "lonely"},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app"}}}, Status: running},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1}},
	).Build()
	var warnings bytes.Buffer
	in, err := Read(context.Background(), c, &warnings)
	if err != nil {
		t.Fatal(err)
	}
	tg := &target.Target{Selector: "pool=a"}
	if in.Targets, err = tg.Resolve(in.Nodes); err != nil || strings.Join(in.Targets, ",") != "n1,n2" {
		t.Fatalf("targets %v, %v", in.Targets, err)
	}
	in.MaxUnavailable = 1
	r := drainpreflight.Run(in)
	if !r.Blocks() {
		t.Fatalf("not blocked: %+v", r)
	}

	var out bytes.Buffer
	if err := printPreflight(&out, &r, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Assuming 1 of the 2 nodes is out at a time",
		"n1: the drain would be BLOCKED (2 pods targeted: 2 moved, 0 skipped)",
		"SEVERITY  REASON",
		"Deadlock forecast: 2 findings (1 BudgetBlocked, 1 CannotSurge)",
		"Blocks    BudgetBlocked  shop/db-0",
		"PodDisruptionBudget shop/db: allows no disruption now (1 healthy, 1 desired)",
		"Blocks    CannotSurge    shop/db-0    StatefulSet shop/db: its only live pod moves and nothing surges it",
		"Loses     BarePod        shop/lonely",
		"n2: nothing to report: the drain would go through (0 pods targeted: 0 moved, 0 skipped)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table without %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := printPreflight(&out, &r, jsonOutput()); err != nil {
		t.Fatal(err)
	}
	var back drainpreflight.Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Nodes) != 2 || back.Nodes[0].Verdict != drainpreflight.Blocks ||
		back.Nodes[0].Findings[0].Object != "PodDisruptionBudget shop/db" {
		t.Errorf("JSON %v:\n%s", err, out.String())
	}
}

// TestPreflightPodSelector: with --pod-selector the pods it does not select stay, reported
// skipped, and their budget blocks nothing.
func TestPreflightPodSelector(t *testing.T) {
	running := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	pod := func(name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name), Labels: map[string]string{"app": app},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: app, UID: types.UID(app), Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: app}}}, Status: running}
	}
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		pod("db-0", "db"), pod("web-0", "web"),
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1}},
	).Build()
	how, err := drainOf("Honor", "app!=db")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tg := &target.Target{}
	if err := tg.Complete([]string{"n1"}); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), genericiooptions.IOStreams{Out: &out, ErrOut: &out}, c, tg, nil, how, nil); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	for _, want := range []string{"(2 pods targeted: 1 moved, 1 skipped)", "Skipped", "shop/db-0", "not selected by spec.podSelector"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report without %q:\n%s", want, out.String())
		}
	}
}

// TestPreflightBadFlags: bad flags are refused before the cluster is read.
func TestPreflightBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"preflight"}, "name nodes, or select them with -l"},
		{[]string{"preflight", "n1", "--max-unavailable", "two"}, `--max-unavailable "two"`},
		{[]string{"preflight", "n1", "--max-unavailable", "-1"}, `--max-unavailable "-1"`},
		{[]string{"preflight", "n1", "--max-unavailable", "-5%"}, `--max-unavailable "-5%"`},
		{[]string{"preflight", "n1", "-o", "wide"}, `output format "wide"`},
		{[]string{"preflight", "n1", "--drain-label-policy", "Maybe"}, `--drain-label-policy "Maybe"`},
		{[]string{"preflight", "n1", "--pod-selector", "replicas>1"}, `--pod-selector "replicas>1"`},
		{[]string{"preflight", "n1", "--pod-selector", "app in (web"}, `--pod-selector "app in (web"`},
	} {
		var out bytes.Buffer
		o := clioptions.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
		root := &cobra.Command{Use: "kubectl-maintenance", SilenceUsage: true, SilenceErrors: true}
		o.Config.AddFlags(root.PersistentFlags())
		root.AddCommand(NewCommand(o))
		root.SetArgs(append(tc.args, "--kubeconfig", "/nonexistent"))
		err := root.Execute()
		if err == nil {
			t.Errorf("%v: no error, want %q", tc.args, tc.want)
			continue
		}
		if code := clioptions.ExitCode(err); code != clioptions.ExitError {
			t.Errorf("%v: exit %d, want %d", tc.args, code, clioptions.ExitError)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// jsonOutput is -o json.
func jsonOutput() *genericclioptions.PrintFlags {
	f := clioptions.NewDataPrintFlags()
	*f.OutputFormat = "json"
	return f
}
