package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodemaint/nodemaint/internal/version"
)

const binaryName = "kubectl-maintenance"

// newVersionCommand is `kubectl maintenance version [-o json]`: the plugin's version and commit,
// without contacting the cluster. `kubectl maintenance --version` prints the same line.
func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit of kubectl-maintenance",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Line(binaryName))
				return err
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(version.Get())
			default:
				return fmt.Errorf("--output %q: only json is supported", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, or empty for one line")
	return cmd
}
