package status

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/progress"
)

// NewListCommand is `kubectl maintenance list`: kubectl get nmaint, with nodemaint's columns.
func NewListCommand(o *clioptions.Options) *cobra.Command {
	print := newPrintFlags()
	var (
		selector      string
		watchToo      bool
		allNamespaces bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List NodeMaintenances (kubectl get nmaint, with more columns)",
		Long: `list lists the NodeMaintenances as kubectl get does, with nodemaint's columns: phase, cordon,
drain, nodes, pods pending, Drained, age; -o wide adds pods evacuating and skipped, the rollout
and the reason. It takes kubectl get's flags: -l, -w, --no-headers, --show-labels, -L and every
-o (json, yaml, name, jsonpath=..., custom-columns=..., go-template=...). NodeMaintenances are
cluster-scoped: -A is accepted and changes nothing.

kubectl get nmaint (the CRD's short name) lists them too, with the CRD's columns.`,
		Example: `  # Every maintenance, then their changes as they happen
  kubectl maintenance list -w

  # Those kubectl maintenance created, with more columns
  kubectl maintenance list -l app.kubernetes.io/managed-by=kubectl-maintenance -o wide

  # Only their names
  kubectl maintenance list -o name`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return checkOutput(cmd, print)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			sel, err := labels.Parse(selector)
			if err != nil {
				return clioptions.UsageError(cmd, fmt.Errorf("-l %q: %w", selector, err))
			}
			c, _, err := o.Clients()
			if err != nil {
				return err
			}
			return list(cmd.Context(), o, c, print, sel, watchToo)
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "Label selector of the NodeMaintenances (=, ==, !=, in, notin, a key, !key)")
	cmd.Flags().BoolVarP(&watchToo, "watch", "w", false, "After listing them, watch for changes and print each")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "kubectl get's; NodeMaintenances are cluster-scoped: it changes nothing")
	print.AddFlags(cmd)
	return cmd
}

// list prints the NodeMaintenances the selector selects, sorted by name, and with watchToo each
// change after, until the context ends.
func list(ctx context.Context, o *clioptions.Options, c client.WithWatch, f *get.PrintFlags, sel labels.Selector, watchToo bool) error {
	var items nodemaintv1alpha1.NodeMaintenanceList
	if err := c.List(ctx, &items, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return err
	}
	sort.Slice(items.Items, func(i, j int) bool { return items.Items[i].Name < items.Items[j].Name })
	human := humanReadable(f)
	var p printers.ResourcePrinter
	var err error
	if human {
		p, err = f.ToPrinter()
	} else {
		p, err = objectPrinter(f)
	}
	if err != nil {
		return err
	}
	switch {
	case human && (len(items.Items) > 0 || watchToo):
		if err := p.PrintObj(Table(items.Items, time.Now()), o.Streams.Out); err != nil {
			return err
		}
	case human:
		fmt.Fprintln(o.Streams.ErrOut, "No resources found")
	case watchToo || *f.OutputFormat == "name": // the name printer takes no list
		for i := range items.Items {
			if err := p.PrintObj(&items.Items[i], o.Streams.Out); err != nil {
				return err
			}
		}
	default:
		if err := p.PrintObj(&items, o.Streams.Out); err != nil {
			return err
		}
	}
	if !watchToo {
		return nil
	}
	w, err := c.Watch(ctx, &nodemaintv1alpha1.NodeMaintenanceList{}, client.MatchingLabelsSelector{Selector: sel}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: items.ResourceVersion}})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			nm, isNM := ev.Object.(*nodemaintv1alpha1.NodeMaintenance)
			switch {
			case ev.Type == watch.Error:
				return fmt.Errorf("watching NodeMaintenances: %v", ev.Object)
			case !isNM || ev.Type == watch.Bookmark:
				continue
			case human:
				err = p.PrintObj(Table([]nodemaintv1alpha1.NodeMaintenance{*nm}, time.Now()), o.Streams.Out)
			default:
				err = p.PrintObj(nm, o.Streams.Out)
			}
			if err != nil {
				return err
			}
		}
	}
}

// Table is the NodeMaintenances as kubectl get shows them: NAME, PHASE, CORDON, DRAIN, NODES,
// PENDING, DRAINED and AGE; with -o wide (priority 1) EVACUATING, SKIPPED, ROLLOUT and REASON.
// Each row carries its object, for --show-labels and -L.
func Table(items []nodemaintv1alpha1.NodeMaintenance, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Phase", Type: "string"},
		{Name: "Cordon", Type: "boolean"},
		{Name: "Drain", Type: "boolean"},
		{Name: "Nodes", Type: "integer"},
		{Name: "Pending", Type: "integer"},
		{Name: "Drained", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "Evacuating", Type: "integer", Priority: 1},
		{Name: "Skipped", Type: "integer", Priority: 1},
		{Name: "Rollout", Type: "string", Priority: 1},
		{Name: "Reason", Type: "string", Priority: 1},
	}}
	for i := range items {
		nm := &items[i]
		drained := "False"
		if c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained); c != nil {
			drained = string(c.Status)
		}
		age := "<unknown>"
		if !nm.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(now.Sub(nm.CreationTimestamp.Time))
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{nm.Name, string(nm.Status.Phase), nm.Spec.Cordon, nm.Spec.Drain, int64(nm.Status.SelectedNodes),
				int64(nm.Status.PodsPendingEvacuation), drained, age,
				int64(nm.Status.PodsEvacuating), int64(nm.Status.PodsSkipped), progress.RolloutCell(nm), nm.Spec.Reason},
			Object: runtime.RawExtension{Object: nm},
		})
	}
	return t
}
