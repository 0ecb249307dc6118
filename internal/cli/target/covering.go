package target

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// Covering lists the NodeMaintenances whose nodeSelector selects the node, by name: whatever
// they are named (a rollout of a pool, one applied by GitOps, the plugin's own).
func Covering(ctx context.Context, c client.Reader, node *corev1.Node) ([]nodemaintv1alpha1.NodeMaintenance, error) {
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := c.List(ctx, &list); err != nil {
		return nil, err
	}
	var covering []nodemaintv1alpha1.NodeMaintenance
	for i := range list.Items {
		if maintenance.NewSelector(&list.Items[i]).Matches(node) {
			covering = append(covering, list.Items[i])
		}
	}
	sort.Slice(covering, func(i, j int) bool { return covering[i].Name < covering[j].Name })
	return covering, nil
}

// OwnedFor reports whether the NodeMaintenance is the one kubectl maintenance created for the
// node alone (cordon, drain or plan NODE): named after it, labelled as the plugin's, and
// selecting that node by name only.
func OwnedFor(nm *nodemaintv1alpha1.NodeMaintenance, node string) bool {
	if nm.Name != node || nm.Labels[clioptions.ManagedByLabel] != clioptions.ManagedByPlugin {
		return false
	}
	own := (&Target{Nodes: []string{node}})
	sel, err := own.NodeSelector()
	if err != nil || len(nm.Spec.NodeSelector.NodeSelectorTerms) != 1 {
		return false
	}
	term, want := nm.Spec.NodeSelector.NodeSelectorTerms[0], sel.NodeSelectorTerms[0]
	return len(term.MatchExpressions) == 0 && len(term.MatchFields) == 1 &&
		term.MatchFields[0].Key == want.MatchFields[0].Key && term.MatchFields[0].Operator == want.MatchFields[0].Operator &&
		len(term.MatchFields[0].Values) == 1 && term.MatchFields[0].Values[0] == node
}
