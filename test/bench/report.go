package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/util/intstr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// Report is the result of one benchmark run: _output/bench/<time>.json.
type Report struct {
	Time      string           `json:"time"`
	Machine   Machine          `json:"machine"`
	Settings  Settings         `json:"settings"`
	Scenarios []ScenarioResult `json:"scenarios"`
	Idle      *IdleResult      `json:"idle,omitempty"`
}

// Machine is where the benchmark ran.
type Machine struct {
	CPU               string  `json:"cpu"`
	Cores             int     `json:"cores"`
	MemoryGiB         float64 `json:"memoryGiB"`
	GoVersion         string  `json:"goVersion"`
	KubernetesVersion string  `json:"kubernetesVersion"`
}

// Settings are the benchmark's parameters.
type Settings struct {
	ClusterNodes           int      `json:"clusterNodes"`
	ClassicTimeoutSeconds  float64  `json:"classicTimeoutSeconds"`
	ResponseTimeoutSeconds float64  `json:"responseTimeoutSeconds"`
	GracePeriodSeconds     float64  `json:"gracePeriodSeconds"`
	ControllerArgs         []string `json:"controllerArgs,omitempty"`
	// EvictionRequestAPI: the cluster served KEP-4563's EvictionRequest API (for every method).
	EvictionRequestAPI bool `json:"evictionRequestAPI,omitempty"`
}

// ScenarioResult is one scenario, drained by each method.
type ScenarioResult struct {
	Name                string  `json:"name"`
	Description         string  `json:"description"`
	Nodes               int     `json:"nodes"`
	Targets             int     `json:"targets"`
	Pods                int     `json:"pods"`
	IdealEmptySeconds   float64 `json:"idealEmptySeconds"`
	IdealSettledSeconds float64 `json:"idealSettledSeconds"`
	// Rollout is set for a rolling maintenance of a node pool (scenarios P and F): its runs have
	// a total time and no "nodes empty" (the pods come back to the rebooted nodes), and it has
	// ideals of its own; IdealEmptySeconds and IdealSettledSeconds are 0.
	Rollout *RolloutResult `json:"rollout,omitempty"`
	// Goals are the figures the scenario is meant to meet (scenario F).
	Goals *Goals      `json:"goals,omitempty"`
	Runs  []RunResult `json:"runs"`
}

// RolloutResult is a rolling maintenance's parameters and ideal total times (idealRollout).
type RolloutResult struct {
	// MaxUnavailable is how many nodes nodemaint takes at once, MaxUnavailableSpec its
	// spec.rollout.maxUnavailable when that is a percentage of the pool.
	MaxUnavailable     int    `json:"maxUnavailable"`
	MaxUnavailableSpec string `json:"maxUnavailableSpec,omitempty"`
	// ClassicAtOnce is how many nodes the classic loop takes at once; 0 (older results) is one.
	ClassicAtOnce int     `json:"classicAtOnce,omitempty"`
	RebootSeconds float64 `json:"rebootSeconds"`
	// IdealSeconds is the ideal at MaxUnavailable nodes at once, IdealSerialSeconds one at a
	// time, IdealClassicSeconds at ClassicAtOnce; each run's ratio is to the ideal at its own
	// concurrency.
	IdealSeconds        float64 `json:"idealSeconds"`
	IdealSerialSeconds  float64 `json:"idealSerialSeconds"`
	IdealClassicSeconds float64 `json:"idealClassicSeconds,omitempty"`
}

// rolloutResult is the rolling maintenance s's parameters and ideals.
func rolloutResult(s Scenario) *RolloutResult {
	r := s.Rollout
	atOnce, classic := r.atOnce(MethodNodemaint, s.Targets), r.atOnce(MethodClassic, s.Targets)
	res := &RolloutResult{
		MaxUnavailable: atOnce, ClassicAtOnce: classic, RebootSeconds: r.Reboot.Seconds(),
		IdealSeconds:        idealRollout(s.Workloads, s.Targets, atOnce, r.Reboot).Seconds(),
		IdealSerialSeconds:  idealRollout(s.Workloads, s.Targets, 1, r.Reboot).Seconds(),
		IdealClassicSeconds: idealRollout(s.Workloads, s.Targets, classic, r.Reboot).Seconds(),
	}
	if r.MaxUnavailable.Type == intstr.String {
		res.MaxUnavailableSpec = r.MaxUnavailable.StrVal
	}
	return res
}

