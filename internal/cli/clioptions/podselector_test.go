package clioptions

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestParsePodSelector: --pod-selector becomes a podSelector that selects exactly the pods
// kubectl drain's label selector selects; what a LabelSelector cannot say is refused.
func TestParsePodSelector(t *testing.T) {
	pods := []labels.Set{{}, {"app": "web"}, {"app": "db"}, {"app": "web", "tier": "db"}, {"app": "web", "canary": "true"}, {"env": "b"}}
	for _, s := range []string{"app=web", "app==web", "app!=db", "tier!=db,app=web", "!canary", "canary", "env in (a,b)", "env notin (a)",
		"app=web,app=db", "app in (web,db),app!=db", "app=web,!canary,tier notin (x)"} {
		sel, err := ParsePodSelector(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		got, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatalf("%q: %+v does not parse: %v", s, sel, err)
		}
		want, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if got.Matches(p) != want.Matches(p) {
				t.Errorf("%q as %+v: selects %v: %v, kubectl's %v", s, sel, p, got.Matches(p), want.Matches(p))
			}
		}
	}
	if sel, err := ParsePodSelector(""); err != nil {
		t.Errorf(`"": error %v; want none`, err)
	} else if sel != nil {
		t.Errorf(`"": selector %+v; want none`, sel)
	}
	for _, s := range []string{"replicas>1", "replicas<3", "app in (web", "app=we b", "-app=web", "app=" + strings.Repeat("x", 64)} {
		if _, err := ParsePodSelector(s); err == nil || !strings.Contains(err.Error(), "--pod-selector") {
			t.Errorf("%q: error %v, want one naming --pod-selector", s, err)
		}
	}
}
