// Package cli is kubectl-maintenance, the kubectl plugin of nodemaint: it creates and edits
// NodeMaintenances, follows their progress, and names what blocks a drain. This package is the
// root command, which wires the commands of its sub-packages, and the version command:
//
//   - phase: plan, cordon and drain (with drain's rollout flags, kubectl drain's flags, its
//     --dry-run and its classic fallback);
//   - complete: complete, of a whole maintenance or of nodes' turns in a rollout, and uncordon
//     (kubectl's, which ends the maintenance the plugin made for the node);
//   - preflight: what a drain of the nodes would meet, before anything moves;
//   - status: status and list;
//   - cleanup: restore what nodemaint changed, without the controller;
//
// and what they share: clioptions (kubeconfig flags, streams, clients, exit codes, name
// completion), target (the nodes a command is about) and progress (the views of a maintenance's
// progress, and following it).
package cli

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/logs"

	"github.com/nodemaint/nodemaint/internal/cli/cleanup"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/complete"
	"github.com/nodemaint/nodemaint/internal/cli/phase"
	"github.com/nodemaint/nodemaint/internal/cli/preflight"
	"github.com/nodemaint/nodemaint/internal/cli/status"
	"github.com/nodemaint/nodemaint/internal/version"
)

// ExitCode is the process exit code for an error returned by the command (see
// clioptions.ExitOK and the others).
func ExitCode(err error) int { return clioptions.ExitCode(err) }

// NewCommand returns the kubectl-maintenance command.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := clioptions.NewOptions(streams)
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
	o.Config.AddFlags(cmd.PersistentFlags())
	// kubectl's logging flags: -v/--v N (klog's verbosity: -v=6 logs every request), --vmodule.
	// They come before cobra adds --version, which then has no -v.
	logs.AddFlags(cmd.PersistentFlags())
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.AddCommand(
		phase.NewCommand(o, "plan", "Announce maintenance of nodes (Planning): a PreferNoSchedule taint, nothing else", false, false),
		phase.NewCommand(o, "cordon", "Cordon nodes through a NodeMaintenance", true, false),
		phase.NewCommand(o, "drain", "Cordon and drain nodes through a NodeMaintenance, and follow the drain", true, true),
		complete.NewCommand(o, "complete", "Complete the maintenance of nodes: restore what nodemaint changed"),
		complete.NewUncordonCommand(o),
		preflight.NewCommand(o),
		status.NewStatusCommand(o),
		status.NewListCommand(o),
		cleanup.NewCommand(o),
		newVersionCommand(),
		newCompletionCommand(),
	)
	return cmd
}
