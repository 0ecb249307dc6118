// Package chaos_test runs node maintenances while things go wrong, and checks with the invariant
// checker (test/invariants) that nodemaint keeps its promises throughout:
//
//   - TestChaos: a maintenance of many nodes and every kind of workload while a driver SIGKILLs
//     the leader of two controller replicas again and again (20 times, 40 in the long run, plus
//     one), each kill aimed at a write window (windows_test.go) and each a failover to the other
//     replica, restarts the API server once, and creates and deletes overlapping
//     NodeMaintenances. `make test` runs a short version; NODEMAINT_CHAOS=long
//     (`make test-chaos`) the long one. NODEMAINT_CHAOS_SEED replays a run's random choices.
//   - TestCheckerSeesBreachHiddenInGap: the checker's own connections are cut while a budget is
//     breached and healed; it reports the breach once it reconnects.
//   - TestLoad: 50 NodeMaintenances created at once over 500 nodes (NODEMAINT_E2E_LOAD=1,
//     `make test-load`); skipped otherwise.
package chaos_test

import (
	"os"
	"testing"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// The cluster's size, set by TestMain from the environment.
var (
	long     = os.Getenv("NODEMAINT_CHAOS") == "long"
	loadTest = os.Getenv("NODEMAINT_E2E_LOAD") != ""
)

func TestMain(m *testing.M) {
	nodes := 16
	switch {
	case loadTest:
		nodes = loadNodes
	case long:
		nodes = 30
	}
	os.Exit(framework.Run(m, framework.Options{Nodes: nodes}))
}