// classic is how many nodes the classic loop takes at once.
func (r *RolloutResult) classic() int { return max(1, r.ClassicAtOnce) }

// idealCell says the ideals of the rollout, at each method's concurrency.
func (r *RolloutResult) idealCell() string {
	ideal, serial := r.IdealSeconds, r.IdealSerialSeconds
	if r.classic() == r.MaxUnavailable {
		return fmt.Sprintf("%s at %d nodes at once (both methods)", fmtSeconds(&ideal), r.MaxUnavailable)
	}
	if r.classic() == 1 {
		return fmt.Sprintf("%s at %d nodes at once, %s at 1", fmtSeconds(&ideal), r.MaxUnavailable, fmtSeconds(&serial))
	}
	classic := r.IdealClassicSeconds
	return fmt.Sprintf("%s at %d nodes at once, %s at %d", fmtSeconds(&ideal), r.MaxUnavailable, fmtSeconds(&classic), r.classic())
}

// RunResult is one method's drain of a scenario. Times are seconds since the drain was
// requested; nil when it did not happen.
type RunResult struct {
	Method string `json:"method"`
	// Time is the time of the run's report when it is not the merged report's (mergeReports).
	Time string `json:"time,omitempty"`
	// EmptySeconds: when the target nodes held no pod (a Blocker's aside) any more; nil in a
	// rolling maintenance.
	EmptySeconds *float64 `json:"emptySeconds"`
	// SettledSeconds: when, after that, every workload was back at its replicas, all Ready (in
	// a rolling maintenance: when the last workload came back to its replicas).
	SettledSeconds *float64 `json:"settledSeconds"`
	EmptyRatio     *float64 `json:"emptyRatioToIdeal,omitempty"`
	SettledRatio   *float64 `json:"settledRatioToIdeal,omitempty"`
	// TotalSeconds (a rolling maintenance): when every node of the pool had been rebooted and
	// was back in service (Ready, uncordoned) and every workload was back at its replicas.
	TotalSeconds *float64 `json:"totalSeconds,omitempty"`
	TotalRatio   *float64 `json:"totalRatioToIdeal,omitempty"`
	// NodesBack are the nodes of the pool rebooted and back in service at the end, MaxNodesOut
	// the most out of service (cordoned or not Ready) at once, from a watch (a rolling
	// maintenance).
	NodesBack   int `json:"nodesBack,omitempty"`
	MaxNodesOut int `json:"maxNodesOut,omitempty"`
	// MaxNodesCordoned is the most nodes cordoned at once, what the drainer decides;
	// NodesLostReady counts the nodes that went not Ready while uncordoned, so not for a reboot
	// (the node lifecycle controller missed their kubelet's heartbeats: a loaded machine), which
	// count as out.
	MaxNodesCordoned int `json:"maxNodesCordoned,omitempty"`
	NodesLostReady   int `json:"nodesLostReady,omitempty"`
	// RebootsReasserted counts the simulated reboots in which kwok marked the node Ready before
	// it was up, and the benchmark marked it NotReady again.
	RebootsReasserted int `json:"rebootsReasserted,omitempty"`
	// Status is what a watch on nodemaint's NodeMaintenance saw of its status (a rolling
	// maintenance).
	Status *StatusFigures `json:"status,omitempty"`
	// Blocked says what the drain gave up on.
	Blocked string `json:"blocked,omitempty"`
	// PodsLeft are pods (a Blocker's aside) still on the target nodes at the end.
	PodsLeft        int     `json:"podsLeft"`
	DurationSeconds float64 `json:"durationSeconds"`
	EvacuatedPods   int     `json:"evacuatedPods"`
	// Events is the number of pod events the sampler recorded.
	Events int `json:"events"`
	// APIRequests are the API server's requests (every client) during the run, by verb.
	APIRequests       map[string]float64 `json:"apiRequests"`
	APIRequestsPerPod map[string]float64 `json:"apiRequestsPerPod,omitempty"`
	// APIRequestsByResource are the same by "verb resource [subresource]".
	APIRequestsByResource map[string]float64 `json:"apiRequestsByResource"`
	// ClientRequests are the drainer's own requests (the controller's, or kubectl's), by method.
	ClientRequests       map[string]float64 `json:"clientRequests"`
	ClientRequestsPerPod map[string]float64 `json:"clientRequestsPerPod,omitempty"`
	// ControllerWrites are nodemaint-controller's writes by "client verb resource [subresource]"
	// (its nodemaint_api_requests_total): what each write per pod is.
	ControllerWrites       map[string]float64 `json:"controllerWrites,omitempty"`
	ControllerWritesPerPod map[string]float64 `json:"controllerWritesPerPod,omitempty"`
	ControllerCPUSeconds   *float64           `json:"controllerCPUSeconds,omitempty"`
	// CPUProfile is the file (under -out) of the controller's CPU profile of the run's first
	// minute.
	CPUProfile           string   `json:"cpuProfile,omitempty"`
	ControllerPeakRSSMiB *float64 `json:"controllerPeakRSSMiB,omitempty"`
	// NodeQueueWaitSeconds and NodeReconcileSeconds are the node controller's mean time in its
	// work queue and mean reconcile (evictions included): whether evictions hold the workers
	// other nodes wait for.
	NodeQueueWaitSeconds *float64 `json:"nodeQueueWaitSeconds,omitempty"`
	NodeReconcileSeconds *float64 `json:"nodeReconcileSeconds,omitempty"`
	// PodStatusPatchSeconds is the API server's mean time to serve a PATCH of a pod's status
	// during the run (everyone's: the evacuation requests and answers, the kubelets'), from its
	// apiserver_request_duration_seconds: how loaded it was.
	PodStatusPatchSeconds *float64 `json:"podStatusPatchSeconds,omitempty"`
	// ResponderQueueWaitSeconds and ResponderReconcileSeconds are the same of the Deployment
	// responder: how long a Deployment with a new request waits for its turn.
	ResponderQueueWaitSeconds *float64 `json:"responderQueueWaitSeconds,omitempty"`
	ResponderReconcileSeconds *float64 `json:"responderReconcileSeconds,omitempty"`
	// MachineCPU is how busy the machine was during the run (from the start of the drain
	// until the nodes are empty or the run ends) and which process used its CPU.
	MachineCPU *cpuUse `json:"machineCPU,omitempty"`
	// AnswerLatency is how long the owners took to accept the evacuation requests.
	AnswerLatency *AnswerLatency `json:"answerLatency,omitempty"`
	// Evictions are nodemaint's evictions by result (evicted, refused, failed, deleted): an
	// evicted Deployment pod is one no owner answered in time.
	Evictions map[string]float64 `json:"evictions,omitempty"`
	// WatchEvents are the watch events the controller's informers received during the run, by
	// kind (its nodemaint_watch_events_total): what the cluster's changes cost it.
	WatchEvents map[string]float64 `json:"watchEvents,omitempty"`
	Workloads   []WorkloadResult   `json:"workloads"`
	// Ready is the number of Ready pods of all workloads (a Blocker's aside) over time.
	Ready []Point `json:"ready"`
}

