// Package status holds `kubectl maintenance status` and `kubectl maintenance list`: the
// NodeMaintenances, their progress per node and what blocks them, as tables (the views of
// package progress) or as objects (-o json, yaml...).
package status

import (
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/progress"
)

// NewStatusCommand is `kubectl maintenance status`: it shows maintenances and their nodes;
// --blocking lists what blocks and why.
func NewStatusCommand(o *clioptions.Options) *cobra.Command {
	var blocking bool
	print := genericclioptions.NewPrintFlags("").WithTypeSetter(clioptions.Scheme)
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show the progress of NodeMaintenances per node, and what blocks them",
		Example: `  # Every maintenance and its nodes
  kubectl maintenance status

  # What holds up the drain of node-1, and why
  kubectl maintenance status node-1 --blocking

  # A rollout: nodes done, in their turn (since when, what holds each) and waiting; why it halts
  kubectl maintenance status selector-1a2b3c4d5e`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := o.Clients()
			if err != nil {
				return err
			}
			items, err := getMaintenances(cmd, c, args)
			if err != nil {
				return err
			}
			if *print.OutputFormat != "" {
				return printObjects(print, o, items)
			}
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
				progress.WriteNodeTable(o.Streams.Out, nm)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&blocking, "blocking", false, "List what blocks each node, with the reason (e.g. the PodDisruptionBudget's message)")
	print.AddFlags(cmd)
	o.CompleteNames(cmd, false)
	return cmd
}

// NewListCommand is `kubectl maintenance list`: it lists the NodeMaintenances.
func NewListCommand(o *clioptions.Options) *cobra.Command {
	print := genericclioptions.NewPrintFlags("").WithTypeSetter(clioptions.Scheme)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List NodeMaintenances",
		Example: `  kubectl maintenance list -o wide`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := o.Clients()
			if err != nil {
				return err
			}
			items, err := getMaintenances(cmd, c, nil)
			if err != nil {
				return err
			}
			if f := *print.OutputFormat; f != "" && f != "wide" {
				return printObjects(print, o, items)
			}
			tw := tabwriter.NewWriter(o.Streams.Out, 0, 4, 2, ' ', 0)
			header := "NAME\tPHASE\tCORDON\tDRAIN\tNODES\tPENDING\tDRAINED"
			if *print.OutputFormat == "wide" {
				header += "\tEVACUATING\tSKIPPED\tROLLOUT\tREASON"
			}
			fmt.Fprintln(tw, header)
			for _, nm := range items {
				drained := "False"
				if drainedCond := findDrained(&nm); drainedCond != "" {
					drained = drainedCond
				}
				fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%d\t%d\t%s", nm.Name, nm.Status.Phase, nm.Spec.Cordon, nm.Spec.Drain,
					nm.Status.SelectedNodes, nm.Status.PodsPendingEvacuation, drained)
				if *print.OutputFormat == "wide" {
					fmt.Fprintf(tw, "\t%d\t%d\t%s\t%s", nm.Status.PodsEvacuating, nm.Status.PodsSkipped, progress.RolloutCell(&nm), nm.Spec.Reason)
				}
				fmt.Fprintln(tw)
			}
			return tw.Flush()
		},
	}
	print.AddFlags(cmd)
	return cmd
}

func findDrained(nm *nodemaintv1alpha1.NodeMaintenance) string {
	for _, c := range nm.Status.Conditions {
		if c.Type == nodemaintv1alpha1.ConditionDrained {
			return string(c.Status)
		}
	}
	return ""
}

func getMaintenances(cmd *cobra.Command, c client.Client, args []string) ([]nodemaintv1alpha1.NodeMaintenance, error) {
	if len(args) == 1 {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := c.Get(cmd.Context(), client.ObjectKey{Name: args[0]}, nm); err != nil {
			return nil, err
		}
		return []nodemaintv1alpha1.NodeMaintenance{*nm}, nil
	}
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := c.List(cmd.Context(), &list); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

func printObjects(print *genericclioptions.PrintFlags, o *clioptions.Options, items []nodemaintv1alpha1.NodeMaintenance) error {
	p, err := print.ToPrinter()
	if err != nil {
		return err
	}
	if len(items) == 1 {
		return p.PrintObj(&items[0], o.Streams.Out)
	}
	list := &nodemaintv1alpha1.NodeMaintenanceList{Items: items}
	return p.PrintObj(list, o.Streams.Out)
}
