package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// newPhaseCommand is plan, cordon and drain: create or update the NodeMaintenance of the target
// with the given cordon and drain, and follow it.
func newPhaseCommand(o *options, verb, short string, cordon, drain bool) *cobra.Command {
	var (
		t               target
		reason          string
		wait            bool
		timeout         time.Duration
		responseTimeout time.Duration
		roll            rolloutFlags
		kubectl         kubectlDrainFlags
	)
	example := fmt.Sprintf(`  # %[1]s one node
  kubectl maintenance %[1]s node-1 --reason "kernel upgrade"

  # %[1]s every node of a rack
  kubectl maintenance %[1]s -l topology.example.com/rack=7`, verb)
	if drain {
		example += `

  # Roll through a node pool two nodes at a time; a node's turn ends once it rebooted
  kubectl maintenance drain -l pool=a --max-unavailable 2 --release rebooted

  # One node at a time, starting only on weeknights from 22:00 Berlin time for 4 hours
  kubectl maintenance drain -l pool=a --max-unavailable 1 --release manual \
    --window-schedule "0 22 * * 1-5" --window-duration 4h --window-time-zone Europe/Berlin`
	}
	cmd := &cobra.Command{
		Use:     verb + " (NODE... | -l SELECTOR)",
		Short:   short,
		Example: example,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := t.complete(args); err != nil {
				return usageError(cmd, err)
			}
			c, cs, err := o.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := t.check(ctx, c); err != nil {
				return err
			}
			dryRun := cmdutil.DryRunNone
			if drain {
				if dryRun, err = kubectl.dryRun(); err != nil {
					return usageError(cmd, err)
				}
				if ok, err := hasNodeMaintenanceAPI(cs); err != nil {
					return err
				} else if !ok {
					if roll.given() {
						return errors.New("this cluster has no NodeMaintenance API (nodemaint.dev/v1alpha1): the classic drain cannot roll through the nodes; install nodemaint, or drain without the rollout flags")
					}
					fmt.Fprintln(o.streams.ErrOut, "Warning: this cluster has no NodeMaintenance API (nodemaint.dev/v1alpha1); falling back to the classic drain, which evicts every pod without asking its owner")
					return classicDrain(ctx, o, cs, &t, timeout, &kubectl, dryRun)
				}
				if err := kubectl.check(); err != nil {
					return usageError(cmd, err)
				}
			}
			if dryRun != cmdutil.DryRunNone {
				// What the drain would meet, then the NodeMaintenance it would write.
				nm, err := applyMaintenance(ctx, c, &t, cordon, drain, reason, responseTimeout, &roll, dryRun)
				if err != nil {
					return err
				}
				var budget *intstr.IntOrString
				if nm.Spec.Rollout != nil {
					budget = nm.Spec.Rollout.MaxUnavailable
				}
				ignoreLabel := nm.Spec.DrainLabelPolicy == nodemaintv1alpha1.DrainLabelPolicyIgnore
				preflightErr := runPreflight(ctx, o, c, &t, budget, ignoreLabel, "")
				var exit *exitError
				if preflightErr != nil && !errors.As(preflightErr, &exit) {
					return preflightErr
				}
				how := "client"
				if dryRun == cmdutil.DryRunServer {
					how = "server"
				}
				fmt.Fprintf(o.streams.Out, "nodemaintenance.nodemaint.dev/%s: %s (%s dry run)\n", nm.Name, verbPast(verb, nm), how)
				return preflightErr
			}
			nm, err := applyMaintenance(ctx, c, &t, cordon, drain, reason, responseTimeout, &roll, cmdutil.DryRunNone)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "nodemaintenance.nodemaint.dev/%s: %s\n", nm.Name, verbPast(verb, nm))
			if !drain || !wait {
				return nil
			}
			return follow(ctx, o, c, nm.Name, timeout)
		},
	}
	t.addFlags(cmd)
	o.completeNames(cmd, true)
	cmd.Flags().StringVar(&reason, "reason", "", "Why the nodes are maintained; pods' owners see it in the EvacuationRequest condition")
	if drain {
		cmd.Flags().BoolVar(&wait, "wait", true, "Follow the drain until the nodes are drained (a rollout: until every node was released)")
		cmd.Flags().DurationVar(&timeout, "timeout", 0, "How long to wait for the drain (0: no limit); the drain goes on after a time-out")
		cmd.Flags().DurationVar(&responseTimeout, "response-timeout", 0, "How long pod owners have to accept an evacuation before their pods are evicted (default: the NodeMaintenance's, 3m)")
		roll.addFlags(cmd)
		kubectl.addFlags(cmd)
	}
	return cmd
}

