package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseMachineCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  1000 50 300 5000 100 20 30 0 400 0\ncpu0 500 25 150 2500 50 10 15 0 200 0\nintr 1\n"
	busy, all, err := parseMachineCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	// Guest time is in user time already; idle is idle and iowait.
	if busy != 14 {
		t.Errorf("parseMachineCPU = %v busy, want 14", busy)
	}
	if all != 65 {
		t.Errorf("parseMachineCPU = %v in all, want 65", all)
	}
	if _, _, err := parseMachineCPU("intr 1\n"); err == nil {
		t.Error("a /proc/stat without its cpu line parsed")
	}
}

func TestCPUUse(t *testing.T) {
	before := cpuSnapshot{busy: 100, all: 400, processes: map[string]float64{"kube-apiserver": 10, "kwok": 5, "etcd": 2, "gone": 1, benchProcess: 3}}
	after := cpuSnapshot{busy: 190, all: 500, processes: map[string]float64{"kube-apiserver": 50, "kwok": 20, "etcd": 12, benchProcess: 8, "new": 7}}
	u := after.since(before)
	if u.BusyPercent != 90 {
		t.Errorf("busy = %v%%, want 90%%", u.BusyPercent)
	}
	// Only the processes seen at both ends: one that started or ended during the run has no
	// figure for the run.
	want := map[string]float64{"kube-apiserver": 40, "kwok": 15, "etcd": 10, benchProcess: 5}
	if len(u.Processes) != len(want) {
		t.Errorf("processes = %v, want %v", u.Processes, want)
	}
	for name, cpu := range want {
		if u.Processes[name] != cpu {
			t.Errorf("%s used %vs, want %vs", name, u.Processes[name], cpu)
		}
	}
	if got, want := u.String(), "90% busy, kube-apiserver 40s, kwok 15s, etcd 10s, bench 5s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestTakeCPUSnapshot(t *testing.T) {
	s, err := takeCPUSnapshot(map[string]int{benchProcess: os.Getpid(), "gone": 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if s.all <= 0 {
		t.Errorf("machine CPU %v in all, want some", s.all)
	}
	if s.busy <= 0 {
		t.Errorf("machine CPU %v busy, want some", s.busy)
	}
	if s.busy > s.all {
		t.Errorf("machine CPU %v busy of %v, want at most all", s.busy, s.all)
	}
	if _, ok := s.processes[benchProcess]; !ok || len(s.processes) != 1 {
		t.Errorf("processes = %v, want the bench's alone", s.processes)
	}
	if !strings.Contains(s.since(s).String(), "0% busy") {
		t.Errorf("no time passed: %s", s.since(s))
	}
}
