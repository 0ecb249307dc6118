// Package preflight holds `kubectl maintenance preflight`: it reads what a drain of the nodes
// would meet, with internal/drainpreflight, before anything moves, and prints it (a table per node,
// JSON or YAML) with the exit code 2 when something would block the drain. Run does the same for
// drain --dry-run.
package preflight

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/target"
	"github.com/nodemaint/nodemaint/internal/drainpreflight"
)

// longHelp is `kubectl maintenance preflight --help`'s description.
const longHelp = `preflight lists, per node, what a drain of the nodes would meet, before anything moves:

  Blocks  the drain would not finish by itself: a PodDisruptionBudget that allows no
          disruption now covers a pod that would be evicted (BudgetBlocked, saying why:
          unhealthy pods, or minAvailable as many as its pods / maxUnavailable 0), the
          nodes out at once hold more of a budget's evicted pods than it allows
          (BudgetExceededByTurn), a single-pod workload nothing surges under such a budget
          (CannotSurge), control-plane nodes out together (ControlPlaneTogether), a pod
          under several budgets, a DrainRule that does not parse; in a rollout
          (--max-unavailable), a replacement that fits on no other node, which halts it
  Loses   the drain goes through, but something is lost: bare pods (never recreated),
          pods whose replacement fits on no other node (it stays Pending), emptyDir data,
          single-pod workloads nothing surges (CannotSurge: no responder, maxSurge 0, or
          a required hostname anti-affinity that leaves no node), workloads that cannot
          surge and have all their pods on nodes out at once
  Info    what happens to the rest: Deployments that surge, workloads evicted within
          their budgets, pods skipped (DrainRules, the nodemaint.dev/drain label, a
          toleration of the unschedulable taint) or waited for, and why

Whether a replacement fits is checked against every other node that stays schedulable: node
selector and required node affinity, taints and tolerations, cordons, the node affinity of
bound volumes, and resource requests against the node's allocatable less the requests of the
pods already there. With --max-unavailable N, N of the nodes are out at once: each node is
checked with the N-1 fullest others out with it. Without it, all of them are out at once, as
'kubectl maintenance drain' takes them. Pod (anti-)affinity (but a required anti-affinity on
the hostname of a single-pod workload), topology spread constraints and host ports are not
checked.

The line after the assumption is the deadlock forecast: the findings a rollout with
spec.rollout.preflight Block does not start on (BudgetBlocked, BudgetExceededByTurn,
ControlPlaneTogether, and CannotSurge where a budget forbids the eviction).

It only lists objects (nodes, pods, PodDisruptionBudgets, Deployments, ReplicaSets,
StatefulSets, HorizontalPodAutoscalers, PersistentVolumeClaims, PersistentVolumes,
namespaces, DrainRules) and changes nothing.

Exit codes: 0 the drain would go through, 2 something would block it, 1 error.`

