package status

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
)

func maintenance(name string, created time.Time, sel corev1.NodeSelectorTerm) *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{"team": name}},
		Spec:       nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Reason: "kernel", NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{sel}}},
		Status:     nodemaintv1alpha1.NodeMaintenanceStatus{Phase: nodemaintv1alpha1.PhaseCordon, SelectedNodes: 1},
	}
}

var (
	poolA  = corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}
	byName = func(n string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n}}}}
	}
)

// TestStatusOfNode: `status NODE` shows every maintenance that covers the node, whatever it is
// named, and the one of that name; a name of neither is an error.
func TestStatusOfNode(t *testing.T) {
	now := time.Now()
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"pool": "b"}}},
		maintenance("pool-a", now, poolA), maintenance("n1", now, byName("n1")), maintenance("other", now, byName("n2")),
	).Build()
	for arg, want := range map[string]string{"n1": "n1,pool-a", "n2": "other", "pool-a": "pool-a"} {
		items, err := getMaintenances(context.Background(), c, []string{arg})
		var names []string
		for _, nm := range items {
			names = append(names, nm.Name)
		}
		if err != nil || strings.Join(names, ",") != want {
			t.Errorf("status %s: %v, %v; want %s", arg, names, err, want)
		}
	}
	if _, err := getMaintenances(context.Background(), c, []string{"typo"}); err == nil || !strings.Contains(err.Error(), "no NodeMaintenance named typo, and no node") {
		t.Errorf("status typo: %v", err)
	}
}

// TestList: list prints kubectl get's table (AGE; -o wide's columns; --no-headers;
// --show-labels), selects with -l, and prints objects for the other -o.
func TestList(t *testing.T) {
	now := time.Now()
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(
		maintenance("b", now.Add(-2*time.Hour), poolA), maintenance("a", now.Add(-3*time.Minute), byName("n1")),
	).Build()
	for _, tc := range []struct {
		args     []string
		selector string
		want     []string
		not      []string
	}{
		{nil, "", []string{"NAME   PHASE    CORDON   DRAIN   NODES   PENDING   DRAINED   AGE\na      Cordon   true     false   1       0         False     3m", "\nb ", "120m"}, []string{"EVACUATING", "kernel"}},
		{[]string{"-o", "wide"}, "", []string{"AGE    EVACUATING   SKIPPED   ROLLOUT   REASON", "kernel"}, nil},
		{[]string{"--no-headers"}, "", []string{"a     Cordon"}, []string{"NAME"}},
		{[]string{"--show-labels"}, "team=b", []string{"LABELS", "team=b"}, []string{"\na "}},
		{[]string{"-o", "name"}, "", []string{"nodemaintenance.nodemaint.dev/a\nnodemaintenance.nodemaint.dev/b\n"}, nil},
		{[]string{"-o", "jsonpath={.items[*].metadata.name}"}, "", []string{"a b"}, nil},
	} {
		f := newPrintFlags()
		cmd := &cobra.Command{}
		f.AddFlags(cmd)
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		sel, _ := labels.Parse(tc.selector)
		var out bytes.Buffer
		o := &clioptions.Options{Streams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}}
		if err := list(context.Background(), o, c, f, sel, false); err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("list %v -l %q: no %q in\n%s", tc.args, tc.selector, w, out.String())
			}
		}
		for _, w := range tc.not {
			if strings.Contains(out.String(), w) {
				t.Errorf("list %v -l %q: %q in\n%s", tc.args, tc.selector, w, out.String())
			}
		}
	}
}
