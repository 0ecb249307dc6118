package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The cluster is left alone for the time asked, and no longer than the run may take.
func TestLeaveAlone(t *testing.T) {
	nt := newNodeTracker([]string{"n1"})
	start := time.Now()
	if err := leaveAlone(t.Context(), 50*time.Millisecond, nt); err != nil {
		t.Fatalf("left alone: %v", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("left alone %s, want 50ms at least", took)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := leaveAlone(ctx, time.Hour, nt); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("left alone past the run's deadline: %v, want %v", err, context.DeadlineExceeded)
	}
}

// The table of a pool left alone says how long and how many nodes went out, not a rollout's
// total time or reboots, which it never had.
func TestRenderAlone(t *testing.T) {
	r := &Report{Scenarios: []ScenarioResult{{
		Name: "F", Description: "fleet", Targets: 500, Pods: 5000,
		Rollout: &RolloutResult{MaxUnavailable: 50, ClassicAtOnce: 50, RebootSeconds: 10, IdealSeconds: 220},
		Runs:    []RunResult{{Method: MethodAlone, DurationSeconds: 600, MaxNodesOut: 3, NodesLostReady: 3}},
	}}}
	md := renderMarkdown(r, "")
	for _, want := range []string{"| total time | — (left alone 600.0s) |", "| nodes rebooted and back | — |", "3 nodes not Ready while uncordoned"} {
		if !strings.Contains(md, want) {
			t.Errorf("table of a pool left alone lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "never") || strings.Contains(md, "0 of 500") {
		t.Errorf("table of a pool left alone reads as a rollout that never ended:\n%s", md)
	}
}
