package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/version"
)

const binaryName = "kubectl-maintenance"

// newVersionCommand is `kubectl maintenance version [-o json|yaml|jsonpath=...]`: the plugin's
// version and commit, without contacting the cluster. `kubectl maintenance --version` prints the
// same line (-v is kubectl's verbosity).
func newVersionCommand() *cobra.Command {
	print := clioptions.NewDataPrintFlags()
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit of kubectl-maintenance",
		Args:  cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := clioptions.CheckOutput(print); err != nil {
				return clioptions.UsageError(cmd, err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if *print.OutputFormat == "" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Line(binaryName))
				return err
			}
			return clioptions.PrintData(print, version.Get(), cmd.OutOrStdout())
		},
	}
	print.AddFlags(cmd)
	return cmd
}