// NewCommand is `kubectl maintenance preflight`: it says, before anything moves, what a drain of
// the nodes would meet. It only reads (list), so a user who may only read the cluster can run it.
func NewCommand(o *clioptions.Options) *cobra.Command {
	var (
		t                target.Target
		maxUnavailable   string
		drainLabelPolicy string
		podSelector      string
	)
	print := clioptions.NewDataPrintFlags()
	cmd := &cobra.Command{
		Use:   "preflight (NODE... | -l SELECTOR) [--max-unavailable N]",
		Short: "Say what would block or be lost if the nodes were drained, before anything moves",
		Long:  longHelp,
		Example: `  # What would a drain of node-1 meet?
  kubectl maintenance preflight node-1

  # A pool, two nodes at a time, as JSON for a script
  kubectl maintenance preflight -l pool=a --max-unavailable 2 -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := t.Complete(args); err != nil {
				return clioptions.UsageError(cmd, err)
			}
			if err := clioptions.CheckOutput(print); err != nil {
				return clioptions.UsageError(cmd, err)
			}
			how, err := drainOf(drainLabelPolicy, podSelector)
			if err != nil {
				return clioptions.UsageError(cmd, err)
			}
			var budget *intstr.IntOrString
			if maxUnavailable != "" {
				v := intstr.Parse(maxUnavailable)
				if _, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, false); err != nil || v.IntValue() < 0 || (v.Type == intstr.String && strings.HasPrefix(v.StrVal, "-")) {
					return clioptions.UsageError(cmd, fmt.Errorf("--max-unavailable %q: want a number of nodes or a percentage (e.g. 2 or 25%%)", maxUnavailable))
				}
				budget = &v
			}
			c, _, err := o.Clients()
			if err != nil {
				return err
			}
			return Run(cmd.Context(), o.Streams, c, &t, budget, how, print)
		},
	}
	cmd.Flags().StringVarP(&t.Selector, "selector", "l", "", "Label selector of the nodes, instead of names")
	cmd.Flags().StringVar(&maxUnavailable, "max-unavailable", "", "How many of the nodes are out at once, a number or a percentage, as a rollout's maxUnavailable (default: all of them)")
	print.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "Output format: json, yaml, jsonpath=..., go-template=... (default: a table per node)"
	cmd.Flags().StringVar(&drainLabelPolicy, "drain-label-policy", string(nodemaintv1alpha1.DrainLabelPolicyHonor), "Whether the pod label nodemaint.dev/drain counts (Honor) or not (Ignore), as the NodeMaintenance's drainLabelPolicy")
	cmd.Flags().StringVar(&podSelector, "pod-selector", "", "Only the pods this label selector selects are drained, as with drain --pod-selector (the NodeMaintenance's podSelector); the others are reported skipped")
	o.CompleteNames(cmd, true)
	return cmd
}

// Drain is how the drain the preflight predicts treats the pods, as a NodeMaintenance's spec says.
type Drain struct {
	// IgnoreDrainLabel: drainLabelPolicy Ignore.
	IgnoreDrainLabel bool
	// PodSelector is spec.podSelector: the pods it does not select stay. Nil: every pod.
	PodSelector labels.Selector
}

// drainOf reads --drain-label-policy and --pod-selector.
func drainOf(drainLabelPolicy, podSelector string) (Drain, error) {
	var how Drain
	switch nodemaintv1alpha1.DrainLabelPolicy(drainLabelPolicy) {
	case nodemaintv1alpha1.DrainLabelPolicyHonor:
	case nodemaintv1alpha1.DrainLabelPolicyIgnore:
		how.IgnoreDrainLabel = true
	default:
		return how, fmt.Errorf("--drain-label-policy %q: want %s or %s", drainLabelPolicy, nodemaintv1alpha1.DrainLabelPolicyHonor, nodemaintv1alpha1.DrainLabelPolicyIgnore)
	}
	sel, err := clioptions.ParsePodSelector(podSelector)
	if err != nil || sel == nil {
		return how, err
	}
	how.PodSelector, err = metav1.LabelSelectorAsSelector(sel)
	return how, err
}

// printPreflight prints the report: as -o says (json, yaml, jsonpath...: print, through
// cli-runtime's printers), or as the assumption and a table per node (print nil, or no -o).
func printPreflight(w io.Writer, r *drainpreflight.Report, print *genericclioptions.PrintFlags) error {
	if print != nil && clioptions.CheckOutput(print) == nil && (*print.OutputFormat != "" || print.TemplatePrinterFlags.TemplateArgument != nil && *print.TemplatePrinterFlags.TemplateArgument != "") {
		return clioptions.PrintData(print, r, w)
	}
	fmt.Fprintf(w, "Assuming %s.\n", r.Assumption)
	if r.NotPlaced != "" {
		fmt.Fprintf(w, "Note: %s.\n", r.NotPlaced)
	}
	fmt.Fprintln(w, deadlockForecast(r))
	for _, n := range r.Nodes {
		verdict := "nothing to report: the drain would go through"
		switch n.Verdict {
		case drainpreflight.Blocks:
			verdict = "the drain would be BLOCKED"
		case drainpreflight.Loses:
			verdict = "the drain would go through, and LOSE something"
		case drainpreflight.Info:
			verdict = "the drain would go through"
		}
		fmt.Fprintf(w, "\n%s: %s (%d pods targeted: %d moved, %d skipped)", n.Name, verdict, n.Targeted, n.Moved, n.Skipped)
		if len(n.OutWith) > 0 {
			fmt.Fprintf(w, "; checked with %s out at once", strings.Join(n.OutWith, ", "))
		}
		fmt.Fprintln(w)
		if len(n.Findings) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SEVERITY\tREASON\tPODS\tWHY")
		for _, f := range n.Findings {
			why := f.Message
			if f.Object != "" {
				why = f.Object + ": " + why
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Severity, f.Reason, podList(f.Pods), why)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// deadlockForecast says in a line what the deadlock forecast found: the findings that would
// hold the drain for good, which a rollout with spec.rollout.preflight Block does not start on.
func deadlockForecast(r *drainpreflight.Report) string {
	if r.Deadlocks == 0 {
		return "Deadlock forecast: none (no budget that allows no disruption or that a turn exceeds, no single-pod workload that nothing surges under such a budget, no control-plane nodes out together)."
	}
	counts := map[string]int{}
	var reasons []string
	for _, n := range r.Nodes {
		for _, f := range n.Findings {
			if f.Severity != drainpreflight.Blocks || !nodemaintv1alpha1.DeadlockReason(f.Reason) {
				continue
			}
			if counts[f.Reason] == 0 {
				reasons = append(reasons, f.Reason)
			}
			counts[f.Reason]++
		}
	}
	sort.Strings(reasons)
	parts := make([]string, len(reasons))
	for i, reason := range reasons {
		parts[i] = fmt.Sprintf("%d %s", counts[reason], reason)
	}
	return fmt.Sprintf("Deadlock forecast: %d %s (%s): the drain would wait on them for good; a rollout with spec.rollout.preflight Block does not start.",
		r.Deadlocks, map[bool]string{true: "finding", false: "findings"}[r.Deadlocks == 1], strings.Join(parts, ", "))
}

// podList names up to three pods, and how many more.
func podList(pods []string) string {
	const most = 3
	if len(pods) <= most {
		return strings.Join(pods, ",")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pods[:most], ","), len(pods)-most)
}

// Run reads the cluster, computes the preflight of the target's nodes (budget: a rollout's
// maxUnavailable, nil for all at once) for a drain that treats the pods as how says, prints it
// (print: -o's flags; nil for the table), and returns an error with the exit code clioptions.ExitBlocked when
// the drain would be blocked.
func Run(ctx context.Context, streams genericiooptions.IOStreams, c client.Reader, t *target.Target, budget *intstr.IntOrString, how Drain, print *genericclioptions.PrintFlags) error {
	in, err := Read(ctx, c, streams.ErrOut)
	if err != nil {
		return err
	}
	in.IgnoreDrainLabel, in.PodSelector = how.IgnoreDrainLabel, how.PodSelector
	if in.Targets, err = t.Resolve(in.Nodes); err != nil {
		return err
	}
	if budget != nil {
		n, _ := intstr.GetScaledValueFromIntOrPercent(budget, len(in.Targets), false)
		in.MaxUnavailable = max(n, 1) // a rollout's budget is at least one node
	}
	report := drainpreflight.Run(in)
	if err := printPreflight(streams.Out, &report, print); err != nil {
		return err
	}
	if report.Blocks() {
		blocked := 0
		for _, n := range report.Nodes {
			if n.Verdict == drainpreflight.Blocks {
				blocked++
			}
		}
		return &clioptions.ExitCodeError{Code: clioptions.ExitBlocked, Err: fmt.Errorf("the drain would be blocked on %d of %d nodes", blocked, len(report.Nodes))}
	}
	return nil
}
