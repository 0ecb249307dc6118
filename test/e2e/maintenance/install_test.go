package maintenance_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// TestInstallManifests renders config/default with kustomize and has the API server validate every
// object (server-side dry run), so a broken install fails here rather than on a user's cluster.
func TestInstallManifests(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "default")
	out, err := framework.Kubectl(t, "apply", "--dry-run=server", "--server-side", "--field-manager=install-test", "-k", dir)
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server -k config/default: %v\n%s", err, out)
	}
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/nodemaintenances.nodemaint.dev",
		"customresourcedefinition.apiextensions.k8s.io/drainrules.nodemaint.dev",
		"clusterrole.rbac.authorization.k8s.io/nodemaint-controller",
		"deployment.apps/nodemaint-controller",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config/default does not install %s:\n%s", want, out)
		}
	}
}