// IdleResult is the controller's memory on a big cluster with no maintenance.
type IdleResult struct {
	// Time is the time of the run that measured it, when it is not the report's (mergeReports).
	Time       string  `json:"time,omitempty"`
	Nodes      int     `json:"nodes"`
	Pods       int     `json:"pods"`
	RSSMiB     float64 `json:"rssMiB"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	CPUSeconds float64 `json:"cpuSeconds"`
	// HeapInuseMiB is the Go heap in use after a garbage collection (the heap profile's
	// inuse_space, go_memstats_heap_inuse_bytes), HeapProfile the profile's file under -out.
	HeapInuseMiB float64 `json:"heapInuseMiB,omitempty"`
	HeapProfile  string  `json:"heapProfile,omitempty"`
	// SettledRSSMiB is the RSS 90 seconds later, the controller still idle: the runtime returns
	// the pages of the start's garbage gradually.
	SettledRSSMiB float64 `json:"settledRSSMiB,omitempty"`
	// Planning is the same controller afterwards, with NodeMaintenances that stay Planning.
	Planning *PlanningResult `json:"planning,omitempty"`
}

// settled says the RSS the controller settled at, if measured.
func (r *IdleResult) settled() string {
	if r.SettledRSSMiB == 0 {
		return ""
	}
	return fmt.Sprintf(", %.0f MiB %s later", r.SettledRSSMiB, idleSettle)
}

func machine(ctx context.Context, c *localcluster.Cluster) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if v, err := c.Client().Discovery().ServerVersion(); err == nil {
		m.KubernetesVersion = v.GitVersion
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kib, err := statusKiB(string(data), "MemTotal"); err == nil {
			m.MemoryGiB = math.Round(float64(kib)/(1<<20)*10) / 10
		}
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	_ = ctx
	return m
}

func fmtSeconds(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%.1fs", *f)
}

func fmtRatio(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("×%.2f", *f)
}

// writes sums the write verbs of the API server (or HTTP methods of a client).
func writes(m map[string]float64) float64 {
	n := 0.0
	for k, v := range m {
		switch strings.ToUpper(k) {
		case "POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE", "APPLY", "DELETECOLLECTION":
			n += v
		}
	}
	return n
}

func total(m map[string]float64) float64 {
	n := 0.0
	for _, v := range m {
		n += v
	}
	return n
}

func fmtCounts(m map[string]float64) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2g", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// rows are the lines of a scenario's comparison: a label and one cell per run.
func rows(s ScenarioResult) (header []string, lines [][]string) {
	header = []string{"scenario " + s.Name}
	for _, r := range s.Runs {
		header = append(header, r.Method)
	}
	header = append(header, "ideal")
	var add addRow = func(label, ideal string, cell func(r RunResult) string) {
		line := []string{label}
		for _, r := range s.Runs {
			line = append(line, cell(r))
		}
		lines = append(lines, append(line, ideal))
	}
	if s.Rollout != nil {
		rolloutRows(s, add)
	} else {
		idealEmpty, idealSettled := s.IdealEmptySeconds, s.IdealSettledSeconds
		add("nodes empty", fmtSeconds(&idealEmpty), func(r RunResult) string {
			if r.EmptySeconds == nil {
				return fmt.Sprintf("never (%d pods left)", r.PodsLeft)
			}
			return fmtSeconds(r.EmptySeconds) + " " + fmtRatio(r.EmptyRatio)
		})
		add("all workloads Ready", fmtSeconds(&idealSettled), func(r RunResult) string {
			return fmtSeconds(r.SettledSeconds) + " " + fmtRatio(r.SettledRatio)
		})
	}
	add("blocked", "", func(r RunResult) string { return or(r.Blocked, "no") })
	add("workloads below desired", "0", func(r RunResult) string {
		n, worst := 0, 0.0
		for _, w := range r.Workloads {
			if w.SecondsBelow > 0 {
				n++
				worst = max(worst, w.SecondsBelow)
			}
		}
		return fmt.Sprintf("%d of %d (longest %.1fs)", n, len(r.Workloads), worst)
	})
	add("workloads at zero", "0", func(r RunResult) string {
		n, secs := 0, 0.0
		for _, w := range r.Workloads {
			if w.SecondsAtZero > 0 {
				n++
				secs += w.SecondsAtZero
			}
		}
		return fmt.Sprintf("%d (%.1fs in all)", n, secs)
	})
	add("evacuated pods", "", func(r RunResult) string { return fmt.Sprint(r.EvacuatedPods) })
	add("API requests / pod", "", func(r RunResult) string {
		return fmt.Sprintf("%.1f (writes %.1f)", total(r.APIRequestsPerPod), writes(r.APIRequestsPerPod))
	})
	add("drainer requests / pod", "", func(r RunResult) string {
		return fmt.Sprintf("%.1f (writes %.1f)", total(r.ClientRequestsPerPod), writes(r.ClientRequestsPerPod))
	})
	add("controller CPU", "", func(r RunResult) string {
		if r.ControllerCPUSeconds == nil {
			return "—"
		}
		return fmt.Sprintf("%.2fs", *r.ControllerCPUSeconds)
	})
	rssGoal := ""
	if s.Goals != nil && s.Goals.PeakRSSMiB > 0 {
		rssGoal = fmt.Sprintf("goal: at most %.0f MiB", s.Goals.PeakRSSMiB)
	}
	add("controller peak RSS", rssGoal, func(r RunResult) string {
		if r.ControllerPeakRSSMiB == nil {
			return "—"
		}
		return fmt.Sprintf("%.0f MiB", *r.ControllerPeakRSSMiB)
	})
	add("controller watch events (a pod)", "", func(r RunResult) string {
		if r.WatchEvents == nil {
			return "—"
		}
		n := total(r.WatchEvents)
		if r.EvacuatedPods == 0 {
			return fmt.Sprintf("%.0f", n)
		}
		return fmt.Sprintf("%.0f (%.1f)", n, n/float64(r.EvacuatedPods))
	})
	add("node reconcile / queue wait (mean)", "", func(r RunResult) string {
		if r.NodeReconcileSeconds == nil || r.NodeQueueWaitSeconds == nil {
			return "—"
		}
		return fmt.Sprintf("%.0fms / %.0fms", *r.NodeReconcileSeconds*1000, *r.NodeQueueWaitSeconds*1000)
	})
	add("responder reconcile / queue wait (mean)", "", func(r RunResult) string {
		if r.ResponderReconcileSeconds == nil || r.ResponderQueueWaitSeconds == nil {
			return "—"
		}
		return fmt.Sprintf("%.0fms / %.0fms", *r.ResponderReconcileSeconds*1000, *r.ResponderQueueWaitSeconds*1000)
	})
	add("API server PATCH pods/status (mean)", "", func(r RunResult) string {
		if r.PodStatusPatchSeconds == nil {
			return "—"
		}
		return fmt.Sprintf("%.0fms", *r.PodStatusPatchSeconds*1000)
	})
	add("machine CPU (most used by)", "", func(r RunResult) string {
		if r.MachineCPU == nil {
			return "—"
		}
		return r.MachineCPU.String()
	})
	add("requests accepted within (median / p99 / all)", "", func(r RunResult) string {
		a := r.AnswerLatency
		if a == nil {
			return "—"
		}
		return fmt.Sprintf("%s / %s / %s (%d pods)", seconds(a.MedianSeconds), seconds(a.P99Seconds), seconds(a.MaxSeconds), a.Accepted)
	})
	add("pods evicted by nodemaint", "", func(r RunResult) string {
		if r.Evictions == nil {
			return "—"
		}
		return fmt.Sprintf("%.0f (%.0f refused by budgets)", r.Evictions["evicted"], r.Evictions["refused"])
	})
	return header, lines
}

// addRow adds a line of a scenario's comparison: a label, a cell a run, the ideal (or goal).
type addRow func(label, ideal string, cell func(r RunResult) string)

// rolloutRows are the lines of a rolling maintenance: the pods come back to the rebooted nodes,
// so the time of the whole rollout replaces "nodes empty"; and what a watch saw of nodemaint's
// status, where it was watched.
func rolloutRows(s ScenarioResult, add addRow) {
	ro := s.Rollout
	ideal := ro.idealCell()
	if s.Goals != nil && s.Goals.TotalRatio > 0 {
		ideal += fmt.Sprintf("; goal for nodemaint: ×%.1f", s.Goals.TotalRatio)
	}
	// The cluster left alone (MethodAlone) rebooted nothing: its figure is the nodes out at once.
	add("total time", ideal, func(r RunResult) string {
		switch {
		case r.Method == MethodAlone:
			return fmt.Sprintf("— (left alone %s)", fmtSeconds(&r.DurationSeconds))
		case r.TotalSeconds == nil:
			return "never"
		}
		return fmtSeconds(r.TotalSeconds) + " " + fmtRatio(r.TotalRatio)
	})
	add("nodes rebooted and back", fmt.Sprint(s.Targets), func(r RunResult) string {
		switch {
		case r.Method == MethodAlone:
			return "—"
		case r.RebootsReasserted > 0:
			return fmt.Sprintf("%d of %d (%d marked Ready by kwok during their reboot, NotReady again)", r.NodesBack, s.Targets, r.RebootsReasserted)
		}
		return fmt.Sprintf("%d of %d", r.NodesBack, s.Targets)
	})
	bound := fmt.Sprintf("at most %d", ro.MaxUnavailable)
	if ro.classic() != ro.MaxUnavailable {
		bound = fmt.Sprintf("at most %d (nodemaint), %d (loop)", ro.MaxUnavailable, ro.classic())
	}
	add("nodes out at once (most)", bound, func(r RunResult) string {
		if r.MaxNodesCordoned == 0 && r.NodesLostReady == 0 {
			return fmt.Sprint(r.MaxNodesOut)
		}
		return fmt.Sprintf("%d (cordoned %d; %d nodes not Ready while uncordoned)", r.MaxNodesOut, r.MaxNodesCordoned, r.NodesLostReady)
	})
	if !slices.ContainsFunc(s.Runs, func(r RunResult) bool { return r.Status != nil }) {
		return
	}
	status := func(f func(*StatusFigures) string) func(RunResult) string {
		return func(r RunResult) string {
			if r.Status == nil {
				return "—"
			}
			return f(r.Status)
		}
	}
	add("status updates / inTurn changes / distinct inTurn sets", fmt.Sprintf("%d turns of %d nodes at least", ceilDiv(s.Targets, ro.MaxUnavailable), ro.MaxUnavailable),
		status(func(f *StatusFigures) string {
			return fmt.Sprintf("%d / %d / %d", f.Updates, f.InTurnChanges, f.InTurnSets)
		}))
	add("nodes listed in status inTurn (ever / most at once)", fmt.Sprintf("%d / at most %d", s.Targets, ro.MaxUnavailable),
		status(func(f *StatusFigures) string { return fmt.Sprintf("%d / %d", f.NodesSeenInTurn, f.MaxInTurn) }))
	add("status.nodes (most nodes / largest; most not listed)", fmt.Sprintf("at most %d / %s", nodemaintv1alpha1.MaxStatusNodes, kib(nodemaintv1alpha1.MaxStatusNodesBytes)),
		status(func(f *StatusFigures) string {
			return fmt.Sprintf("%d / %s; %d", f.MaxNodes, kib(f.MaxNodesBytes), f.MaxNodesNotListed)
		}))
	add("NodeMaintenance (largest, JSON)", "", status(func(f *StatusFigures) string { return kib(f.MaxObjectBytes) }))
}

// kib writes a size in KiB.
func kib(bytes int) string { return fmt.Sprintf("%.1f KiB", float64(bytes)/1024) }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// renderTable renders the report for a terminal.
func renderTable(r *Report) string {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	for _, s := range r.Scenarios {
		header, lines := rows(s)
		fmt.Fprintf(tw, "%s\n", strings.Join(header, "\t"))
		for _, l := range lines {
			fmt.Fprintf(tw, "%s\n", strings.Join(l, "\t"))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if r.Idle != nil {
		fmt.Fprintf(&buf, "controller idle with %d nodes and %d pods: RSS %.0f MiB (peak %.0f MiB)%s, heap in use %.0f MiB\n", r.Idle.Nodes, r.Idle.Pods, r.Idle.RSSMiB, r.Idle.PeakRSSMiB, r.Idle.settled(), r.Idle.HeapInuseMiB)
		if p := r.Idle.Planning; p != nil {
			fmt.Fprintf(&buf, "%s\n", p.summary())
		}
	}
	return buf.String()
}

// renderMarkdown renders the figures of the report as Markdown.
func renderMarkdown(r *Report, chart string) string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Run %s on %d cores (%s), %.1f GiB of memory, %s, Kubernetes %s (local cluster of %d kwok nodes).\n",
		r.Time, m.Cores, or(m.CPU, "unknown CPU"), m.MemoryGiB, m.GoVersion, or(m.KubernetesVersion, "?"), r.Settings.ClusterNodes)
	fmt.Fprintf(&b, "Classic drain timeout per node %gs; NodeMaintenance `evacuationResponseTimeout` %gs; pods' grace period %gs.\n\n",
		r.Settings.ClassicTimeoutSeconds, r.Settings.ResponseTimeoutSeconds, r.Settings.GracePeriodSeconds)
	for _, s := range r.Scenarios {
		fmt.Fprintf(&b, "### Scenario %s\n\n%s.\n\n", s.Name, s.Description)
		header, lines := rows(s)
		b.WriteString("| " + strings.Join(header, " | ") + " |\n|" + strings.Repeat("---|", len(header)) + "\n")
		for _, l := range lines {
			b.WriteString("| " + strings.Join(l, " | ") + " |\n")
		}
		b.WriteString("\n")
		if s.Name == "S" && chart != "" {
			fmt.Fprintf(&b, "![Ready replicas in scenario S](%s)\n\n", chart)
		}
		// Per workload availability, where some workload dipped.
		var dips []string
		for _, run := range s.Runs {
			for _, w := range run.Workloads {
				if w.SecondsBelow > 0 {
					dips = append(dips, fmt.Sprintf("| %s | %s %s | %d | %d | %.1fs | %.1fs |", run.Method, w.Kind, w.Name, w.Desired, w.MinReady, w.SecondsBelow, w.SecondsAtZero))
				}
			}
		}
		if len(dips) > 0 && len(dips) <= 40 {
			b.WriteString("| method | workload | desired | min Ready | below desired | at zero |\n|---|---|---|---|---|---|\n")
			b.WriteString(strings.Join(dips, "\n") + "\n\n")
		} else if len(dips) > 40 {
			fmt.Fprintf(&b, "%d workload runs went below their replicas (see the JSON).\n\n", len(dips))
		}
		for _, run := range s.Runs {
			if run.Time != "" && run.Time != r.Time {
				fmt.Fprintf(&b, "- %s was run apart: run %s, on a fresh cluster of the same size.\n", run.Method, run.Time)
			}
			fmt.Fprintf(&b, "- %s API server requests per pod: %s\n", run.Method, fmtCounts(run.APIRequestsPerPod))
			if len(run.ControllerWritesPerPod) > 0 {
				fmt.Fprintf(&b, "- %s's own writes per pod: %s\n", run.Method, fmtCounts(run.ControllerWritesPerPod))
			}
		}
		b.WriteString("\n")
	}
	if r.Idle != nil {
		when := ""
		if r.Idle.Time != "" && r.Idle.Time != r.Time {
			when = " (run " + r.Idle.Time + ")"
		}
		fmt.Fprintf(&b, "Controller idle%s with %d nodes and %d pods: RSS %.0f MiB (peak %.0f MiB)%s, Go heap in use after a collection %.0f MiB.\n\n", when, r.Idle.Nodes, r.Idle.Pods, r.Idle.RSSMiB, r.Idle.PeakRSSMiB, r.Idle.settled(), r.Idle.HeapInuseMiB)
		if p := r.Idle.Planning; p != nil {
			fmt.Fprintf(&b, "%s\n\n", p.summary())
		}
	}
	return b.String()
}

// Markers around the generated parts of docs/benchmarks.md; the rest is written by hand. The
// large scenario (L) and the idle measurement have a part of their own, and so has the fleet (F),
// so that a run of -large or of F alone leaves the figures of S, B, M and P in place, and the
// other way round.
const (
	docsBegin      = "<!-- bench:begin (generated by make bench; edits between the markers are lost) -->"
	docsEnd        = "<!-- bench:end -->"
	docsLargeBegin = "<!-- bench-large:begin (generated by make bench BENCH_ARGS=-large; edits between the markers are lost) -->"
	docsLargeEnd   = "<!-- bench-large:end -->"
	docsFleetBegin = "<!-- bench-fleet:begin (generated by make bench-fleet; edits between the markers are lost) -->"
	docsFleetEnd   = "<!-- bench-fleet:end -->"
)

// spliceDocs replaces what is between the markers begin and end of doc with generated.
func spliceDocs(doc, begin, end, generated string) (string, error) {
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("docs/benchmarks.md has no %s / %s markers", begin, end)
	}
	return doc[:i+len(begin)] + "\n" + generated + doc[j:], nil
}

// docsPart is one generated part of docs/benchmarks.md: its markers, and the scenarios it holds.
type docsPart struct {
	begin, end string
	holds      func(scenario string) bool
	idle       bool // it holds the idle measurement
}

var docsParts = []docsPart{
	{begin: docsBegin, end: docsEnd, holds: func(n string) bool { return n != "L" && n != "F" }},
	{begin: docsLargeBegin, end: docsLargeEnd, holds: func(n string) bool { return n == "L" }, idle: true},
	{begin: docsFleetBegin, end: docsFleetEnd, holds: func(n string) bool { return n == "F" }},
}

// split returns the report's figures that go into part, nil when it has none.
func (part docsPart) split(r *Report) *Report {
	out := *r
	out.Scenarios, out.Idle = nil, nil
	for _, s := range r.Scenarios {
		if part.holds(s.Name) {
			out.Scenarios = append(out.Scenarios, s)
		}
	}
	if part.idle {
		out.Idle = r.Idle
	}
	if len(out.Scenarios) == 0 && out.Idle == nil {
		return nil
	}
	return &out
}

// writeDocs writes the report's figures into docs/benchmarks.md, each part between its markers,
// and scenario S's chart.
func writeDocs(root string, r *Report) error {
	chart := ""
	for _, s := range r.Scenarios {
		if s.Name == "S" {
			svg := renderSVG(s)
			if err := os.WriteFile(filepath.Join(root, "docs", "bench-s-ready.svg"), []byte(svg), 0o644); err != nil {
				return err
			}
			chart = "bench-s-ready.svg"
		}
	}
	path := filepath.Join(root, "docs", "benchmarks.md")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(data)
	for i, part := range docsParts {
		sub := part.split(r)
		if sub == nil {
			continue
		}
		c := ""
		if i == 0 {
			c = chart
		}
		if doc, err = spliceDocs(doc, part.begin, part.end, renderMarkdown(sub, c)); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// svgColors are the runs' line colors, in order.
var svgColors = []string{"#d62728", "#1f77b4", "#2ca02c"}

// renderSVG draws the Ready pods over time of each run of the scenario, as step lines.
func renderSVG(s ScenarioResult) string {
	const w, h, left, right, top, bottom = 720.0, 360.0, 50.0, 20.0, 30.0, 40.0
	maxT, maxV := 1.0, 1
	for _, r := range s.Runs {
		maxT = max(maxT, r.DurationSeconds)
		for _, p := range r.Ready {
			maxT, maxV = max(maxT, p.T), max(maxV, p.V)
		}
	}
	maxV = max(maxV, s.Pods)
	x := func(t float64) float64 { return left + t/maxT*(w-left-right) }
	y := func(v int) float64 { return h - bottom - float64(v)/float64(maxV)*(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">Scenario %s: Ready pods over time (desired %d)</text>`+"\n", left, s.Name, s.Pods)
	// Axes and grid.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for i := 0; i <= 4; i++ {
		v := maxV * i / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%d</text>`+"\n",
			left, y(v), w-right, y(v), left-5, y(v)+4, v)
	}
	step := niceStep(maxT / 6)
	for t := 0.0; t <= maxT+1e-9; t += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%gs</text>`+"\n", x(t), h-bottom+16, t)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">seconds since the drain was requested</text>`+"\n", (left+w-right)/2, h-6)
	for i, r := range s.Runs {
		color := svgColors[i%len(svgColors)]
		var pts []string
		for j, p := range r.Ready {
			if j > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T), y(r.Ready[j-1].V)))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T), y(p.V)))
		}
		if n := len(r.Ready); n > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(max(r.DurationSeconds, r.Ready[n-1].T)), y(r.Ready[n-1].V)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="3" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			w-right-170, h-bottom-40+float64(i)*16, color, w-right-152, h-bottom-35+float64(i)*16, r.Method)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// mergeReports makes one report of several: the first one's time, machine and settings, the
