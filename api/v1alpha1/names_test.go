package v1alpha1_test

import (
	"slices"
	"testing"

	"k8s.io/client-go/discovery"
)

// knownShortNames are short names that other projects' CRDs give kinds of node maintenance, which
// clusters may run beside nodemaint: kubectl would not know which one a short name means.
var knownShortNames = map[string]string{
	"nm": "nodemaintenances.nodemaintenance.medik8s.io (medik8s' node-maintenance-operator, kubevirt's before it)",
}

// TestNamesCollideWithNoOther checks, on the API server, that the short names and categories of
// nodemaint's kinds name nothing else the server serves (the built-in kinds included) and none of
// the peers' short names above, and that `kubectl get nodemaint` lists both kinds.
func TestNamesCollideWithNoOther(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	others := map[string]string{} // a short name, plural or category of another kind: its resource
	var ours []string
	inCategory := map[string][]string{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			if slices.Contains(r.Categories, "nodemaint") {
				inCategory["nodemaint"] = append(inCategory["nodemaint"], r.Name)
			}
			if l.GroupVersion == "nodemaint.dev/v1alpha1" {
				ours = append(ours, r.Name)
				continue
			}
			for _, n := range append(append([]string{r.Name, r.SingularName}, r.ShortNames...), r.Categories...) {
				others[n] = r.Name + " in " + l.GroupVersion
			}
		}
	}
	if !slices.Contains(ours, "nodemaintenances") {
		t.Fatalf("nodemaint.dev/v1alpha1 serves %v", ours)
	}
	for _, l := range lists {
		if l.GroupVersion != "nodemaint.dev/v1alpha1" {
			continue
		}
		for _, r := range l.APIResources {
			for _, n := range append(slices.Clone(r.ShortNames), r.Categories...) {
				if other, ok := others[n]; ok {
					t.Errorf("%s: %q also names %s", r.Name, n, other)
				}
				if peer, ok := knownShortNames[n]; ok {
					t.Errorf("%s: %q is the short name of %s", r.Name, n, peer)
				}
			}
		}
	}
	slices.Sort(inCategory["nodemaint"])
	if got := inCategory["nodemaint"]; !slices.Equal(got, []string{"drainrules", "nodemaintenances"}) {
		t.Errorf("category nodemaint lists %v, want drainrules and nodemaintenances", got)
	}
}
