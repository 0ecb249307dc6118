package main

import (
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// fleetNodes is scenario F's pool at full size; -fleet-nodes scales it down.
const fleetNodes = 1000

// fleetMaxUnavailable is how much of the pool scenario F rolls through at once, for both methods.
const fleetMaxUnavailable = "10%"

// fleet returns scenario F, a fleet: a pool of nodes nodes (1,000 at full size) and ten pods a
// node rolled through a tenth at a time by nodemaint (spec.rollout maxUnavailable 10%, release
// Rebooted) and by the reboot daemon's loop at the same concurrency (kured's --concurrency). At
// full size the 10,000 pods are two Deployments of 1,000 and twenty of 200 with a PDB
// maxUnavailable 10%, sixty of 50 with a PDB maxUnavailable 1, 98 of 10, every other one with a
// PDB maxUnavailable 1, and two StatefulSets of 10 with a PDB maxUnavailable 1; a smaller pool
// scales every replica count (at least 1), 100 nodes to 1,000 pods.
func fleet(nodes int) Scenario {
	nodes = max(nodes, 10)
	mu := intstr.FromString(fleetMaxUnavailable)
	atOnce, _ := resolveMaxUnavailable(mu, nodes)
	s := Scenario{
		Name: "F", Targets: nodes, Nodes: nodes, LabelPool: true,
		// Setting 10,000 pods up takes about 20 minutes on 2 cores, and the classic loop's
		// budgets of one pod hold its drains.
		Timeout: 3 * time.Hour,
		Rollout: &Rollout{MaxUnavailable: mu, ClassicAtOnce: atOnce, Reboot: 10 * sec},
		Goals:   &Goals{TotalRatio: 1.5, PeakRSSMiB: 300},
	}
	f := float64(nodes) / fleetNodes
	scale := func(r int) int32 { return int32(max(1, math.Round(float64(r)*f))) }
	pool := map[string]string{poolLabel: s.Name}
	add := func(w Workload, replicas int) {
		w.Replicas, w.PoolSelector = scale(replicas), pool
		s.Workloads = append(s.Workloads, w)
	}
	for i, name := range []string{"web-a", "web-b"} {
		add(Workload{Name: name, Kind: KindDeployment, PDBMaxUnavailablePercent: 10,
			ReadyDelay: time.Duration(5-i) * sec, DeleteDelay: time.Duration(2+i) * sec}, 1000)
	}
	for i := range 20 {
		add(Workload{Name: fmt.Sprintf("svc-%02d", i), Kind: KindDeployment, PDBMaxUnavailablePercent: 10,
			ReadyDelay: time.Duration(2+i%4) * sec, DeleteDelay: time.Duration(1+i%3) * sec}, 200)
	}
	for i := range 60 {
		add(Workload{Name: fmt.Sprintf("app-%02d", i), Kind: KindDeployment, PDBMaxUnavailable: 1,
			ReadyDelay: time.Duration(3+i%5) * sec, DeleteDelay: time.Duration(1+i%4) * sec}, 50)
	}
	for i := range 98 {
		add(Workload{Name: fmt.Sprintf("small-%02d", i), Kind: KindDeployment, PDBMaxUnavailable: 1 - i%2,
			ReadyDelay: time.Duration(2+i%3) * sec, DeleteDelay: time.Duration(1+i%2) * sec}, 10)
	}
	add(Workload{Name: "db", Kind: KindStatefulSet, PDBMaxUnavailable: 1, ReadyDelay: 8 * sec, DeleteDelay: 3 * sec}, 10)
	add(Workload{Name: "queue", Kind: KindStatefulSet, PDBMaxUnavailable: 1, ReadyDelay: 5 * sec, DeleteDelay: 2 * sec}, 10)
	s.Description = fmt.Sprintf("a fleet: a pool of %s nodes and %s pods, each node drained, rebooted (10s) and put back, %s of the pool "+
		"(%d nodes) at a time by both methods: nodemaint's spec.rollout maxUnavailable %s, release Rebooted, and the classic loop of a "+
		"reboot daemon at a concurrency of %d; %d workloads confined to the pool (a node label): Deployments of %d, %d, %d and %d "+
		"(PDBs maxUnavailable 10%%, 10%%, 1, 1 or none) and two StatefulSets of %d (PDB maxUnavailable 1)",
		thousands(nodes), thousands(s.pods()), fleetMaxUnavailable, atOnce, fleetMaxUnavailable, atOnce, len(s.Workloads),
		scale(1000), scale(200), scale(50), scale(10), scale(10))
	return s
}

// thousands writes n with a comma between thousands, as the descriptions do.
func thousands(n int) string {
	if n < 1000 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%s,%03d", thousands(n/1000), n%1000)
}
