// Package combinations_test runs nodemaint's features together rather than one by one, and
// checks with the invariant checker (test/invariants) that every promise holds in every
// combination (issue 29).
//
// TestCombinations draws scenarios from a seeded generator (scenario_test.go): each scenario is
// a lane of the cluster's nodes, a zoo of workloads pinned to them (Deployments with and without
// room to surge, HPA-managed, maxSurge 0, StatefulSets, bare pods, Jobs, skip and
// wait-completed labels, DrainRules, budgets that never allow a disruption, required
// anti-affinity that leaves no room, local storage) and overlapping NodeMaintenances drawn from
// the whole spec space (SignalOnly or Evict, Report or Delete, Honor or Ignore, rollouts, with
// and without haltOnAlerts), whose cordon, drain and policy are switched on and off while they
// run; the controllers read their alerts from a stand-in Prometheus whose alert fires and clears,
// and which answers with warnings or not at all, on the batch's timeline. Some lanes have a
// Cluster API Machine of one of their nodes deleted while their maintenances run (the Machine's
// own node, a node of another providerID, or none: see machines_test.go), whose pre-drain hook
// the checker judges; batches take the two topologies in turn: self-hosted (--cluster-api-self)
// and a management cluster of the package's (a kube-apiserver of its own, started once in the
// background, its controller reaching this cluster through the kubeconfig Secret). A batch runs its lanes side by
// side under one evacuation protocol (the cluster serves the EvictionRequest API; batches take
// pod-conditions and eviction-request in turn) while the leader of two controller replicas is
// killed; then every maintenance is deleted and nothing of nodemaint's may be left. A violation
// fails the test with its batch's seed: NODEMAINT_COMBINATIONS_SEED=<seed>
// NODEMAINT_COMBINATIONS_BATCHES=1 draws that batch again.
//
// `make test` runs the short version (2 batches of 4 scenarios, about 5 minutes);
// NODEMAINT_COMBINATIONS=long (`make test-combinations`) the long one: 4 batches of 26
// scenarios, each long enough for drainTimeoutAction Delete (whose drainTimeout is at least 5m)
// to act.
package combinations_test

import (
	"os"
	"testing"
	"time"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// runSize is the size of a run: batches of lanes scenarios each, of nodesPerLane nodes.
type runSize struct {
	batches, lanes, nodesPerLane int
	// span is how long a batch's maintenances run before they are deleted; edits and kills
	// land within it.
	span time.Duration
	// kills is the number of leader kills per batch.
	kills int
}

var (
	shortRun = runSize{batches: 2, lanes: 4, nodesPerLane: 3, span: 50 * time.Second, kills: 2}
	longRun  = runSize{batches: 4, lanes: 26, nodesPerLane: 3, span: 6*time.Minute + 30*time.Second, kills: 8}
)

var long = os.Getenv("NODEMAINT_COMBINATIONS") == "long"

func size() runSize {
	if long {
		return longRun
	}
	return shortRun
}

func TestMain(m *testing.M) {
	s := size()
	// Both protocols on one cluster: it serves the EvictionRequest API, and each batch's
	// controllers are started with the protocol of the batch.
	os.Exit(framework.Run(m, framework.Options{Nodes: s.lanes * s.nodesPerLane, EvictionRequestAPI: true}))
}
