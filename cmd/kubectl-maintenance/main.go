// Command kubectl-maintenance is the kubectl plugin for nodemaint: `kubectl maintenance ...`.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "kubectl maintenance: not yet implemented; create a NodeMaintenance with kubectl apply")
	os.Exit(1)
}
