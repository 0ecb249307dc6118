package complete

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/target"
)

// NewCommand sets cordon and drain back to false: Maintenance Complete. Of nodes in their turn
// in a rollout with release Manual, it completes their turn instead (see completeTurns).
func NewCommand(o *clioptions.Options, verb, short string) *cobra.Command {
	co := &completeOptions{Options: o}
	cmd := &cobra.Command{
		Use:   verb + " (NODE... [--maintenance NAME] | -l SELECTOR | --name NAME)",
		Short: short,
		Long: short + `.

For named nodes in their turn in a rollout (spec.rollout) with release Manual, complete ends
their turn instead: it adds the maintenance's name to the node annotation nodemaint.dev/complete,
and nodemaint restores and uncordons the nodes and starts the next ones. The rollout is the one
the node's annotation nodemaint.dev/maintenances lists, or the one --maintenance names. complete
refuses, changing nothing, a node in several rollouts, a node waiting for its turn, and a
rollout whose nodes are released otherwise (release Drained or Rebooted).

Otherwise complete ends the NodeMaintenance: one that kubectl maintenance created (label
app.kubernetes.io/managed-by=kubectl-maintenance) is deleted, which restores the nodes as
completing does, so that a drain and its complete leave nothing behind; --keep keeps it, with
cordon and drain false. One created otherwise (kubectl apply, GitOps) is kept unless --delete.`,
		Example: fmt.Sprintf(`  # The maintenance of node-1 is over: uncordon it and restore what nodemaint changed
  kubectl maintenance %[1]s node-1

  # node-3 is upgraded: end its turn in its rollout (release Manual), the next node starts
  kubectl maintenance %[1]s node-3

  # the same, naming the rollout
  kubectl maintenance %[1]s node-3 node-4 --maintenance pool-a`, verb),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The flags are checked together before the arguments and the cluster are read.
			if err := co.Validate(cmd, args); err != nil {
				return err
			}
			if err := co.Complete(cmd, args); err != nil {
				return err
			}
			return co.Run(cmd.Context())
		},
	}
	co.target.AddFlags(cmd)
	cmd.Flags().BoolVar(&co.del, "delete", false, "Delete the NodeMaintenance (which completes it too), whoever created it")
	cmd.Flags().BoolVar(&co.keep, "keep", false, "Keep a NodeMaintenance that kubectl maintenance created, with cordon and drain false (default: delete it)")
	cmd.Flags().StringVar(&co.rolls, "maintenance", "", "Complete the named nodes' turn in this rollout (release Manual); default: the rollout the nodes are in")
	clioptions.AddDryRunFlag(cmd, `"none", "client" (print what would be done, change nothing) or "server" (send the writes to the API server as dry runs: validated, not stored)`)
	o.CompleteNames(cmd, true)
	return cmd
}

// completeOptions are those of complete and uncordon.
type completeOptions struct {
	*clioptions.Options
	target target.Target
	del    bool   // --delete
	keep   bool   // --keep
	rolls  string // --maintenance
	dryRun cmdutil.DryRunStrategy

	c client.Client // writes as --dry-run says
}

// Validate refuses flags that do not go together.
func (o *completeOptions) Validate(cmd *cobra.Command, args []string) error {
	t := &o.target
	if o.rolls != "" && (t.GivenName != "" || t.Selector != "" || o.del || o.keep || len(args) == 0) {
		return clioptions.UsageError(cmd, errors.New("--maintenance completes the turns of named nodes: name them, without --name, -l, --delete or --keep"))
	}
	if o.del && o.keep {
		return clioptions.UsageError(cmd, errors.New("--delete and --keep: choose one"))
	}
	return nil
}

// Complete reads the nodes from the arguments, unless --name names the NodeMaintenance, and
// makes the client.
func (o *completeOptions) Complete(cmd *cobra.Command, args []string) error {
	if o.target.GivenName == "" {
		if err := o.target.Complete(args); err != nil {
			return clioptions.UsageError(cmd, err)
		}
	}
	var err error
	if o.dryRun, err = clioptions.DryRun(cmd); err != nil {
		return err
	}
	c, _, err := o.Clients()
	o.c = clioptions.DryRunClient(c, o.dryRun)
	return err
}

