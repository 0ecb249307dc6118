// Package framework is the end-to-end test harness: one local cluster (test/localcluster) per
// test package, with nodemaint's CRDs and RBAC installed, nodemaint-controller run as a local
// process with exactly the permissions of its ServiceAccount, and helpers for tests.
//
// A test package starts its cluster in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.Options{})) }
//
// The control-plane binaries come from $KUBEBUILDER_ASSETS, else from hack/control-plane.sh;
// nodemaint-controller from $NODEMAINT_BIN_DIR. `make test-e2e` sets both.
package framework

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/localcluster"
	"github.com/nodemaint/nodemaint/test/manifests"
)

// Options configure Run.
type Options struct {
	// Nodes is the number of fake nodes: 5 when zero. $NODEMAINT_E2E_NODES overrides it.
	Nodes int
	// EvictionRequestAPI starts the cluster serving KEP-4563's EvictionRequest API; so does
	// $EVICTION_REQUEST_API=true (see localcluster.Options).
	EvictionRequestAPI bool
	// RealNodes adds real nodes (0 or 1) to the cluster: a kubelet with containerd (see
	// test/localcluster's realnode.go). Their binaries come from $NODEMAINT_REAL_NODE_BIN_DIR,
	// else from hack/real-node.sh. It needs root.
	RealNodes int
}

const (
	// ControllerNamespace and ControllerServiceAccount are where nodemaint-controller runs and
	// whose permissions it has (config/rbac).
	ControllerNamespace      = "nodemaint-system"
	ControllerServiceAccount = "nodemaint-controller"

	// fieldManager applies the manifests.
	fieldManager = "nodemaint-e2e"
)

// Scheme knows the Kubernetes and nodemaint types.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(Scheme))
}

// The package's environment, set up by Run.
var (
	cluster     *localcluster.Cluster
	adminClient client.Client
	repoRoot    string
)

// Run starts the package's cluster, installs nodemaint's CRDs and RBAC, runs the tests and
// stops the cluster. It returns the exit code for os.Exit. The cluster lives in
// _output/e2e/<package>-<random>, removed when every test passed; its processes die with the
// test binary also when it panics, times out or is interrupted.
func Run(m *testing.M, opts Options) int {
	code, err := run(m, opts)
	if err != nil {
		slog.Error("End-to-end test setup failed", "err", err)
		return 1
	}
	return code
}

func run(m *testing.M, opts Options) (int, error) {
	log := slog.Default()
	// The tests' controller-runtime clients log through slog, as the framework does.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	var err error
	if repoRoot, err = findRepoRoot(); err != nil {
		return 0, err
	}
	binDir := os.Getenv("KUBEBUILDER_ASSETS")
	if binDir == "" {
		if binDir, err = localcluster.BuildControlPlane(context.Background(), repoRoot); err != nil {
			return 0, err
		}
	}
	nodeBinDir := os.Getenv(localcluster.RealNodeBinDirEnv)
	if opts.RealNodes > 0 && nodeBinDir == "" {
		if nodeBinDir, err = localcluster.BuildRealNode(context.Background(), repoRoot); err != nil {
			return 0, err
		}
	}
	nodes := cmp.Or(opts.Nodes, 5)
	if s := os.Getenv("NODEMAINT_E2E_NODES"); s != "" {
		if nodes, err = strconv.Atoi(s); err != nil {
			return 0, fmt.Errorf("NODEMAINT_E2E_NODES: %w", err)
		}
	}
	pkg, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	parent := filepath.Join(repoRoot, "_output", "e2e")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp(parent, filepath.Base(pkg)+"-")
	if err != nil {
		return 0, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupted)
	go func() {
		sig := <-interrupted
		log.Info("Interrupted, stopping the cluster", "signal", sig.String(), "dir", dir)
		cancel()
		if err := localcluster.Stop(dir); err != nil {
			log.Error("Stopping the cluster", "err", err)
		}
		os.Exit(1)
	}()

	start := time.Now()
	cluster, err = localcluster.Start(ctx, localcluster.Options{
		Dir: dir, BinDir: binDir, Nodes: nodes, KillWithParent: true, Logger: log, EvictionRequestAPI: opts.EvictionRequestAPI,
		RealNodes: opts.RealNodes, NodeBinDir: nodeBinDir, RepoRoot: repoRoot,
	})
	if err != nil {
		return 0, fmt.Errorf("starting the cluster in %s: %w", dir, err)
	}
	code, err := func() (int, error) {
		if adminClient, err = client.New(cluster.RESTConfig(), client.Options{Scheme: Scheme}); err != nil {
			return 0, err
		}
		if err := install(ctx); err != nil {
			return 0, err
		}
		log.Info("The cluster is ready", "dir", dir, "nodes", nodes, "took", time.Since(start).Round(time.Millisecond))
		return m.Run(), nil
	}()
	if stopErr := cluster.Stop(); stopErr != nil {
		err = errors.Join(err, stopErr)
	}
	if code != 0 || err != nil {
		log.Info("Kept the cluster's directory, with its logs", "dir", dir)
		return code, err
	}
	return code, os.RemoveAll(dir)
}

// install applies the manifests of config/crd/bases and config/rbac, in the namespace
// nodemaint-controller runs in, and waits until the CRDs are established.
func install(ctx context.Context) error {
	return manifests.Install(ctx, adminClient, repoRoot, ControllerNamespace, fieldManager)
}

// Uninstall removes what Run installed (nodemaint's CRDs, its RBAC and ControllerNamespace with
// all in it), for a test that installs nodemaint as a user does, on a cluster that never had it;
// Run's install is made again when the test ends, once the test's own install is gone.
func Uninstall(t testing.TB) {
	t.Helper()
	ctx := t.Context()
	var objs []*unstructured.Unstructured
	for _, dir := range manifests.Dirs {
		read, err := manifests.Read(filepath.Join(repoRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, read...)
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(ControllerNamespace)
	objs = append(objs, ns)
	for _, obj := range objs {
		if err := adminClient.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Fatalf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	testutil.Eventually(t, NamespaceDeleteTimeout, "nodemaint's CRDs and namespace gone", func(ctx context.Context) (bool, string, error) {
		for _, obj := range objs {
			if err := adminClient.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()); !apierrors.IsNotFound(err) {
				return false, "", err
			}
		}
		return true, "", nil
	})
	t.Cleanup(func() {
		ctx := context.Background()
		// The test's install, its namespace included, may still be going.
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, NamespaceDeleteTimeout, true, func(ctx context.Context) (bool, error) {
			err := adminClient.Get(ctx, client.ObjectKeyFromObject(ns), ns.DeepCopy())
			return apierrors.IsNotFound(err), nil
		})
		if err == nil {
			err = install(ctx)
		}
		if err != nil {
			t.Errorf("installing nodemaint's CRDs and RBAC again: %v", err)
		}
	})
}

// Apply applies the manifests of the repository's directories (config/cluster-api, a test's
// testdata) as the installer does, and waits until their CRDs are established.
func Apply(t testing.TB, dirs ...string) {
	t.Helper()
	if err := manifests.Apply(t.Context(), adminClient, repoRoot, fieldManager, dirs...); err != nil {
		t.Fatal(err)
	}
}

// findRepoRoot returns the closest directory above the working directory with a go.mod.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Cluster returns the package's cluster.
func Cluster() *localcluster.Cluster { return cluster }

// Client returns a cluster-admin client that knows the nodemaint types.
func Client() client.Client { return adminClient }
