// Package evictionrequest is nodemaint's conformance suite for KEP-4563's evictionrequest-controller
// and imperative-eviction.k8s.io/evictor responder: the cases Kubernetes' own controller and
// responder are tested with (test/integration/evictionrequest and
// test/integration/imperativeevictionresponder of kubernetes/kubernetes, written against
// lifecycle.k8s.io/v1alpha1), written here from the behaviour they assert, against nodemaint's
// Eviction controller as nodemaint-controller sets it up, on a real kube-apiserver with the API's
// feature gates. Each test names the upstream test and case it follows; where nodemaint differs on
// purpose (docs/responder-protocol.md, "Differences from upstream"), it asserts nodemaint's
// behaviour and says so.
package evictionrequest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodemaint/nodemaint/internal/setup"
	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

// controllerName names nodemaint's Eviction controller here: the value of its label on the
// Evictions it creates.
const controllerName = "conformance"

var (
	env *testenv.Env
	k8s client.Client
	// cs is client-go's clientset, for the responders' server-side applies of their status, as
	// upstream's tests write them.
	cs *kubernetes.Clientset
	// logs are the controller's log lines: the evidence that it looked before a test asserts
	// that it wrote nothing.
	logs testutil.Logs
)

// TestMain starts one API server for the package (the API's feature gates, and GenericWorkload
// for pods in a scheduling group) and nodemaint's Eviction controller on it, as nodemaint-controller
// sets it up with --eviction-controller=on (under auto it would stand aside cluster-wide once a
// test created an Eviction itself, as upstream's do: that is test/e2e's coexistence test's).
func TestMain(m *testing.M) {
	ctrl.SetLogger(logs.Logger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr))))
	var err error
	if env, err = testenv.StartWith(testenv.Options{EvictionRequestAPI: true, FeatureGates: []string{"GenericWorkload=true"}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run(m)
	_ = env.Stop()
	os.Exit(code)
}

func run(m *testing.M) int {
	k8s = env.Client
	var err error
	if cs, err = kubernetes.NewForConfig(env.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: testenv.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := setup.Controllers(ctx, mgr, setup.Options{EvictionController: true, EvictionControllerName: controllerName}); err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	return code
}
