// Command bench compares nodemaint with the classic `kubectl drain` on the same local cluster
// (test/localcluster: a real control plane, kwok kubelets), in the same run, on identical fresh
// workloads: time until the nodes are empty and until every workload is back at full
// availability, each workload's Ready replicas over time (from watches, every event), API
// requests per evacuated pod, the controller's CPU and memory, and the ideal drain. Scenario P
// compares them in a rolling maintenance of a node pool instead: nodemaint's rollout against
// the loop of a reboot daemon (drain a node, reboot it, uncordon it, next), with simulated
// reboots; scenario F does so with a fleet, a pool of 1,000 nodes rolled through a tenth at a
// time by both.
//
//	go run ./test/bench [-scenarios S,B,M,P] [-large] [-write-docs]
//	go run ./test/bench -scenarios F [-fleet-nodes 100]
//
// `make bench` runs it, `make bench-fleet` scenario F. Results go to _output/bench/<time>.json and latest.json, a table to
// stdout, and with -write-docs the figures and chart to docs/benchmarks.md and
// docs/bench-s-ready.svg. See docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodemaint/nodemaint/test/localcluster"
)

type options struct {
	scenarios       []string
	out             string
	k8sBinDir       string
	controller      string
	writeDocs       bool
	classicTimeout  time.Duration
	responseTimeout time.Duration
	runTimeout      time.Duration
	idle            bool
	idleNodes       int
	idlePods        int
	idlePlanning    int
	keep            bool
	methods         []string
	controllerArgs  []string
	fromJSON        string
	fleetNodes      int
	aloneFor        time.Duration
	model           bool
}

