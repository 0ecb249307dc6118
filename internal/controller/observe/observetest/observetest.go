// Package observetest builds, for tests that call a reconciler's Reconcile themselves, the
// Observer setup.Controllers builds, on a clock the test steps, over a manager whose cache runs
// and whose controllers do not.
package observetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodemaint/nodemaint/internal/cachetrim"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/evictor"
	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

// Clocked starts a manager on the API server of cfg, with the cache indexes and the Observer the
// controllers share on clk, and returns both once the cache runs and the leadership is recorded
// by clk; the manager stops when the test ends.
func Clocked(t *testing.T, cfg *rest.Config, clk clock.PassiveClock) (*observe.Observer, manager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testenv.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: cachetrim.Options(cache.Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := observe.SetupIndexes(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	obs, err := observe.New(ctx, mgr, observe.Config{Client: mgr.GetClient(), Refusals: evictor.NewRefusals(time.Second, time.Minute), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	testutil.Eventually(t, 30*time.Second, "the leadership recorded by the test's clock", func(context.Context) (bool, string, error) {
		return obs.Active.Since().Equal(clk.Now()), fmt.Sprint("active since ", obs.Active.Since()), nil
	})
	return obs, mgr
}
