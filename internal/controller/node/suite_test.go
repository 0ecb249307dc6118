package node

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

// These tests drive the node controller's writes and watch mappings one by one against a real
// kube-apiserver and etcd (envtest) that serves KEP-4563's EvictionRequest API, with the objects
// as a reconcile decided from a stale cache would have them; no controller runs. The controllers
// running together are tested in internal/controller.

var (
	k8s client.Client
	cfg *rest.Config
)

func TestMain(m *testing.M) {
	env, err := testenv.StartWith(testenv.Options{EvictionRequestAPI: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, cfg = env.Client, env.Config
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, cond)
}

func createPod(t *testing.T, name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	return testutil.CreatePod(t, k8s, name, node, mutate...)
}

func getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	return pod, k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, pod)
}

func expectEvicted(t *testing.T, name string) { t.Helper(); testutil.ExpectEvicted(t, k8s, name) }

func notEvicted(t *testing.T, name string) { t.Helper(); testutil.ExpectNotEvicted(t, k8s, name) }
