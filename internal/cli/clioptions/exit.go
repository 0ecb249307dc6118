package clioptions

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// Exit codes a script can rely on.
const (
	ExitOK       = 0
	ExitError    = 1
	ExitBlocked  = 2 // preflight: the drain of some node would be blocked
	ExitTimedOut = 3 // --wait ran out of --timeout before the maintenance reached its goal
)

// ExitCodeError carries an exit code.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }

// ExitCode is the process exit code for an error returned by a command.
func ExitCode(err error) int {
	var e *ExitCodeError
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return ExitError
	}
	return ExitOK
}

// UsageError is err, followed by where to read how the command is used.
func UsageError(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w\nSee '%s --help'", err, cmd.CommandPath())
}
