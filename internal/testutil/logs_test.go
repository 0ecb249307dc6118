package testutil

import (
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestLogsRecordWithValues(t *testing.T) {
	var logs Logs
	start := time.Now()
	log := logs.Logger(logr.Discard()).WithName("x").WithValues("controller", "eviction", "name", "pod-1")
	log.V(1).Info("looking again", "after", time.Second)
	log.WithValues("name", "pod-2").Error(errors.New("boom"), "failed")
	if got := logs.Since(start, "looking again", map[string]string{"controller": "eviction", "name": "pod-1", "after": "1s"}); len(got) != 1 {
		t.Errorf("looking again: %+v", got)
	}
	if got := logs.Since(start, "failed", map[string]string{"name": "pod-2", "error": "boom"}); len(got) != 1 {
		t.Errorf("failed: %+v", got)
	}
	if got := logs.Since(time.Now().Add(time.Second), "looking again", nil); len(got) != 0 {
		t.Errorf("since later: %+v", got)
	}
}

func TestLogsReconciles(t *testing.T) {
	var logs Logs
	base := logs.Logger(logr.Discard()).WithValues("controller", "node", "namespace", "", "name", "n1")
	reconcile := func(id string, end func(logr.Logger)) {
		log := base.WithValues("reconcileID", id)
		log.V(5).Info("Reconciling")
		end(log)
	}
	reconcile("a", func(l logr.Logger) { l.V(5).Info("Reconcile successful") })
	since := time.Now()
	reconcile("b", func(l logr.Logger) { l.Error(errors.New("forbidden"), "Reconciler error") })
	reconcile("c", func(l logr.Logger) { l.V(5).Info("Reconcile done, requeueing after 5s") })
	reconcile("d", func(logr.Logger) {}) // not ended yet
	if got := logs.Reconciles("node", "", "n1", since); len(got) != 2 || got[0] != "error" || got[1] != "requeue" {
		t.Errorf("Reconciles = %v, want [error requeue]", got)
	}
	if got := logs.Reconciles("node", "", "n2", time.Time{}); len(got) != 0 {
		t.Errorf("another node: %v", got)
	}
}
