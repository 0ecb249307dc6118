package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/machine"
	"github.com/nodemaint/nodemaint/internal/testenv"
	"github.com/nodemaint/nodemaint/test/invariants"
	"github.com/nodemaint/nodemaint/test/manifests"
)

// Management is a Cluster API management cluster beside the package's cluster (its workload
// cluster): etcd and kube-apiserver (envtest) with nodemaint's CRDs and RBAC installed, and an
// audit log of the Machines' writes for the invariant checker.
type Management struct {
	// Client is the API server's admin; it knows the Kubernetes, nodemaint and Cluster API types.
	Client client.Client
	Config *rest.Config
	// ControllerKubeconfig authenticates as nodemaint-controller's ServiceAccount;
	// AdminKubeconfig as the API server's admin.
	ControllerKubeconfig, AdminKubeconfig string
	// AuditLog is the API server's audit log (invariants.MachineAuditPolicy).
	AuditLog string
}

// managementScheme knows the Kubernetes, CRD, nodemaint and Cluster API types.
var managementScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	return s
}()

// StartManagementCluster starts a management cluster, stopped when t ends. Cluster API is not
// installed in it (InstallClusterAPI).
func StartManagementCluster(t testing.TB) *Management {
	t.Helper()
	// envtest logs through controller-runtime's logger: not here.
	ctrllog.SetLogger(logr.Discard())
	m, env, err := startManagement(t.Context(), t.TempDir(), false)
	if env != nil {
		t.Cleanup(func() { _ = env.Stop() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// StartManagementClusterInBackground starts a management cluster with Cluster API installed
// while the test goes on, stopped when t ends; the function returned waits until it is ready
// (failing the test it is given where it did not start).
func StartManagementClusterInBackground(t testing.TB) func(testing.TB) *Management {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	dir := t.TempDir()
	done := make(chan struct{})
	var (
		m   *Management
		env *testenv.Env
		err error
	)
	go func() {
		defer close(done)
		m, env, err = startManagement(context.Background(), dir, true)
	}()
	t.Cleanup(func() {
		<-done
		if env != nil {
			_ = env.Stop()
		}
	})
	return func(t testing.TB) *Management {
		t.Helper()
		<-done
		if err != nil {
			t.Fatalf("starting the management cluster: %v", err)
		}
		return m
	}
}

// startManagement starts a management cluster with its files in dir; env, when not nil, is to
// be stopped.
func startManagement(ctx context.Context, dir string, clusterAPI bool) (m *Management, env *testenv.Env, err error) {
	auditLog := filepath.Join(dir, "audit.log")
	if env, err = testenv.StartWith(testenv.Options{AuditPolicy: invariants.MachineAuditPolicy, AuditLog: auditLog}); err != nil {
		return nil, nil, err
	}
	m = &Management{Config: env.Config, AuditLog: auditLog}
	if m.Client, err = client.New(env.Config, client.Options{Scheme: managementScheme}); err != nil {
		return nil, env, err
	}
	if err := manifests.Install(ctx, m.Client, testenv.RepoRoot(), ControllerNamespace, fieldManager); err != nil {
		return nil, env, err
	}
	if clusterAPI {
		if err := m.installClusterAPI(ctx); err != nil {
			return nil, env, err
		}
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return nil, env, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ControllerNamespace).CreateToken(ctx, ControllerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, env, err
	}
	m.ControllerKubeconfig = filepath.Join(dir, "controller.kubeconfig")
	m.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	for path, user := range map[string]*clientcmdapi.AuthInfo{
		m.ControllerKubeconfig: {Token: tr.Status.Token},
		m.AdminKubeconfig:      {ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData},
	} {
		if err := clientcmd.WriteToFile(*kubeconfigOf(env.Config.Host, env.Config.CAData, user), path); err != nil {
			return nil, env, err
		}
	}
	return m, env, nil
}

// InstallClusterAPI installs Cluster API's Machine and Cluster CRDs in the management cluster,
// and nodemaint's rights on them (config/cluster-api).
func (m *Management) InstallClusterAPI(t testing.TB) {
	t.Helper()
	if err := m.installClusterAPI(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func (m *Management) installClusterAPI(ctx context.Context) error {
	return manifests.Apply(ctx, m.Client, testenv.RepoRoot(), fieldManager, "test/e2e/testdata/cluster-api", "config/cluster-api")
}

// Namespace creates the namespace in the management cluster.
func (m *Management) Namespace(t testing.TB, name string) string {
	t.Helper()
	if err := m.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// Cluster creates a Cluster in the namespace and its kubeconfig Secret, as Cluster API does.
func (m *Management) Cluster(t testing.TB, ns, name string, kubeconfig []byte) {
	t.Helper()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}}
	if err := m.Client.Create(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + machine.KubeconfigSuffix, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Type:       "cluster.x-k8s.io/secret",
		Data:       map[string][]byte{machine.KubeconfigKey: kubeconfig},
	}
	if err := m.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
}

// kubeconfigOf is a kubeconfig of the server for the user.
func kubeconfigOf(server string, ca []byte, user *clientcmdapi.AuthInfo) *clientcmdapi.Config {
	const name = "e2e"
	config := clientcmdapi.NewConfig()
	config.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	config.AuthInfos[name] = user
	config.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	config.CurrentContext = name
	return config
}

// WorkloadKubeconfig applies test/e2e/testdata/cluster-api-workload to the package's cluster and
// returns its kubeconfig, all inline, for that user (with exactly the rights nodemaint uses
// through a kubeconfig Secret): a workload cluster's kubeconfig Secret's value.
func WorkloadKubeconfig(t *testing.T) []byte {
	t.Helper()
	Apply(t, "test/e2e/testdata/cluster-api-workload")
	token, err := ServiceAccountToken(t.Context(), ControllerNamespace, "capi-workload-access")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(Cluster().Dir(), "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := clientcmd.Write(*kubeconfigOf(Cluster().RESTConfig().Host, ca, &clientcmdapi.AuthInfo{Token: token}))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
