// Package cli is kubectl-maintenance, the kubectl plugin of nodemaint: it creates and edits
// NodeMaintenances, follows their progress, and names what blocks a drain.
package cli

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
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/version"
)

// Exit codes a script can rely on.
const (
	ExitOK       = 0
	ExitError    = 1
	ExitTimedOut = 3 // --wait ran out of --timeout before the maintenance reached its goal
)

// ExitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// ExitCode is the process exit code for an error returned by the command.
func ExitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	if err != nil {
		return ExitError
	}
	return ExitOK
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(s))
	return s
}()

// options are shared by every command.
type options struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

func (o *options) clients() (client.WithWatch, kubernetes.Interface, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	cfg.UserAgent = "kubectl-maintenance"
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return c, cs, err
}

// NewCommand returns the kubectl-maintenance command.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), streams: streams}
	cmd := &cobra.Command{
		Use:   "kubectl-maintenance",
		Short: "Declarative node maintenance: cordon, drain and complete with NodeMaintenance objects",
		Long: `kubectl maintenance creates and edits NodeMaintenances (nodemaint.dev/v1alpha1), follows
their progress and names what blocks a drain. Pod owners that can move their pods without
downtime (Deployments with maxSurge) do so; the rest are evicted through their
PodDisruptionBudgets.

Exit codes: 0 done, 1 error, 2 preflight: the drain would be blocked, 3 timed out waiting (the
maintenance goes on).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl maintenance"},
		Version:       version.Get().String(),
	}
	cmd.SetVersionTemplate(binaryName + " {{.Version}}\n")
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	o.config.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		newPhaseCommand(o, "plan", "Announce maintenance of nodes (Planning): a PreferNoSchedule taint, nothing else", false, false),
		newPhaseCommand(o, "cordon", "Cordon nodes through a NodeMaintenance", true, false),
		newPhaseCommand(o, "drain", "Cordon and drain nodes through a NodeMaintenance, and follow the drain", true, true),
		newCompleteCommand(o, "complete", "Complete the maintenance of nodes: restore what nodemaint changed"),
		newCompleteCommand(o, "uncordon", "Complete the maintenance of nodes (alias of complete)"),
		newPreflightCommand(o),
		newStatusCommand(o),
		newListCommand(o),
		newCleanupCommand(o),
		newVersionCommand(),
	)
	return cmd
}

// target is the nodes a command is about: names or a label selector.
type target struct {
	nodes    []string
	selector string
	name     string // --name
}

func (t *target) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&t.selector, "selector", "l", "", "Label selector of the nodes, instead of names")
	cmd.Flags().StringVar(&t.name, "name", "", "Name of the NodeMaintenance (default: derived from the nodes or the selector)")
}

func (t *target) complete(args []string) error {
	t.nodes = append([]string(nil), args...)
	sort.Strings(t.nodes)
	switch {
	case len(t.nodes) == 0 && t.selector == "":
		return errors.New("name nodes, or select them with -l")
	case len(t.nodes) > 0 && t.selector != "":
		return errors.New("name nodes or select them with -l, not both")
	}
	return nil
}

// Name is the NodeMaintenance's name: predictable, so that running a command again edits the
// same object. One node: the node's name. Several nodes, or a selector: a short hash of them.
func (t *target) Name() string {
	switch {
	case t.name != "":
		return t.name
	case len(t.nodes) == 1:
		return t.nodes[0]
	case t.selector != "":
		return "selector-" + shortHash(t.selector)
	}
	return "nodes-" + shortHash(strings.Join(t.nodes, ","))
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

// nodeSelector is the target as a NodeMaintenance's nodeSelector.
func (t *target) nodeSelector() (corev1.NodeSelector, error) {
	var sel corev1.NodeSelector
	if t.selector != "" {
		reqs, err := labelRequirements(t.selector)
		if err != nil {
			return sel, err
		}
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}
		return sel, nil
	}
	if len(t.nodes) > maxNodeNames {
		return sel, fmt.Errorf("%d node names: a NodeMaintenance names at most %d; select the nodes with -l instead", len(t.nodes), maxNodeNames)
	}
	sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: t.nodes}},
	}}
	return sel, nil
}

// getNodesUpTo is the most named nodes check gets one by one; it lists the nodes for more.
const getNodesUpTo = 16

// maxNodeNames is the most values a node selector requirement takes (the CRD's bound).
const maxNodeNames = 256

// check refuses a target that selects no node: a name of no node (a typo) or a selector that
// matches none. Such a NodeMaintenance would report nothing to do today and drain whatever node
// comes to match it later.
func (t *target) check(ctx context.Context, c client.Reader) error {
	if t.selector != "" {
		sel, err := labels.Parse(t.selector)
		if err != nil {
			return err
		}
		var nodes metav1.PartialObjectMetadataList
		nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		if err := c.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: sel}, client.Limit(1)); err != nil {
			return fmt.Errorf("listing the nodes: %w", err)
		}
		if len(nodes.Items) == 0 {
			return fmt.Errorf("selector %q matches no node: nothing changed", t.selector)
		}
		return nil
	}
	var missing []string
	if len(t.nodes) > getNodesUpTo {
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
		for _, name := range t.nodes {
			if !exist[name] {
				missing = append(missing, name)
			}
		}
	} else {
		for _, name := range t.nodes {
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

func usageError(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w\nSee '%s --help'", err, cmd.CommandPath())
}
