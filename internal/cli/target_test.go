package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestTargetCheck: names of no node and selectors that match no node are refused, naming them.
func TestTargetCheck(t *testing.T) {
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
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
		tg := &target{selector: tc.selector}
		if err := tg.complete(tc.nodes); err != nil {
			t.Fatal(err)
		}
		err := tg.check(context.Background(), c)
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
	tg := &target{}
	if err := tg.complete(names); err != nil {
		t.Fatal(err)
	}
	sel, err := tg.nodeSelector()
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.NodeSelectorTerms) != 1 || len(sel.NodeSelectorTerms[0].MatchFields) != 1 ||
		sel.NodeSelectorTerms[0].MatchFields[0].Key != "metadata.name" || len(sel.NodeSelectorTerms[0].MatchFields[0].Values) != 20 {
		t.Errorf("selector of 20 names: %+v, want one term with metadata.name In the 20 names", sel)
	}
	for i := 20; i < 257; i++ {
		names = append(names, fmt.Sprintf("node-%03d", i))
	}
	if err := tg.complete(names); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.nodeSelector(); err == nil || !strings.Contains(err.Error(), "at most 256") {
		t.Errorf("257 names: error %v, want at most 256", err)
	}
}
