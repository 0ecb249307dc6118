package phase

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/preflight"
	"github.com/nodemaint/nodemaint/internal/cli/progress"
	"github.com/nodemaint/nodemaint/internal/cli/target"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// NewCommand is plan, cordon and drain: create or update the NodeMaintenance of the target with
// the given cordon and drain, and follow it.
func NewCommand(o *clioptions.Options, verb, short string, cordon, drain bool) *cobra.Command {
	po := &phaseOptions{Options: o, verb: verb, cordon: cordon, drain: drain}
	cmd := &cobra.Command{
		Use:     verb + " (NODE... | -l SELECTOR)",
		Short:   short,
		Example: example(verb, drain),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := po.Complete(cmd, args); err != nil {
				return err
			}
			if err := po.Validate(cmd); err != nil {
				return err
			}
			return po.Run(cmd.Context())
		},
	}
	po.target.AddFlags(cmd)
	o.CompleteNames(cmd, true)
	cmd.Flags().StringVar(&po.reason, "reason", "", "Why the nodes are maintained; pods' owners see it in the EvacuationRequest condition")
	if drain {
		cmd.Flags().BoolVar(&po.wait, "wait", true, "Follow the drain until the nodes are drained (a rollout: until every node was released)")
		cmd.Flags().DurationVar(&po.timeout, "timeout", 0, "How long to wait for the drain (0: no limit); the drain goes on after a time-out")
		cmd.Flags().DurationVar(&po.responseTimeout, "response-timeout", 0, "How long pod owners have to accept an evacuation before their pods are evicted (default: the NodeMaintenance's, 3m)")
		cmd.Flags().BoolVar(&po.classicFallback, "classic-fallback", false, "On a cluster without nodemaint (no NodeMaintenance API: nodemaint not installed, or the wrong context), drain as kubectl drain does (cordon, evict every pod, --force and kubectl drain's other flags as kubectl takes them) instead of failing")
		po.roll.addFlags(cmd)
		po.kubectl.addFlags(cmd)
	}
	clioptions.AddDryRunFlag(cmd, dryRunUsage(drain))
	return cmd
}

// dryRunUsage is --dry-run's help: drain's dry run prints the preflight too.
func dryRunUsage(drain bool) string {
	if drain {
		return `"none", "client" (print the preflight and the NodeMaintenance, write nothing) or "server" (the same, and send the NodeMaintenance to the API server as a dry run: validated, not stored)`
	}
	return `"none", "client" (print the NodeMaintenance it would write, write nothing) or "server" (send it to the API server as a dry run: validated, not stored)`
}

// example is the help's examples of the verb; drain's show a rollout too.
func example(verb string, drain bool) string {
	example := fmt.Sprintf(`  # %[1]s one node
  kubectl maintenance %[1]s node-1 --reason "kernel upgrade"

  # %[1]s every node of a rack
  kubectl maintenance %[1]s -l topology.example.com/rack=7`, verb)
	if drain {
		example += `

  # A kubectl drain line: only the pods labelled app=batch, each given 30s to stop
  kubectl maintenance drain node-1 --ignore-daemonsets --pod-selector app=batch --grace-period 30

  # Roll through a node pool two nodes at a time; a node's turn ends once it rebooted
  kubectl maintenance drain -l pool=a --max-unavailable 2 --release rebooted

  # One node at a time, starting only on weeknights from 22:00 Berlin time for 4 hours
  kubectl maintenance drain -l pool=a --max-unavailable 1 --release manual \
    --window-schedule "0 22 * * 1-5" --window-duration 4h --window-time-zone Europe/Berlin`
	}
	return example
}

// phaseOptions are those of plan, cordon or drain: what the verb sets, its flags, and what
// Complete reads from the cluster.
type phaseOptions struct {
	*clioptions.Options
	verb          string
	cordon, drain bool

	target          target.Target
	reason          string
	wait            bool
	timeout         time.Duration
	responseTimeout time.Duration
	roll            rolloutFlags
	kubectl         kubectlDrainFlags

	classicFallback bool // --classic-fallback

	c       client.WithWatch
	cs      kubernetes.Interface
	dryRun  cmdutil.DryRunStrategy
	classic bool // drain on a cluster without the NodeMaintenance API, with --classic-fallback: kubectl drain's way
}

