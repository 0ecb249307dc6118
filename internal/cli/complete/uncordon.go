package complete

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/drain"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/target"
)

// NewUncordonCommand is `kubectl maintenance uncordon`: kubectl uncordon, which also ends the
// node's maintenance when it is kubectl maintenance's own for that node.
func NewUncordonCommand(o *clioptions.Options) *cobra.Command {
	uo := &uncordonOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "uncordon (NODE... | -l SELECTOR)",
		Short: "Mark nodes as schedulable, as kubectl uncordon, and end the maintenance kubectl maintenance made for each",
		Long: `uncordon marks the nodes as schedulable, as kubectl uncordon does. Of a node that
kubectl maintenance put under its own maintenance (plan, cordon or drain NODE: the
NodeMaintenance named after the node, labelled app.kubernetes.io/managed-by=kubectl-maintenance,
selecting that node only), it also ends that maintenance: it deletes the NodeMaintenance, and
nodemaint restores what it changed, as complete does. It says so.

Any other NodeMaintenance that covers the node (a rollout of its pool, one applied by GitOps) is
left as it is, and named: while it cordons the node, nodemaint cordons the node again (Event
UncordonReverted). End it with complete.`,
		Example: `  # The work on node-1 is done: uncordon it (and end the maintenance drain node-1 made)
  kubectl maintenance uncordon node-1

  # What it would do, without doing it
  kubectl maintenance uncordon node-1 --dry-run=server`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := uo.complete(cmd, args); err != nil {
				return err
			}
			return uo.run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&uo.target.Selector, "selector", "l", "", "Label selector of the nodes, instead of names")
	clioptions.AddDryRunFlag(cmd, `"none", "client" (print what would be done, change nothing) or "server" (send the writes to the API server as dry runs: validated, not stored)`)
	o.CompleteNames(cmd, true)
	return cmd
}

type uncordonOptions struct {
	*clioptions.Options
	target target.Target
	dryRun cmdutil.DryRunStrategy

	c  client.WithWatch
	cs kubernetes.Interface
}

func (o *uncordonOptions) complete(cmd *cobra.Command, args []string) error {
	if err := o.target.Complete(args); err != nil {
		return clioptions.UsageError(cmd, err)
	}
	var err error
	if o.dryRun, err = clioptions.DryRun(cmd); err != nil {
		return err
	}
	o.c, o.cs, err = o.Clients()
	return err
}

// suffix marks what a dry run would do, as kubectl marks it.
func (o *uncordonOptions) suffix() string {
	switch o.dryRun {
	case cmdutil.DryRunClient:
		return " (dry run)"
	case cmdutil.DryRunServer:
		return " (server dry run)"
	}
	return ""
}

func (o *uncordonOptions) run(ctx context.Context) error {
	nodes, err := o.nodes(ctx)
	if err != nil {
		return err
	}
	write := clioptions.DryRunClient(o.c, o.dryRun)
	helper := &drain.Helper{Ctx: ctx, Client: o.cs, DryRunStrategy: o.dryRun, Out: o.Streams.Out, ErrOut: o.Streams.ErrOut}
	var errs []error
	for i := range nodes {
		node := &nodes[i]
		covering, err := target.Covering(ctx, o.c, node)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the NodeMaintenances of node %s: %w", node.Name, err))
			continue
		}
		var others []string
		for j := range covering {
			nm := &covering[j]
			if !target.OwnedFor(nm, node.Name) {
				if nm.Spec.Cordon {
					how := "kubectl maintenance complete --name " + nm.Name
					if nm.Spec.Rollout != nil {
						how = "kubectl maintenance complete " + node.Name + " --maintenance " + nm.Name + " (its turn in the rollout)"
					}
					others = append(others, "NodeMaintenance "+nm.Name+": "+how)
				}
				continue
			}
			// Only the object as read goes: one created again since under the same name stays.
			if err := write.Delete(ctx, nm, client.Preconditions{UID: &nm.UID}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("ending the maintenance of node %s: %w", node.Name, err))
				continue
			}
			fmt.Fprintf(o.Streams.Out, "nodemaintenance.nodemaint.dev/%s deleted%s: kubectl maintenance made it for node %s, whose maintenance ends; nodemaint restores what it changed\n", nm.Name, o.suffix(), node.Name)
		}
		if !node.Spec.Unschedulable {
			fmt.Fprintf(o.Streams.Out, "node/%s already uncordoned%s\n", node.Name, o.suffix())
		} else if err := drain.RunCordonOrUncordon(helper, node, false); err != nil {
			errs = append(errs, fmt.Errorf("uncordoning node %s: %w", node.Name, err))
			continue
		} else {
			fmt.Fprintf(o.Streams.Out, "node/%s uncordoned%s\n", node.Name, o.suffix())
		}
		if len(others) > 0 {
			fmt.Fprintf(o.Streams.ErrOut, "Warning: node %s is still under maintenance, which nodemaint carries on and which cordons it again until it ends: %s\n",
				node.Name, strings.Join(others, "; "))
		}
	}
	return errors.Join(errs...)
}

// nodes reads the named nodes, all of which must exist, or those the selector matches.
func (o *uncordonOptions) nodes(ctx context.Context) ([]corev1.Node, error) {
	if err := o.target.Check(ctx, o.c); err != nil {
		return nil, err
	}
	if o.target.Selector != "" {
		list, err := o.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: o.target.Selector})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	nodes := make([]corev1.Node, 0, len(o.target.Nodes))
	for _, name := range o.target.Nodes {
		node, err := o.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, *node)
	}
	return nodes, nil
}
