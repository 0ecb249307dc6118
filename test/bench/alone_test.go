package main

import (
	"context"
	"errors"
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
