// Command kubectl-maintenance is the kubectl plugin of nodemaint: `kubectl maintenance ...`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// The IANA time zone database, so that maintenance windows' time zones
	// (spec.rollout.window.timeZone) resolve where the host or image has no /usr/share/zoneinfo.
	_ "time/tzdata"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/cli"

	plugin "github.com/nodemaint/nodemaint/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	cmd.SetContext(ctx)
	// As kubectl runs: component-base's runner sets up klog from -v/--v and --vmodule once the
	// flags are parsed, and flushes it on the way out.
	err := cli.RunNoErrOutput(cmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	os.Exit(plugin.ExitCode(err))
}
