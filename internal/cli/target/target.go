// Package target is the nodes a kubectl-maintenance command is about, named or selected by
// labels: their flags, the name of their NodeMaintenance, their node selector, and the checks
// that they exist.
package target

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Target is the nodes a command is about: names or a label selector.
type Target struct {
	Nodes     []string // the named nodes, sorted (Complete)
	Selector  string   // -l
	GivenName string   // --name
}

// AddFlags adds -l and --name.
func (t *Target) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&t.Selector, "selector", "l", "", "Label selector of the nodes, instead of names")
	cmd.Flags().StringVar(&t.GivenName, "name", "", "Name of the NodeMaintenance (default: derived from the nodes or the selector)")
}

// Complete takes the named nodes from the arguments, and refuses both names and a selector, or
// neither.
func (t *Target) Complete(args []string) error {
	t.Nodes = append([]string(nil), args...)
	sort.Strings(t.Nodes)
	switch {
	case len(t.Nodes) == 0 && t.Selector == "":
		return errors.New("name nodes, or select them with -l")
	case len(t.Nodes) > 0 && t.Selector != "":
		return errors.New("name nodes or select them with -l, not both")
	}
	return nil
}

// Name is the NodeMaintenance's name: predictable, so that running a command again edits the
// same object. One node: the node's name. Several nodes, or a selector: a short hash of them.
func (t *Target) Name() string {
	switch {
	case t.GivenName != "":
		return t.GivenName
	case len(t.Nodes) == 1:
		return t.Nodes[0]
	case t.Selector != "":
		return "selector-" + shortHash(t.Selector)
	}
	return "nodes-" + shortHash(strings.Join(t.Nodes, ","))
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

// NodeSelector is the target as a NodeMaintenance's nodeSelector.
func (t *Target) NodeSelector() (corev1.NodeSelector, error) {
	var sel corev1.NodeSelector
	if t.Selector != "" {
		reqs, err := labelRequirements(t.Selector)
		if err != nil {
			return sel, err
		}
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}
		return sel, nil
	}
	if len(t.Nodes) > maxNodeNames {
		return sel, fmt.Errorf("%d node names: a NodeMaintenance names at most %d; select the nodes with -l instead", len(t.Nodes), maxNodeNames)
	}
	sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: t.Nodes}},
	}}
	return sel, nil
}

// labelRequirements turns a label selector into node selector requirements.
func labelRequirements(s string) ([]corev1.NodeSelectorRequirement, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, err
	}
	reqs, selectable := sel.Requirements()
	if !selectable || len(reqs) == 0 {
		return nil, fmt.Errorf("selector %q selects nothing", s)
	}
	var out []corev1.NodeSelectorRequirement
	for _, r := range reqs {
		var op corev1.NodeSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = corev1.NodeSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = corev1.NodeSelectorOpNotIn
		case selection.Exists:
			op = corev1.NodeSelectorOpExists
		case selection.DoesNotExist:
			op = corev1.NodeSelectorOpDoesNotExist
		case selection.GreaterThan:
			op = corev1.NodeSelectorOpGt
		case selection.LessThan:
			op = corev1.NodeSelectorOpLt
		default:
			return nil, fmt.Errorf("selector %q: operator %s is not supported", s, r.Operator())
		}
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key(), Operator: op, Values: r.ValuesUnsorted()})
	}
	return out, nil
}

// getNodesUpTo is the most named nodes Check gets one by one; it lists the nodes for more.
const getNodesUpTo = 16

// maxNodeNames is the most values a node selector requirement takes (the CRD's bound).
const maxNodeNames = 256

// Check refuses a target that selects no node: a name of no node (a typo) or a selector that
// matches none. Such a NodeMaintenance would report nothing to do today and drain whatever node
// comes to match it later.
func (t *Target) Check(ctx context.Context, c client.Reader) error {
	if t.Selector != "" {
		sel, err := labels.Parse(t.Selector)
		if err != nil {
			return err
		}
		var nodes metav1.PartialObjectMetadataList
		nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		if err := c.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: sel}, client.Limit(1)); err != nil {
			return fmt.Errorf("listing the nodes: %w", err)
		}
		if len(nodes.Items) == 0 {
			return fmt.Errorf("selector %q matches no node: nothing changed", t.Selector)
		}
		return nil
	}
	var missing []string
	if len(t.Nodes) > getNodesUpTo {
		// One list instead of a request per name.
		var nodes metav1.PartialObjectMetadataList
		nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		if err := c.List(ctx, &nodes); err != nil {
			return fmt.Errorf("listing the nodes: %w", err)
		}
		exist := make(map[string]bool, len(nodes.Items))
		for _, n := range nodes.Items {
			exist[n.Name] = true
		}
		for _, name := range t.Nodes {
			if !exist[name] {
				missing = append(missing, name)
			}
		}
	} else {
		for _, name := range t.Nodes {
			var node metav1.PartialObjectMetadata
			node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
			err := c.Get(ctx, client.ObjectKey{Name: name}, &node)
			switch {
			case apierrors.IsNotFound(err):
				missing = append(missing, name)
			case err != nil:
				return fmt.Errorf("getting node %s: %w", name, err)
			}
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("no node named %s: nothing changed", missing[0])
	}
	return fmt.Errorf("no nodes named %s: nothing changed", strings.Join(missing, ", "))
}

// Resolve names the target's nodes among the nodes: the named ones, all of which must exist, or
// those the selector matches, at least one.
func (t *Target) Resolve(nodes []corev1.Node) ([]string, error) {
	if t.Selector != "" {
		sel, err := labels.Parse(t.Selector)
		if err != nil {
			return nil, err
		}
		var names []string
		for i := range nodes {
			if sel.Matches(labels.Set(nodes[i].Labels)) {
				names = append(names, nodes[i].Name)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("selector %q matches no node", t.Selector)
		}
		sort.Strings(names)
		return names, nil
	}
	exist := map[string]bool{}
	for i := range nodes {
		exist[nodes[i].Name] = true
	}
	var missing []string
	for _, name := range t.Nodes {
		if !exist[name] {
			missing = append(missing, name)
		}
	}
	switch len(missing) {
	case 0:
		return t.Nodes, nil
	case 1:
		return nil, fmt.Errorf("no node named %s", missing[0])
	}
	return nil, fmt.Errorf("no nodes named %s", strings.Join(missing, ", "))
}
