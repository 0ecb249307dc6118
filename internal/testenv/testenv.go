// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest) with
// nodemaint's CRDs installed, for integration tests. The binaries come from KUBEBUILDER_ASSETS, which
// `make test` points at the control plane hack/control-plane.sh builds.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Scheme knows the core types and nodemaint's.
var Scheme = newScheme()

func newScheme() *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(s))
	return s
}

// Env is a running API server.
type Env struct {
	env    *envtest.Environment
	Config *rest.Config
	Client client.Client
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start starts etcd and kube-apiserver and installs the CRDs under config/crd/bases.
func Start() (*Env, error) { return StartWith(Options{}) }

// Options configure StartWith.
type Options struct {
	// EvictionRequestAPI starts kube-apiserver with the EvictionRequestAPI feature gate and
	// lifecycle.k8s.io/v1alpha1 served (KEP-4563's EvictionRequest and Eviction, and the pod field
	// spec.evictionResponders).
	EvictionRequestAPI bool
	// AuditPolicy, with AuditLog, has kube-apiserver write an audit log of that policy (an
	// audit.k8s.io/v1 Policy, YAML) to the file AuditLog, in JSON lines: the invariant checker
	// reads who wrote what (test/invariants).
	AuditPolicy, AuditLog string
	// FeatureGates are more kube-apiserver feature gates ("GenericWorkload=true"), beside
	// EvictionRequestAPI's.
	FeatureGates []string
}

// EvictionRequestAPIArgs are the kube-apiserver flags that serve KEP-4563's EvictionRequest API.
var EvictionRequestAPIArgs = map[string]string{
	"feature-gates":  "EvictionRequestAPI=true",
	"runtime-config": "lifecycle.k8s.io/v1alpha1=true",
}

// StartWith starts etcd and kube-apiserver configured by opts and installs the CRDs under
// config/crd/bases.
func StartWith(opts Options) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or set it to the output of hack/control-plane.sh")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme,
		// envtest's 20s is short on a busy 2-core machine; test/localcluster waits a minute too.
		ControlPlaneStartTimeout: time.Minute,
	}
	if opts.EvictionRequestAPI {
		args := env.ControlPlane.GetAPIServer().Configure()
		for flag, value := range EvictionRequestAPIArgs {
			args.Set(flag, value)
		}
	}
	if opts.AuditLog != "" {
		policy := opts.AuditLog + ".policy.yaml"
		if err := os.WriteFile(policy, []byte(opts.AuditPolicy), 0o644); err != nil {
			return nil, err
		}
		args := env.ControlPlane.GetAPIServer().Configure()
		args.Set("audit-policy-file", policy)
		args.Set("audit-log-path", opts.AuditLog)
		args.Set("audit-log-format", "json")
		args.Set("audit-log-mode", "blocking")
	}
	if len(opts.FeatureGates) > 0 {
		args := env.ControlPlane.GetAPIServer().Configure()
		gates := opts.FeatureGates
		if g := args.Get("feature-gates").Get(nil); len(g) > 0 {
			gates = append(g, gates...)
		}
		args.Set("feature-gates", strings.Join(gates, ","))
	}
	cfg, err := startTiedToProcess(env)
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{env: env, Config: cfg, Client: c}, nil
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.env.Stop() }

// Main is the TestMain of a test package that needs an API server and nothing else: it starts one
// into *env, runs the package's tests, stops it and exits with the tests' code.
func Main(m *testing.M, env **Env) {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	_ = e.Stop()
	os.Exit(code)
}
