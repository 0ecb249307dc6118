package clioptions

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// ParsePodSelector parses a --pod-selector as kubectl drain reads it, a label selector string
// (app=web,tier!=db,!canary,env in (a,b)), into a NodeMaintenance's spec.podSelector that selects
// the same pods; nil for "". key=value is a matchLabels entry (In [value] for a key given twice),
// key!=value is NotIn [value], which like != also selects pods without the label. kubectl's > and
// < on label values have no LabelSelector form and are refused, naming the flag, as are keys and
// values that are no label's.
func ParsePodSelector(s string) (*metav1.LabelSelector, error) {
	if s == "" {
		return nil, nil
	}
	reqs, err := labels.ParseToRequirements(s)
	if err != nil {
		return nil, fmt.Errorf("--pod-selector %q: %w", s, err)
	}
	sel := &metav1.LabelSelector{}
	for _, r := range reqs {
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals:
			if _, twice := sel.MatchLabels[r.Key()]; !twice {
				if sel.MatchLabels == nil {
					sel.MatchLabels = map[string]string{}
				}
				sel.MatchLabels[r.Key()] = r.ValuesUnsorted()[0]
				continue
			}
			op = metav1.LabelSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.Exists:
			op = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			op = metav1.LabelSelectorOpDoesNotExist
		default:
			return nil, fmt.Errorf("--pod-selector %q: %q on label values has no form in a NodeMaintenance's podSelector (a label selector): use =, !=, in, notin, a key or !key", s, r.Operator())
		}
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op, Values: slices.Sorted(slices.Values(r.ValuesUnsorted()))})
	}
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return nil, fmt.Errorf("--pod-selector %q: %w", s, err)
	}
	return sel, nil
}
