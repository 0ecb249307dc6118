package main

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The machine's CPU during a run: how busy its cores were, and which process of the run used
// the time. On the 2 cores the benchmark runs on here, the drainer, the local cluster's
// components and the benchmark itself share the machine: when it is busy all the time, the
// cluster's latency (scheduling, pods started, the controllers' status reports) is set by the
// machine, not by the drainer's design.

// The names of the benchmark's own process and of the controller among the run's.
const (
	benchProcess          = "bench"
	controllerProcessName = "nodemaint-controller"
)

// cpuSnapshot is the CPU time used so far by the machine and by each process of the run.
type cpuSnapshot struct {
	// busy and all are the machine's non-idle and total CPU seconds since it booted, summed
	// over its cores (/proc/stat).
	busy, all float64
	// processes are each process's CPU seconds (user and system) since it started.
	processes map[string]float64
}

// takeCPUSnapshot reads the machine's CPU time and that of the named processes; a process that
// is gone is left out.
func takeCPUSnapshot(pids map[string]int) (cpuSnapshot, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSnapshot{}, err
	}
	s := cpuSnapshot{processes: map[string]float64{}}
	if s.busy, s.all, err = parseMachineCPU(string(stat)); err != nil {
		return cpuSnapshot{}, err
	}
	for name, pid := range pids {
		if cpu, _, err := procStats(pid); err == nil {
			s.processes[name] = cpu
		}
	}
	return s, nil
}

// parseMachineCPU returns the non-idle and total CPU seconds of /proc/stat's "cpu" line (all
// cores). Idle is idle and iowait; guest time is already counted in user time.
func parseMachineCPU(stat string) (busy, all float64, err error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: %q", line)
	}
	// user nice system idle iowait irq softirq steal
	var ticks [8]int64
	for i := range ticks {
		if ticks[i], err = strconv.ParseInt(fields[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
	}
	var total int64
	for _, t := range ticks {
		total += t
	}
	idle := ticks[3] + ticks[4]
	return float64(total-idle) / clockTicks, float64(total) / clockTicks, nil
}

// cpuUse is the machine's CPU during a run.
type cpuUse struct {
	// BusyPercent is the share of the machine's CPU time (all cores) that was not idle.
	BusyPercent float64 `json:"busyPercent"`
	// Processes are the CPU seconds of each process of the run: the cluster's components, the
	// controller, the benchmark.
	Processes map[string]float64 `json:"processes"`
}

// since is the machine's CPU use from the snapshot before to this one.
func (s cpuSnapshot) since(before cpuSnapshot) *cpuUse {
	u := &cpuUse{Processes: map[string]float64{}}
	if all := s.all - before.all; all > 0 {
		u.BusyPercent = round(100 * (s.busy - before.busy) / all)
	}
	for name, cpu := range s.processes {
		if was, ok := before.processes[name]; ok {
			u.Processes[name] = round(cpu - was)
		}
	}
	return u
}

// String is the busy share and the processes that used the most CPU, most first.
func (u cpuUse) String() string {
	names := slices.SortedFunc(maps.Keys(u.Processes), func(a, b string) int {
		return cmp.Or(cmp.Compare(u.Processes[b], u.Processes[a]), strings.Compare(a, b))
	})
	parts := []string{fmt.Sprintf("%.0f%% busy", u.BusyPercent)}
	for _, name := range names[:min(len(names), 4)] {
		parts = append(parts, fmt.Sprintf("%s %.0fs", name, u.Processes[name]))
	}
	return strings.Join(parts, ", ")
}
