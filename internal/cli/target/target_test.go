package target

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
)

// TestTargetCheck: names of no node and selectors that match no node are refused, naming them.
func TestTargetCheck(t *testing.T) {
	b := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"rack": "7"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}},
	)
	var many []string // more than 16: checked with one list
	for i := range 20 {
		name := fmt.Sprintf("many-%02d", i)
		many = append(many, name)
		if i != 7 {
			b.WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	}
	c := b.Build()
	cases := []struct {
		nodes    []string
		selector string
		wantErr  string
	}{
		{nodes: []string{"node-1"}},
		{nodes: []string{"node-1", "node-2"}},
		{selector: "rack=7"},
		{selector: "rack"},
		{nodes: []string{"no-such-node"}, wantErr: "no node named no-such-node: nothing changed"},
		{nodes: []string{"node-1", "nde-2", "node-3"}, wantErr: "no nodes named nde-2, node-3: nothing changed"},
		{nodes: many[:7]},
		{nodes: many, wantErr: "no node named many-07: nothing changed"},
		{selector: "rack=8", wantErr: `selector "rack=8" matches no node: nothing changed`},
		{selector: "!rack,rack=7", wantErr: "matches no node"},
	}
	for _, tc := range cases {
		tg := &Target{Selector: tc.selector}
		if err := tg.Complete(tc.nodes); err != nil {
			t.Fatal(err)
		}
		err := tg.Check(context.Background(), c)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("nodes %v selector %q: error %v, want %q", tc.nodes, tc.selector, err, tc.wantErr)
		}
	}
}

// TestNodeSelectorOneTerm: named nodes go in one term, metadata.name In [names], so that more
// than the 16 terms a selector may have can be named; more than 256 are refused.
func TestNodeSelectorOneTerm(t *testing.T) {
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("node-%02d", i))
	}
	tg := &Target{}
	if err := tg.Complete(names); err != nil {
		t.Fatal(err)
	}
	sel, err := tg.NodeSelector()
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.NodeSelectorTerms) != 1 || len(sel.NodeSelectorTerms[0].MatchFields) != 1 {
		t.Errorf("selector of 20 names: %+v, want one term with one field", sel)
	} else {
		f := sel.NodeSelectorTerms[0].MatchFields[0]
		if f.Key != "metadata.name" {
			t.Errorf("selector of 20 names: field %s, want metadata.name", f.Key)
		}
		if len(f.Values) != 20 {
			t.Errorf("selector of 20 names: %d values, want the 20 names", len(f.Values))
		}
	}
	for i := 20; i < 257; i++ {
		names = append(names, fmt.Sprintf("node-%03d", i))
	}
	if err := tg.Complete(names); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.NodeSelector(); err == nil || !strings.Contains(err.Error(), "at most 256") {
		t.Errorf("257 names: error %v, want at most 256", err)
	}
}

// TestResolve: names of no node are refused, as a selector that matches none.
func TestResolve(t *testing.T) {
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "7"}}}}
	for _, tc := range []struct {
		nodes    []string
		selector string
		wantErr  string
	}{
		{nodes: []string{"n1"}},
		{selector: "rack=7"},
		{nodes: []string{"n2"}, wantErr: "no node named n2"},
		{nodes: []string{"n1", "n2", "n3"}, wantErr: "no nodes named n2, n3"},
		{selector: "rack=8", wantErr: `selector "rack=8" matches no node`},
	} {
		tg := &Target{Selector: tc.selector}
		if err := tg.Complete(tc.nodes); err != nil {
			t.Fatal(err)
		}
		_, err := tg.Resolve(nodes)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v %q: error %v, want %q", tc.nodes, tc.selector, err, tc.wantErr)
		}
	}
}
