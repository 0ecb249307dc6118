package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// completionHelper is kubectl_complete-maintenance, as hack/plugin has it: kubectl (1.26 and
// later) runs it, found on the PATH, to complete `kubectl maintenance <TAB>` within kubectl's
// own completion, whatever the shell.
const completionHelper = `#!/bin/sh
# kubectl (1.26 and later) runs kubectl_complete-maintenance, found on the PATH, to complete
# ` + "`kubectl maintenance <TAB>`" + `: node and NodeMaintenance names, flags, subcommands.
exec kubectl-maintenance __complete "$@"
`

// newCompletionCommand replaces cobra's completion command, whose scripts complete a command
// named kubectl-maintenance, which nobody types: kubectl completes its plugins itself, asking
// an executable kubectl_complete-maintenance on the PATH, so that is what this prints.
func newCompletionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion [bash|zsh|fish|powershell]",
		Short: "Print kubectl_complete-maintenance, with which kubectl completes `kubectl maintenance <TAB>`",
		Long: `kubectl (1.26 and later) completes the commands of a plugin within its own completion
(kubectl completion bash|zsh|fish|powershell): for ` + "`kubectl maintenance <TAB>`" + ` it runs the
executable kubectl_complete-maintenance found on the PATH. This command prints that executable,
the same for every shell; the plugin's release archive carries it too.`,
		Example: `  # Once: kubectl's own completion, and the plugin's helper beside the plugin
  source <(kubectl completion bash)
  kubectl maintenance completion bash > ~/.local/bin/kubectl_complete-maintenance
  chmod +x ~/.local/bin/kubectl_complete-maintenance`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				switch args[0] {
				case "bash", "zsh", "fish", "powershell":
				default:
					return fmt.Errorf("shell %q: want bash, zsh, fish or powershell", args[0])
				}
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), completionHelper)
			return err
		},
	}
}
