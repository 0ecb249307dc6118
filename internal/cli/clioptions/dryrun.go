package clioptions

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// AddDryRunFlag adds kubectl's --dry-run to a command that writes: "none", "client" (print
// what would be written, write nothing) or "server" (send the writes as dry runs, DryRun=All:
// validated and admitted, not stored). --dry-run alone, and kubectl's old boolean forms, are
// read as kubectl reads them (DryRun): client, with kubectl's deprecation warning.
func AddDryRunFlag(cmd *cobra.Command, usage string) {
	cmdutil.AddDryRunFlag(cmd)
	if usage != "" {
		cmd.Flags().Lookup("dry-run").Usage = usage
	}
}

// DryRun is the command's --dry-run, as kubectl reads it.
func DryRun(cmd *cobra.Command) (cmdutil.DryRunStrategy, error) {
	s, err := cmdutil.GetDryRunStrategy(cmd)
	if err != nil {
		return s, UsageError(cmd, err)
	}
	return s, nil
}

// DryRunName is how the output names a dry run: "client" or "server"; "" for none.
func DryRunName(s cmdutil.DryRunStrategy) string {
	switch s {
	case cmdutil.DryRunClient:
		return "client"
	case cmdutil.DryRunServer:
		return "server"
	}
	return ""
}

// DryRunClient is c for s none; for a server dry run c whose every write is sent with
// DryRun=All; for a client dry run c whose writes are dropped (they succeed, and change nothing).
func DryRunClient(c client.WithWatch, s cmdutil.DryRunStrategy) client.Client {
	switch s {
	case cmdutil.DryRunServer:
		return client.NewDryRunClient(c)
	case cmdutil.DryRunClient:
		return interceptor.NewClient(c, interceptor.Funcs{
			Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return nil },
			Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error { return nil },
			Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return nil
			},
			Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
				return nil
			},
			Delete:      func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error { return nil },
			DeleteAllOf: func(context.Context, client.WithWatch, client.Object, ...client.DeleteAllOfOption) error { return nil },
			SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
				return nil
			},
			SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
				return nil
			},
			SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				return nil
			},
			SubResourceApply: func(context.Context, client.Client, string, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
				return nil
			},
		})
	}
	return c
}