func verbPast(verb string, nm *nodemaintv1alpha1.NodeMaintenance) string {
	switch {
	case verb == "plan":
		return "planned"
	case verb == "cordon":
		return "cordoned"
	case nm.Spec.Rollout != nil:
		return "rolling, " + rolloutPlan(nm)
	}
	return "draining"
}

// applyMaintenance creates the target's NodeMaintenance, or updates the one that exists: running
// a command again is idempotent. The rollout flags (drain only; nil otherwise) set the fields of
// spec.rollout they give. dryRun client writes nothing, server sends the write as a dry run
// (validated, not stored); either returns the object as it would be.
func applyMaintenance(ctx context.Context, c client.Client, t *target, cordon, drain bool, reason string, responseTimeout time.Duration, roll *rolloutFlags, dryRun cmdutil.DryRunStrategy) (*nodemaintv1alpha1.NodeMaintenance, error) {
	var create []client.CreateOption
	var patch []client.PatchOption
	if dryRun == cmdutil.DryRunServer {
		create, patch = []client.CreateOption{client.DryRunAll}, []client.PatchOption{client.DryRunAll}
	}
	sel, err := t.nodeSelector()
	if err != nil {
		return nil, err
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	err = c.Get(ctx, client.ObjectKey{Name: t.Name()}, nm)
	switch {
	case apierrors.IsNotFound(err):
		nm = &nodemaintv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: t.Name(), Labels: map[string]string{managedByLabel: managedByPlugin}},
			Spec:       nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: sel, Cordon: cordon, Drain: drain, Reason: reason},
		}
		if responseTimeout > 0 {
			nm.Spec.EvacuationResponseTimeout = &nodemaintv1alpha1.Duration{Duration: responseTimeout}
		}
		if roll != nil {
			if nm.Spec.Rollout, err = roll.apply(nil); err != nil {
				return nil, err
			}
		}
		if dryRun == cmdutil.DryRunClient {
			return nm, nil
		}
		return nm, c.Create(ctx, nm, create...)
	case err != nil:
		return nil, err
	}
	orig := nm.DeepCopy()
	if roll != nil {
		if nm.Spec.Rollout, err = roll.apply(nm.Spec.Rollout); err != nil {
			return nil, fmt.Errorf("NodeMaintenance %s: %w", nm.Name, err)
		}
	}
	nm.Spec.NodeSelector, nm.Spec.Cordon, nm.Spec.Drain = sel, cordon, drain
	if reason != "" {
		nm.Spec.Reason = reason
	}
	if responseTimeout > 0 {
		nm.Spec.EvacuationResponseTimeout = &nodemaintv1alpha1.Duration{Duration: responseTimeout}
	}
	if dryRun == cmdutil.DryRunClient {
		return nm, nil
	}
	return nm, c.Patch(ctx, nm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), patch...)
}

// managedByLabel with the value managedByPlugin marks the NodeMaintenances the plugin created,
// which complete deletes.
const (
	managedByLabel  = "app.kubernetes.io/managed-by"
	managedByPlugin = "kubectl-maintenance"
)

