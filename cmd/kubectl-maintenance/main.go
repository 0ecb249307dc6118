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

	"github.com/nodemaint/nodemaint/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	os.Exit(cli.ExitCode(err))
}
