package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nodemaint/nodemaint/internal/testutil"
)

// WaitSettled waits for evidence that the controller settled: it reconciled what it found (as
// the leader, when it elects one) and its work queues are empty, with nothing in progress. A
// test that counts the controller's requests from a quiet start counts from there.
func (c *Controller) WaitSettled(t testing.TB, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, "nodemaint-controller settled", func(ctx context.Context) (bool, string, error) {
		m, err := ScrapeMetrics(ctx, c.MetricsTarget())
		if err != nil {
			return false, "", err
		}
		reconciled, _ := m.Value("controller_runtime_reconcile_total", nil)
		queued, _ := m.Value("workqueue_depth", nil)
		working, _ := m.Value("workqueue_unfinished_work_seconds", nil)
		return reconciled > 0 && queued == 0 && working == 0,
			fmt.Sprintf("%v reconciles, %v queued, %vs of work unfinished", reconciled, queued, working), nil
	})
}
