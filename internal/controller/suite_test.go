package controller_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/nodemaint/nodemaint/internal/apirequests"
	"github.com/nodemaint/nodemaint/internal/cachetrim"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/setup"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

// The integration tests run the reconcilers in-process against a real kube-apiserver and etcd
// (envtest). There is no kubelet or scheduler: pods are bound by setting spec.nodeName, and removed
// with a zero grace period, as a kubelet would after they stopped.

var (
	env *testenv.Env
	k8s client.Client
	// logs are what the controllers log, controller-runtime's lines around each reconcile
	// included (expectReconciled).
	logs testutil.Logs
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logs.Logger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr))))
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runManager(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	_ = env.Stop()
	os.Exit(code)
}

func runManager(ctx context.Context) error {
	// The controller's requests are counted (nodemaint_api_requests_total), as in
	// nodemaint-controller.
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(apirequests.Wrap("controller"))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  testenv.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cachetrim.Options(cache.Options{}),
	})
	if err != nil {
		return err
	}
	// The maintenance controllers as nodemaint-controller sets them up, on pod conditions, without
	// the responder: these tests answer for the owners.
	_, err = setup.Controllers(ctx, mgr, setup.Options{
		Maintenance: true, Concurrency: 4, Preflight: true, OwnPods: ownPods,
		EvictionBackoff: 100 * time.Millisecond, EvictionMaxBackoff: time.Second, StatusBatchDelay: 200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// ownPods stand for nodemaint-controller's own pods in these tests: pods of the default
// namespace labelled ownPodLabels.
var (
	ownPodLabels = map[string]string{"app.kubernetes.io/name": "nodemaint-controller"}
	ownPods      = &observe.OwnPods{Namespace: "default", Selector: labels.SelectorFromSet(ownPodLabels)}
)

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, cond)
}

// expectReconciled waits for a reconcile of the cluster-scoped object name by the controller
// ("node", "nodemaintenance") that started at or after since and ended with result ("success",
// "requeue", "error"; "" any): the evidence that the controller looked, before a test asserts
// that it did nothing.
func expectReconciled(t *testing.T, controller, name string, since time.Time, result string) {
	t.Helper()
	eventually(t, fmt.Sprintf("a reconcile of %s by the %s controller since %s, ending %q", name, controller, since.Format(time.StampMilli), result),
		func(context.Context) (bool, string, error) {
			got := logs.Reconciles(controller, "", name, since)
			for _, r := range got {
				if result == "" || r == result {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("reconciles ended %v", got), nil
		})
}

func createNode(t *testing.T, name string, labels map[string]string, unschedulable bool) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
	if err := k8s.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
}

func createPod(t *testing.T, name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	return testutil.CreatePod(t, k8s, name, node, mutate...)
}

func deletePod(pod *corev1.Pod) { testutil.DeletePod(k8s, pod) }

func createNM(t *testing.T, name string, cordon, drain bool, reason string, nodes ...string) *nodemaintv1alpha1.NodeMaintenance {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(nodes...), Cordon: cordon, Drain: drain, Reason: reason,
			// Nothing is evicted: eviction has tests of its own.
			EvictionPolicy: nodemaintv1alpha1.EvictionPolicySignalOnly,
		},
	}
	if err := k8s.Create(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nm) })
	return nm
}

func setNM(t *testing.T, name string, cordon, drain bool) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, nm); err != nil {
		t.Fatal(err)
	}
	orig := nm.DeepCopy()
	nm.Spec.Cordon, nm.Spec.Drain = cordon, drain
	if err := k8s.Patch(context.Background(), nm, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func deleteNMAndWait(t *testing.T, name string) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Delete(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NodeMaintenance "+name+" gone", func(ctx context.Context) (bool, string, error) {
		err := k8s.Get(ctx, types.NamespacedName{Name: name}, nm)
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprintf("finalizers %v", nm.Finalizers), nil
	})
}
