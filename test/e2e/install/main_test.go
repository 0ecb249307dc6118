// Package install tests the install artifacts: the Helm chart (charts/nodemaint) and the
// kustomization (config/default) are rendered, checked object by object and applied to the local
// cluster, so that a broken chart or kustomization fails here rather than on a user's cluster.
//
// helm comes from $HELM, else from hack/tools.sh (built once per machine from its Go module).
package install

import (
	"os"
	"testing"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.Options{Nodes: 3})) }
