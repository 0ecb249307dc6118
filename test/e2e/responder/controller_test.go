package responder_test

import (
	"testing"
	"time"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// startNodemaint starts the built nodemaint-controller, as its ServiceAccount, with the Deployment
// responder's give-up bound set to surgeTimeout. Kill it (a crash) and Start it again through the
// returned handle.
func startNodemaint(t *testing.T, surgeTimeout time.Duration) *framework.Controller {
	t.Helper()
	c := framework.NewController(t)
	c.Start("--deployment-surge-timeout=" + surgeTimeout.String())
	return c
}