func main() {
	// The controller-runtime client of the benchmark logs (API server warnings, throttling) to
	// the same log as the rest.
	ctrllog.SetLogger(logr.FromSlogHandler(slog.Default().Handler()))
	var o options
	var names, methods, controllerArgs string
	var large bool
	flag.StringVar(&names, "scenarios", "S,B,M,P", "Scenarios to run, comma-separated: S, B, M, P (a node pool rebooted node by node), L, F (a fleet of 1,000 nodes rolled through 10% at a time; make bench-fleet).")
	flag.IntVar(&o.fleetNodes, "fleet-nodes", fleetNodes, "Nodes of scenario F's pool, with 10 pods a node and 10% of them at once: 100 for a smoke run.")
	flag.BoolVar(&large, "large", false, "Also run scenario L (100 of 1,000 nodes, 10,000 pods) and the controller's idle memory with 5,000 nodes and 50,000 pods.")
	flag.BoolVar(&o.idle, "idle", false, "Also measure the controller's idle memory with 5,000 nodes and 50,000 pods (-large does too); with -scenarios= alone.")
	flag.IntVar(&o.idleNodes, "idle-nodes", 5000, "Nodes of the idle measurement.")
	flag.IntVar(&o.idlePods, "idle-pods", 50000, "Pods of the idle measurement.")
	flag.IntVar(&o.idlePlanning, "idle-planning", 50, "NodeMaintenances that stay Planning, each selecting as many of the nodes, with which the idle measurement is taken again (0: none).")
	flag.StringVar(&o.out, "out", "_output/bench", "Directory of the results (JSON) and of the cluster.")
	flag.StringVar(&o.k8sBinDir, "k8s-bin-dir", os.Getenv("KUBEBUILDER_ASSETS"), "Directory of the control-plane binaries; empty runs hack/control-plane.sh.")
	flag.StringVar(&o.controller, "controller", "bin/nodemaint-controller", "The nodemaint-controller binary (make build).")
	flag.BoolVar(&o.writeDocs, "write-docs", false, "Write the figures to docs/benchmarks.md and the chart to docs/bench-s-ready.svg.")
	flag.StringVar(&methods, "methods", MethodClassic+","+MethodNodemaint, "Methods to run, comma-separated: "+strings.Join(knownMethods, ", ")+" ("+MethodNodemaintER+" starts the cluster with the EvictionRequest API, for every method of the run; "+MethodFloor+" is no drainer but this cluster's floor: every Deployment surged at once by all its pods to move, then scaled back; "+MethodAlone+" is no drainer either: the cluster left alone for -alone-for, counting the nodes that go not Ready).")
	flag.DurationVar(&o.aloneFor, "alone-for", defaultAloneFor, "How long method "+MethodAlone+" leaves the scenario's cluster alone, counting the nodes that go not Ready.")
	flag.StringVar(&controllerArgs, "controller-args", "", "Extra arguments of nodemaint-controller, space-separated (e.g. --eviction-max-backoff=30s).")
	flag.DurationVar(&o.classicTimeout, "classic-timeout", 30*time.Second, "The classic drain's timeout per node (kubectl drain --timeout); a pod its PDB never lets go blocks it until then.")
	flag.DurationVar(&o.responseTimeout, "response-timeout", 30*time.Second, "The NodeMaintenance's evacuationResponseTimeout: how long pods no responder answers for wait before they are evicted.")
	flag.DurationVar(&o.runTimeout, "run-timeout", 10*time.Minute, "How long one run may take before the benchmark fails.")
	flag.StringVar(&o.fromJSON, "from-json", "", "Run nothing: print the table of these results files (comma-separated; later ones add their scenarios and idle measurement to the first) and, with -write-docs, write their figures to docs/benchmarks.md.")
	flag.BoolVar(&o.model, "model", false, "With -from-json: fit the controller's CPU, peak RSS, API requests and watch events in nodemaint's runs of scenario F at three pool sizes or more (-fleet-nodes), print what they predict for 1,000 and 5,000 nodes and, given a fourth and larger size, the prediction beside its measure.")
	flag.BoolVar(&o.keep, "keep-cluster", false, "Leave the cluster running at the end (it is reused by the next run).")
	flag.Parse()
	for _, n := range strings.Split(names, ",") {
		if n = strings.ToUpper(strings.TrimSpace(n)); n != "" {
			o.scenarios = append(o.scenarios, n)
		}
	}
	o.methods = strings.Split(methods, ",")
	o.controllerArgs = strings.Fields(controllerArgs)
	if large {
		if !slices.Contains(o.scenarios, "L") {
			o.scenarios = append(o.scenarios, "L")
		}
		o.idle = true
	}
	if err := run(o); err != nil {
		slog.Error("Benchmark failed", "err", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.fromJSON != "" {
		return render(o)
	}
	selected, nodes, err := selectScenarios(o.scenarios, o.fleetNodes)
	if err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(o.controller) {
		o.controller = filepath.Join(root, o.controller)
	}
	if _, err := os.Stat(o.controller); err != nil {
		return fmt.Errorf("no controller binary (make build): %w", err)
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if o.k8sBinDir == "" {
		if o.k8sBinDir, err = localcluster.BuildControlPlane(ctx, root); err != nil {
			return err
		}
	}

	dir := filepath.Join(o.out, "cluster")
	start := time.Now()
	slog.Info("Starting the local cluster", "dir", dir, "nodes", nodes)
	cluster, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, BinDir: o.k8sBinDir, Nodes: nodes, KillWithParent: true,
		EvictionRequestAPI: needsEvictionRequestAPI(o.methods)})
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer func() {
		if !o.keep {
			if err := cluster.Stop(); err != nil {
				slog.Error("Stopping the cluster", "err", err)
			}
		}
	}()
	b, err := newBench(ctx, o, root, cluster)
	if err != nil {
		return err
	}
	slog.Info("The cluster is ready", "took", time.Since(start).Round(time.Millisecond))

	report := &Report{
		Time: time.Now().UTC().Format(time.RFC3339), Machine: machine(ctx, cluster),
		Settings: Settings{
			ClusterNodes: nodes, ClassicTimeoutSeconds: o.classicTimeout.Seconds(),
			ResponseTimeoutSeconds: o.responseTimeout.Seconds(), GracePeriodSeconds: terminationGracePeriod.Seconds(),
			ControllerArgs: o.controllerArgs, EvictionRequestAPI: cluster.EvictionRequestAPI(),
		},
	}
	var runErr error
	for _, s := range selected {
		res, err := b.scenario(ctx, s)
		if res != nil {
			report.Scenarios = append(report.Scenarios, *res)
		}
		if err != nil {
			runErr = fmt.Errorf("scenario %s: %w", s.Name, err)
			break
		}
	}
	if runErr == nil && o.idle {
		idle, err := b.idleMemory(ctx, o.idleNodes, o.idlePods)
		report.Idle = idle
		if len(selected) == 0 {
			report.Settings.ClusterNodes = o.idleNodes
		}
		if err != nil {
			runErr = fmt.Errorf("idle memory: %w", err)
		}
	}
	if len(report.Scenarios) > 0 || report.Idle != nil {
		if err := writeReport(o.out, report); err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Print(renderTable(report))
		if runErr == nil && o.writeDocs {
			if err := writeDocs(root, report); err != nil {
				return err
			}
		}
	}
	return runErr
}

// selectScenarios returns the named scenarios, scenario F with a pool of fleetNodes nodes, and
// the most nodes one of them needs.
func selectScenarios(names []string, fleetNodes int) ([]Scenario, int, error) {
	all := scenarios()
	all["F"] = fleet(fleetNodes)
	var selected []Scenario
	nodes := 0
	for _, n := range names {
		s, ok := all[n]
		if !ok {
			return nil, 0, fmt.Errorf("unknown scenario %q (S, B, M, P, L, F)", n)
		}
		selected = append(selected, s)
		nodes = max(nodes, s.Nodes)
	}
	return selected, nodes, nil
}

// render prints the table of one or more results files and, with -write-docs, writes their
// figures to the docs. Several files make one report: scenario L and the idle measurement, run
// apart, go into the large part of the page together.
func render(o options) error {
	var reports []*Report
	for _, name := range strings.Split(o.fromJSON, ",") {
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		var r Report
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		reports = append(reports, &r)
	}
	if o.model {
		model, err := renderModel(reports)
		if err != nil {
			return err
		}
		fmt.Print(model)
		return nil
	}
	r := mergeReports(reports)
	fmt.Print(renderTable(r))
	if !o.writeDocs {
		return nil
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	return writeDocs(root, r)
}

// writeReport writes the report to out/<time>.json and out/latest.json.
func writeReport(out string, r *Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	name := filepath.Join(out, strings.NewReplacer(":", "", "-", "").Replace(r.Time)+".json")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return err
	}
	slog.Info("Wrote the results", "file", name)
	return os.WriteFile(filepath.Join(out, "latest.json"), data, 0o644)
}

// repoRoot returns the closest directory above the working directory with a go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
