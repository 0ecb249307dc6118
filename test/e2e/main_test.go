// Package e2e holds nodemaint's end-to-end tests, run on a local cluster of their own with
// the real Kubernetes control plane and kwok kubelets (see test/e2e/framework).
package e2e

import (
	"os"
	"testing"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.Options{})) }
