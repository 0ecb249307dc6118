// Package status holds `kubectl maintenance status` and `kubectl maintenance list`: the
// NodeMaintenances, their progress per node and what blocks them, as tables (the views of
// package progress, and a kubectl get table) or as objects (-o json, yaml, name, jsonpath...),
// every -o through cli-runtime's printers.
package status

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/progress"
	"github.com/nodemaint/nodemaint/internal/cli/target"
)

// NewStatusCommand is `kubectl maintenance status`: it shows maintenances and their nodes;
// --blocking lists what blocks and why.
func NewStatusCommand(o *clioptions.Options) *cobra.Command {
	var blocking bool
	print := newPrintFlags()
	cmd := &cobra.Command{
		Use:   "status [NAME | NODE]",
		Short: "Show the progress of NodeMaintenances per node, and what blocks them",
		Long: `status shows each NodeMaintenance: a line about it, and a table of its nodes (-o wide: with
more columns; --blocking: what blocks each node, and why); or the objects (-o yaml, json, name,
jsonpath=..., custom-columns=...).

Without an argument, every NodeMaintenance. With one, the NodeMaintenance of that name and every
NodeMaintenance that covers the node of that name (its nodeSelector selects it), whatever
they are named: a rollout of the node's pool, one applied by GitOps, the one drain NODE made.`,
		Example: `  # Every maintenance and its nodes
  kubectl maintenance status

  # What holds up the drain of node-1, and why, in every maintenance that covers it
  kubectl maintenance status node-1 --blocking

  # A rollout: nodes done, in their turn (since when, what holds each) and waiting; why it halts
  kubectl maintenance status selector-1a2b3c4d5e`,
		Args: cobra.MaximumNArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return checkOutput(cmd, print)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := o.Clients()
			if err != nil {
				return err
			}
			items, err := getMaintenances(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			if !humanReadable(print) {
				return printObjects(print, o, items)
			}
			wide := *print.OutputFormat == "wide"
			for i := range items {
				nm := &items[i]
				if i > 0 {
					fmt.Fprintln(o.Streams.Out)
				}
				fmt.Fprintln(o.Streams.Out, progress.Summary(nm))
				if blocking {
					var lines []string
					if nm.Spec.Rollout != nil {
						lines = progress.RolloutLines(nm)
					}
					lines = append(lines, progress.BlockingLines(nm)...)
					if len(lines) == 0 {
						fmt.Fprintln(o.Streams.Out, "  nothing blocks")
					}
					for _, l := range lines {
						fmt.Fprintln(o.Streams.Out, "  "+l)
					}
					continue
				}
				if wide {
					progress.WriteWideNodeTable(o.Streams.Out, nm)
				} else {
					progress.WriteNodeTable(o.Streams.Out, nm)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&blocking, "blocking", false, "List what blocks each node, with the reason (e.g. the PodDisruptionBudget's message)")
	print.AddFlags(cmd)
	o.CompleteNames(cmd, false)
	return cmd
}

// newPrintFlags are kubectl get's -o, --no-headers, --show-labels, -L, --template... but
// --sort-by, which kubectl get applies itself, not its printers (the commands sort by name).
func newPrintFlags() *get.PrintFlags {
	f := get.NewGetPrintFlags()
	f.HumanReadableFlags.SortBy = nil
	return f
}

// humanReadable reports whether -o asks for a table ("" or wide), not the objects.
func humanReadable(f *get.PrintFlags) bool {
	o := *f.OutputFormat
	noTemplate := f.TemplateFlags.TemplateArgument == nil || *f.TemplateFlags.TemplateArgument == ""
	return (o == "" || o == "wide") && noTemplate
}

// checkOutput refuses an -o that no printer takes, before the cluster is read.
func checkOutput(cmd *cobra.Command, f *get.PrintFlags) error {
	if humanReadable(f) {
		return nil
	}
	if _, err := f.ToPrinter(); err != nil {
		return clioptions.UsageError(cmd, err)
	}
	return nil
}

// getMaintenances reads every NodeMaintenance (no argument), or the one named by the argument
// and those that cover the node named by it; an argument that names neither is an error.
func getMaintenances(ctx context.Context, c client.Client, args []string) ([]nodemaintv1alpha1.NodeMaintenance, error) {
	if len(args) == 0 {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := c.List(ctx, &list); err != nil {
			return nil, err
		}
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		return list.Items, nil
	}
	name := args[0]
	var items []nodemaintv1alpha1.NodeMaintenance
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	switch err := c.Get(ctx, client.ObjectKey{Name: name}, nm); {
	case err == nil:
		items = append(items, *nm)
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	node := &corev1.Node{}
	switch err := c.Get(ctx, client.ObjectKey{Name: name}, node); {
	case apierrors.IsNotFound(err):
		if len(items) == 0 {
			return nil, fmt.Errorf("no NodeMaintenance named %s, and no node: nothing to show", name)
		}
		return items, nil
	case err != nil:
		return nil, err
	}
	covering, err := target.Covering(ctx, c, node)
	if err != nil {
		return nil, err
	}
	for _, nm := range covering {
		if nm.Name != name {
			items = append(items, nm)
		}
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("no NodeMaintenance covers node %s", name)
	}
	return items, nil
}

// printObjects prints the NodeMaintenances as objects: one alone, several as a list.
func printObjects(f *get.PrintFlags, o *clioptions.Options, items []nodemaintv1alpha1.NodeMaintenance) error {
	p, err := objectPrinter(f)
	if err != nil {
		return err
	}
	if len(items) == 1 || *f.OutputFormat == "name" { // the name printer takes no list
		for i := range items {
			if err := p.PrintObj(&items[i], o.Streams.Out); err != nil {
				return err
			}
		}
		return nil
	}
	return p.PrintObj(&nodemaintv1alpha1.NodeMaintenanceList{Items: items}, o.Streams.Out)
}

// objectPrinter prints objects as -o says, with their kind set (the client's objects have none).
func objectPrinter(f *get.PrintFlags) (printers.ResourcePrinter, error) {
	p, err := f.ToPrinter()
	if err != nil {
		return nil, err
	}
	return printers.NewTypeSetter(clioptions.Scheme).ToPrinter(p), nil
}