// newCompleteCommand sets cordon and drain back to false: Maintenance Complete. Of nodes in
// their turn in a rollout with release Manual, it completes their turn instead (see
// completeTurns).
func newCompleteCommand(o *options, verb, short string) *cobra.Command {
	var (
		t     target
		del   bool
		keep  bool
		rolls string
	)
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
			if rolls != "" && (t.name != "" || t.selector != "" || del || keep || len(args) == 0) {
				return usageError(cmd, errors.New("--maintenance completes the turns of named nodes: name them, without --name, -l, --delete or --keep"))
			}
			if del && keep {
				return usageError(cmd, errors.New("--delete and --keep: choose one"))
			}
			if t.name == "" {
				if err := t.complete(args); err != nil {
					return usageError(cmd, err)
				}
			}
			c, _, err := o.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if t.name == "" && t.selector == "" && !del {
				if done, err := completeTurns(ctx, o, c, &t, rolls); done || err != nil {
					return err
				}
			}
			nm := &nodemaintv1alpha1.NodeMaintenance{}
			if err := c.Get(ctx, client.ObjectKey{Name: t.Name()}, nm); err != nil {
				if apierrors.IsNotFound(err) {
					if t.name == "" && t.selector == "" {
						if err := t.check(ctx, c); err != nil {
							return err // a typo in a node name
						}
					}
					return fmt.Errorf("no NodeMaintenance %s: nothing to complete", t.Name())
				}
				return err
			}
			if del || !keep && nm.Labels[managedByLabel] == managedByPlugin {
				// Only the object as read goes: one created again since under the same name stays.
				if err := c.Delete(ctx, nm, client.Preconditions{UID: &nm.UID}); client.IgnoreNotFound(err) != nil {
					return err
				}
				fmt.Fprintf(o.streams.Out, "nodemaintenance.nodemaint.dev/%s: deleted\n", nm.Name)
				return nil
			}
			orig := nm.DeepCopy()
			nm.Spec.Cordon, nm.Spec.Drain = false, false
			if err := c.Patch(ctx, nm, client.MergeFrom(orig)); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "nodemaintenance.nodemaint.dev/%s: complete\n", nm.Name)
			return nil
		},
	}
	t.addFlags(cmd)
	cmd.Flags().BoolVar(&del, "delete", false, "Delete the NodeMaintenance (which completes it too), whoever created it")
	cmd.Flags().BoolVar(&keep, "keep", false, "Keep a NodeMaintenance that kubectl maintenance created, with cordon and drain false (default: delete it)")
	cmd.Flags().StringVar(&rolls, "maintenance", "", "Complete the named nodes' turn in this rollout (release Manual); default: the rollout the nodes are in")
	o.completeNames(cmd, true)
	return cmd
}

// completeTurns completes the named nodes' turns in their rollouts. done is false when no
// rollout is named and none of the nodes is in one: complete then completes the NodeMaintenance
// named after the nodes (which may outlive its nodes). Unknown nodes are refused, and nothing
// changes unless every node's turn can be completed.
func completeTurns(ctx context.Context, o *options, c client.Client, t *target, named string) (done bool, err error) {
	if named != "" {
		if err := t.check(ctx, c); err != nil {
			return true, err
		}
	}
	nodes := make([]*corev1.Node, 0, len(t.nodes))
	missing := false
	for _, name := range t.nodes {
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
		return true, t.check(ctx, c) // names the unknown nodes
	case err != nil:
		return true, err
	}
	for _, line := range already {
		fmt.Fprintln(o.streams.Out, line)
	}
	for _, turn := range turns {
		if err := completeTurn(ctx, c, o.streams.Out, turn); err != nil {
			return true, err
		}
	}
	return true, nil
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

// drained reports whether the NodeMaintenance is drained, with the status it saw.
func drained(nm *nodemaintv1alpha1.NodeMaintenance) bool {
	return nm.Status.ObservedGeneration == nm.Generation &&
		meta.IsStatusConditionTrue(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
}
