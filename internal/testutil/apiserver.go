package testutil

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// APIServer starts env, a kube-apiserver and etcd (envtest), for the test and stops it at the
// test's end. KUBEBUILDER_ASSETS names their binaries: make test sets it.
func APIServer(t testing.TB, env *envtest.Environment) *rest.Config {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or set it to the output of hack/control-plane.sh")
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}
