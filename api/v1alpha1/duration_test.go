package v1alpha1_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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