// scenarios of all (a later run of a scenario's method replaces an earlier one; runs and the idle
// measurement from a later report keep its time), and the last idle measurement.
func mergeReports(reports []*Report) *Report {
	merged := *reports[0]
	merged.Scenarios = slices.Clone(merged.Scenarios)
	if merged.Idle != nil && merged.Idle.Time == "" {
		idle := *merged.Idle
		idle.Time = merged.Time
		merged.Idle = &idle
	}
	for _, r := range reports[1:] {
		for _, s := range r.Scenarios {
			s.Runs = slices.Clone(s.Runs)
			for k := range s.Runs {
				if s.Runs[k].Time == "" {
					s.Runs[k].Time = r.Time
				}
			}
			i := slices.IndexFunc(merged.Scenarios, func(m ScenarioResult) bool { return m.Name == s.Name })
			if i < 0 {
				merged.Scenarios = append(merged.Scenarios, s)
				continue
			}
			// The later runs replace the earlier ones of their method; the others stay.
			runs := slices.Clone(merged.Scenarios[i].Runs)
			for _, run := range s.Runs {
				if j := slices.IndexFunc(runs, func(m RunResult) bool { return m.Method == run.Method }); j >= 0 {
					runs[j] = run
				} else {
					runs = append(runs, run)
				}
			}
			s.Runs = runs
			merged.Scenarios[i] = s
		}
		if r.Idle != nil {
			idle := *r.Idle
			if idle.Time == "" {
				idle.Time = r.Time
			}
			merged.Idle = &idle
		}
	}
	return &merged
}

// seconds renders a histogram bucket's upper bound.
func seconds(le float64) string {
	if math.IsInf(le, 1) {
		return "more"
	}
	return fmt.Sprintf("%gs", le)
}

// summary says the Planning measurement in a paragraph.
func (p *PlanningResult) summary() string {
	settled := "settled"
	if p.NotSettled {
		settled = "the controller's writes still going after"
	}
	return fmt.Sprintf("With %d NodeMaintenances Planning (%d nodes each): every preflight in %.0fs, "+settled+" in %.0fs; RSS %.0f MiB (at most %.0f MiB sampled), Go heap in use after a collection %.0f MiB, controller CPU %.1fs; %.0f snapshots, %.0f preflights, %.1fs of the preflight worker. "+
		"Controller requests per minute then (over %.0fs): %s; idle before them: %s.",
		p.Maintenances, p.NodesEach, p.PreflightsSeconds, p.SettledSeconds, p.RSSMiB, p.PeakRSSMiB, p.HeapInuseMiB, p.CPUSeconds,
		p.Snapshots, p.Preflights, p.PreflightSeconds, p.WindowSeconds, requestsLine(p.RequestsPerMinute), requestsLine(p.IdleRequestsPerMinute))
}
