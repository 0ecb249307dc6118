package v1alpha1_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// TestDurationDecodesAnything: a NodeMaintenance stored with a duration Go cannot parse decodes
// (so the informer's list does not fail), is marked invalid, names its problem, and encodes back
// to the same text.
func TestDurationDecodesAnything(t *testing.T) {
	for _, raw := range []string{`"1d"`, `"2 days"`, `"1w"`, `""`, `5`, `"1h30m"`, `"0s"`} {
		doc := `{"spec":{"evacuationResponseTimeout":` + raw + `,"drainTimeout":"1h","nodeSelector":{"nodeSelectorTerms":[]}}}`
		var nm nodemaintv1alpha1.NodeMaintenance
		if err := json.Unmarshal([]byte(doc), &nm); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		d := nm.Spec.EvacuationResponseTimeout
		_, parseErr := time.ParseDuration(strings.Trim(raw, `"`))
		if d.Valid() != (parseErr == nil && strings.HasPrefix(raw, `"`)) {
			t.Errorf("%s: Valid() = %v", raw, d.Valid())
		}
		if nm.Spec.DrainTimeout.Duration != time.Hour {
			t.Errorf("%s: the other fields must decode, drainTimeout %v", raw, nm.Spec.DrainTimeout)
		}
		problems := nm.Spec.Problems()
		switch {
		case raw == `"1h30m"` && len(problems) != 0:
			t.Errorf("%s: problems %q", raw, problems)
		case raw != `"1h30m"` && (len(problems) != 1 || !strings.Contains(problems[0], "spec.evacuationResponseTimeout")):
			t.Errorf("%s: problems %q; want one naming spec.evacuationResponseTimeout", raw, problems)
		}
		out, err := json.Marshal(nm.Spec.EvacuationResponseTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if want := raw; !d.Valid() && raw != `5` && string(out) != want {
			t.Errorf("%s: encodes to %s", raw, out)
		}
	}
}

// TestProblemsOfPodSelectorAndGracePeriod: a podSelector that does not parse and a grace period
// out of bounds (stored before the API server refused them) make the spec unusable, naming the
// field; good ones do not.
func TestProblemsOfPodSelectorAndGracePeriod(t *testing.T) {
	grace := func(s int64) *int64 { return &s }
	for _, tc := range []struct {
		spec nodemaintv1alpha1.NodeMaintenanceSpec
		want string
	}{
		{spec: nodemaintv1alpha1.NodeMaintenanceSpec{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, EvictionGracePeriodSeconds: grace(30)}},
		{spec: nodemaintv1alpha1.NodeMaintenanceSpec{EvictionGracePeriodSeconds: grace(1)}},
		{spec: nodemaintv1alpha1.NodeMaintenanceSpec{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"web"}}}}},
			want: "spec.podSelector: "},
		{spec: nodemaintv1alpha1.NodeMaintenanceSpec{EvictionGracePeriodSeconds: grace(0)}, want: "spec.evictionGracePeriodSeconds: 0 is not between 1 and 86400"},
		{spec: nodemaintv1alpha1.NodeMaintenanceSpec{EvictionGracePeriodSeconds: grace(86401)}, want: "spec.evictionGracePeriodSeconds: 86401"},
	} {
		problems := tc.spec.Problems()
		switch {
		case tc.want == "" && len(problems) > 0:
			t.Errorf("%+v: problems %q, want none", tc.spec, problems)
		case tc.want != "" && (len(problems) != 1 || !strings.HasPrefix(problems[0], tc.want)):
			t.Errorf("%+v: problems %q, want one starting %q", tc.spec, problems, tc.want)
		}
	}
}