// Complete reads --dry-run and the nodes from the arguments and checks that they exist, and
// whether the cluster serves NodeMaintenances: on one that does not (nodemaint is not installed,
// or the kubeconfig names another cluster than meant), drain falls back to kubectl drain's way
// only when --classic-fallback asks for it.
func (o *phaseOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.target.Complete(args); err != nil {
		return clioptions.UsageError(cmd, err)
	}
	var err error
	if o.dryRun, err = clioptions.DryRun(cmd); err != nil {
		return err
	}
	if o.c, o.cs, err = o.Clients(); err != nil {
		return err
	}
	if err := o.target.Check(cmd.Context(), o.c); err != nil {
		return err
	}
	ok, err := hasNodeMaintenanceAPI(o.cs)
	switch {
	case err != nil:
		return err
	case ok:
		return nil
	case !o.drain || !o.classicFallback:
		server := ""
		if cfg, err := o.Config.ToRESTConfig(); err == nil {
			server = " at " + cfg.Host
		}
		how := "install nodemaint, or check that your kubeconfig's context is the cluster you mean"
		if o.drain {
			how += "; to drain as kubectl drain does (every pod evicted, --force honoured), add --classic-fallback"
		}
		return fmt.Errorf("the cluster%s serves no NodeMaintenance API (%s): %s; nothing changed", server, nodemaintv1alpha1.GroupVersion, how)
	}
	o.classic = true
	return nil
}

// Validate refuses the flags the drain cannot honour: the rollout flags in the classic drain,
// and kubectl drain's flags that nodemaint does not do.
func (o *phaseOptions) Validate(cmd *cobra.Command) error {
	switch {
	case !o.drain:
		return nil
	case o.classic:
		if o.roll.given() {
			return errors.New("this cluster has no NodeMaintenance API (nodemaint.dev/v1alpha1): the classic drain cannot roll through the nodes; install nodemaint, or drain without the rollout flags")
		}
		return nil
	}
	if err := o.kubectl.check(); err != nil {
		return clioptions.UsageError(cmd, err)
	}
	return nil
}

// Run writes the NodeMaintenance and, for drain with --wait, follows it; or drains the classic
// way; or, with --dry-run, says what it would do.
func (o *phaseOptions) Run(ctx context.Context) error {
	switch {
	case o.classic:
		fmt.Fprintln(o.Streams.ErrOut, "Warning: this cluster has no NodeMaintenance API (nodemaint.dev/v1alpha1); --classic-fallback: draining as kubectl drain does, evicting every pod without asking its owner")
		return o.classicDrain(ctx)
	case o.dryRun != cmdutil.DryRunNone:
		return o.runDryRun(ctx)
	}
	nm, err := applyMaintenance(ctx, o.c, &o.target, o.cordon, o.drain, o.edits(), cmdutil.DryRunNone)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Streams.Out, "nodemaintenance.nodemaint.dev/%s: %s\n", nm.Name, verbPast(o.verb, nm))
	if !o.drain || !o.wait {
		return nil
	}
	return progress.Follow(ctx, o.Streams.Out, o.c, nm.Name, o.timeout)
}

// runDryRun prints what the drain would meet, then the NodeMaintenance it would write. It
// returns the preflight's error, with its exit code, when the drain would be blocked.
func (o *phaseOptions) runDryRun(ctx context.Context) error {
	nm, err := applyMaintenance(ctx, o.c, &o.target, o.cordon, o.drain, o.edits(), o.dryRun)
	if err != nil {
		return err
	}
	dry := clioptions.DryRunName(o.dryRun)
	if !o.drain {
		fmt.Fprintf(o.Streams.Out, "nodemaintenance.nodemaint.dev/%s: %s (%s dry run)\n", nm.Name, verbPast(o.verb, nm), dry)
		return nil
	}
	var budget *intstr.IntOrString
	if nm.Spec.Rollout != nil {
		budget = nm.Spec.Rollout.MaxUnavailable
	}
	how := preflight.Drain{IgnoreDrainLabel: nm.Spec.DrainLabelPolicy == nodemaintv1alpha1.DrainLabelPolicyIgnore}
	if nm.Spec.PodSelector != nil {
		how.PodSelector = maintenance.PodSelector(nm)
	}
	preflightErr := preflight.Run(ctx, o.Streams, o.c, &o.target, budget, how, nil)
	var exit *clioptions.ExitCodeError
	if preflightErr != nil && !errors.As(preflightErr, &exit) {
		return preflightErr
	}
	fmt.Fprintf(o.Streams.Out, "nodemaintenance.nodemaint.dev/%s: %s (%s dry run)\n", nm.Name, verbPast(o.verb, nm), dry)
	return preflightErr
}