// suffix marks what a dry run would do, as kubectl marks it.
func (o *completeOptions) suffix() string {
	switch o.dryRun {
	case cmdutil.DryRunClient:
		return " (dry run)"
	case cmdutil.DryRunServer:
		return " (server dry run)"
	}
	return ""
}

// Run completes the named nodes' turns in their rollouts, if they are in one; otherwise it
// deletes the NodeMaintenance, or keeps it with cordon and drain false.
func (o *completeOptions) Run(ctx context.Context) error {
	t := &o.target
	if t.GivenName == "" && t.Selector == "" && !o.del {
		if done, err := completeTurns(ctx, o.Streams.Out, o.c, t, o.rolls, o.suffix()); done || err != nil {
			return err
		}
	}
	nm, err := o.get(ctx)
	if err != nil {
		return err
	}
	if o.del || !o.keep && nm.Labels[clioptions.ManagedByLabel] == clioptions.ManagedByPlugin {
		// Only the object as read goes: one created again since under the same name stays.
		if err := o.c.Delete(ctx, nm, client.Preconditions{UID: &nm.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
		fmt.Fprintf(o.Streams.Out, "nodemaintenance.nodemaint.dev/%s: deleted%s\n", nm.Name, o.suffix())
		return nil
	}
	orig := nm.DeepCopy()
	nm.Spec.Cordon, nm.Spec.Drain = false, false
	if err := o.c.Patch(ctx, nm, client.MergeFrom(orig)); err != nil {
		return err
	}
	fmt.Fprintf(o.Streams.Out, "nodemaintenance.nodemaint.dev/%s: complete%s\n", nm.Name, o.suffix())
	return nil
}

// get reads the target's NodeMaintenance. Of one that does not exist it names, for named
// nodes, those that do not exist either (a typo).
func (o *completeOptions) get(ctx context.Context) (*nodemaintv1alpha1.NodeMaintenance, error) {
	t := &o.target
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	if err := o.c.Get(ctx, client.ObjectKey{Name: t.Name()}, nm); err != nil {
		if apierrors.IsNotFound(err) {
			if t.GivenName == "" && t.Selector == "" {
				if err := t.Check(ctx, o.c); err != nil {
					return nil, err // a typo in a node name
				}
			}
			return nil, fmt.Errorf("no NodeMaintenance %s: nothing to complete", t.Name())
		}
		return nil, err
	}
	return nm, nil
}

// completeTurns completes the named nodes' turns in their rollouts. done is false when no
// rollout is named and none of the nodes is in one: complete then completes the NodeMaintenance
// named after the nodes (which may outlive its nodes). Unknown nodes are refused, and nothing
// changes unless every node's turn can be completed.
func completeTurns(ctx context.Context, out io.Writer, c client.Client, t *target.Target, named, suffix string) (done bool, err error) {
	if named != "" {
		if err := t.Check(ctx, c); err != nil {
			return true, err
		}
	}
	nodes := make([]*corev1.Node, 0, len(t.Nodes))
	missing := false
	for _, name := range t.Nodes {
		node := &corev1.Node{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, node)
		switch {
		case apierrors.IsNotFound(err):
			missing = true
			continue
		case err != nil:
			return true, fmt.Errorf("getting node %s: %w", name, err)
		}
		nodes = append(nodes, node)
	}
	r := &turnResolver{c: c, nms: map[string]*nodemaintv1alpha1.NodeMaintenance{}}
	turns, already, found, err := r.resolve(ctx, nodes, named, t.Name())
	switch {
	case !found:
		return false, nil
	case missing:
		return true, t.Check(ctx, c) // names the unknown nodes
	case err != nil:
		return true, err
	}
	for _, line := range already {
		fmt.Fprintln(out, line)
	}
	for _, turn := range turns {
		if err := completeTurn(ctx, c, out, turn, suffix); err != nil {
			return true, err
		}
	}
	return true, nil
}
