// Package badinput_test proves on the local cluster, with the real controllers and nodemaint
// running as its ServiceAccount, that things going wrong under a maintenance are reported clearly
// and do not stop it: a Deployment deleted in the middle of its surge, and a controller whose role
// was narrowed below what config/rbac grants. The cheaper cases (invalid specs, selectors matching
// no or every node, nodes and pods deleted mid-maintenance) are envtest tests in api/v1alpha1 and
// internal/controller.
package badinput_test

import (
	"os"
	"testing"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.Options{Nodes: 3})) }