func verbPast(verb string, nm *nodemaintv1alpha1.NodeMaintenance) string {
	switch {
	case verb == "plan":
		return "planned"
	case verb == "cordon":
		return "cordoned"
	case nm.Spec.Rollout != nil:
		return "rolling, " + progress.RolloutPlan(nm)
	}
	return "draining"
}

// edits are what the command's flags set in the spec.
func (o *phaseOptions) edits() specEdits {
	return specEdits{reason: o.reason, responseTimeout: o.responseTimeout, roll: &o.roll, kubectl: &o.kubectl}
}

// specEdits are what a command's flags set in the spec besides the phase: the reason and the
// response timeout when given, drain's rollout flags (spec.rollout; those not given keep their
// fields) and kubectl drain's flags (spec.podSelector, spec.evictionGracePeriodSeconds, as the
// line says: kubectlDrainFlags.apply).
type specEdits struct {
	reason          string
	responseTimeout time.Duration
	roll            *rolloutFlags
	kubectl         *kubectlDrainFlags
}

// apply edits the spec as the flags say.
func (e specEdits) apply(spec *nodemaintv1alpha1.NodeMaintenanceSpec) error {
	if e.reason != "" {
		spec.Reason = e.reason
	}
	if e.responseTimeout > 0 {
		spec.EvacuationResponseTimeout = &nodemaintv1alpha1.Duration{Duration: e.responseTimeout}
	}
	if e.roll != nil {
		var err error
		if spec.Rollout, err = e.roll.apply(spec.Rollout); err != nil {
			return err
		}
	}
	if e.kubectl != nil {
		return e.kubectl.apply(spec)
	}
	return nil
}

// applyMaintenance creates the target's NodeMaintenance, or updates the one that exists: running
// a command again is idempotent. edits set the fields their flags give. dryRun client writes
// nothing, server sends the write as a dry run (validated, not stored); either returns the object
// as it would be.
func applyMaintenance(ctx context.Context, c client.Client, t *target.Target, cordon, drain bool, edits specEdits, dryRun cmdutil.DryRunStrategy) (*nodemaintv1alpha1.NodeMaintenance, error) {
	var create []client.CreateOption
	var patch []client.PatchOption
	if dryRun == cmdutil.DryRunServer {
		create, patch = []client.CreateOption{client.DryRunAll}, []client.PatchOption{client.DryRunAll}
	}
	sel, err := t.NodeSelector()
	if err != nil {
		return nil, err
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	err = c.Get(ctx, client.ObjectKey{Name: t.Name()}, nm)
	switch {
	case apierrors.IsNotFound(err):
		nm = &nodemaintv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: t.Name(), Labels: map[string]string{clioptions.ManagedByLabel: clioptions.ManagedByPlugin}},
			Spec:       nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: sel, Cordon: cordon, Drain: drain},
		}
		if err := edits.apply(&nm.Spec); err != nil {
			return nil, err
		}
		if dryRun == cmdutil.DryRunClient {
			return nm, nil
		}
		return nm, c.Create(ctx, nm, create...)
	case err != nil:
		return nil, err
	}
	orig := nm.DeepCopy()
	if err := edits.apply(&nm.Spec); err != nil {
		return nil, fmt.Errorf("NodeMaintenance %s: %w", nm.Name, err)
	}
	nm.Spec.NodeSelector, nm.Spec.Cordon, nm.Spec.Drain = sel, cordon, drain
	if dryRun == cmdutil.DryRunClient {
		return nm, nil
	}
	return nm, c.Patch(ctx, nm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), patch...)
}
