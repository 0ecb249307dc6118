package machine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// KubeconfigSuffix and KubeconfigKey name a Cluster's kubeconfig Secret and its key, as
	// Cluster API writes it (<cluster>-kubeconfig, in the Cluster's namespace, key value).
	KubeconfigSuffix = "-kubeconfig"
	KubeconfigKey    = "value"

	// workloadQPS and workloadBurst bound the requests to each workload cluster: a few reads and
	// writes per Machine being deleted.
	workloadQPS, workloadBurst = 10, 20
	// workloadTimeout bounds each request to a workload cluster, so that one that does not
	// answer holds a worker no longer.
	workloadTimeout = 15 * time.Second
)

// Workload is a workload cluster as nodemaint reaches it.
type Workload struct {
	// Client reads Nodes and NodeMaintenances and creates and deletes NodeMaintenances there.
	Client client.Client
	// Local: it is this cluster (--cluster-api-self), read through the manager's cache.
	Local bool
}

// Workloads reaches the workload clusters of Machines, as Cluster API's ClusterCache does (but
// with no cache: the few objects nodemaint reads there it reads when it needs them): through the
// Cluster's kubeconfig Secret, one client per Cluster, made again when the Secret changes and
// forgotten when the Cluster goes (Forget). The Cluster named by Self is this cluster: its
// Machines' nodes are read, and their NodeMaintenances written, with Local.
type Workloads struct {
	// Local is this cluster's client (the manager's).
	Local client.Client
	// Secrets reads the kubeconfig Secrets, uncached: nodemaint may get Secrets, not list or
	// watch them.
	Secrets client.Reader
	// Scheme knows Nodes and NodeMaintenances.
	Scheme *runtime.Scheme
	// Self is the Cluster that is this cluster (--cluster-api-self); zero: none.
	Self types.NamespacedName
	// UserAgent is the workload clients' user agent.
	UserAgent string

	mu      sync.Mutex
	remotes map[types.NamespacedName]*remote
}

// remote is the client of a workload cluster, made from the kubeconfig Secret of that
// resourceVersion and UID.
type remote struct {
	secretUID       types.UID
	resourceVersion string
	client          client.Client
	http            *http.Client
}

// errUnreachable is a reason the workload cluster cannot be reached that waiting does not change
// by itself: the Warning Event says it.
type errUnreachable struct{ why string }

func (e errUnreachable) Error() string { return e.why }

// Unreachable returns why err says the workload cluster cannot be reached, or "" when it is
// another error (the API server's, to retry).
func Unreachable(err error) string {
	var u errUnreachable
	if errors.As(err, &u) {
		return u.why
	}
	return ""
}

// Get returns the workload cluster of the Cluster: this cluster's for Self, else the one its
// kubeconfig Secret names. An error Unreachable says why describes what is missing or unusable.
func (w *Workloads) Get(ctx context.Context, cluster types.NamespacedName) (Workload, error) {
	if w.Self != (types.NamespacedName{}) && cluster == w.Self {
		return Workload{Client: w.Local, Local: true}, nil
	}
	key := types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name + KubeconfigSuffix}
	secret := &corev1.Secret{}
	if err := w.Secrets.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			w.Forget(cluster)
			self := "no --cluster-api-self"
			if w.Self != (types.NamespacedName{}) {
				self = "--cluster-api-self names " + w.Self.String()
			}
			return Workload{}, errUnreachable{fmt.Sprintf("Cluster %s has no kubeconfig Secret %s, and it is not this cluster (%s): nodemaint cannot reach its nodes", cluster, key, self)}
		}
		if apierrors.IsForbidden(err) {
			return Workload{}, errUnreachable{fmt.Sprintf("nodemaint may not get the kubeconfig Secret %s of Cluster %s (the ClusterRole nodemaint-cluster-api-kubeconfigs is not bound in namespace %s): %v", key, cluster, cluster.Namespace, err)}
		}
		return Workload{}, fmt.Errorf("reading the kubeconfig Secret %s: %w", key, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.remotes[cluster]; r != nil && r.secretUID == secret.UID && r.resourceVersion == secret.ResourceVersion {
		return Workload{Client: r.client}, nil
	}
	w.forgetLocked(cluster)
	cfg, err := restConfig(secret.Data[KubeconfigKey])
	if err != nil {
		return Workload{}, errUnreachable{fmt.Sprintf("the kubeconfig Secret %s of Cluster %s: %v", key, cluster, err)}
	}
	cfg.QPS, cfg.Burst, cfg.Timeout, cfg.UserAgent = workloadQPS, workloadBurst, workloadTimeout, w.UserAgent
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return Workload{}, errUnreachable{fmt.Sprintf("the kubeconfig Secret %s of Cluster %s: %v", key, cluster, err)}
	}
	c, err := client.New(cfg, client.Options{Scheme: w.Scheme, HTTPClient: httpClient})
	if err != nil {
		httpClient.CloseIdleConnections()
		return Workload{}, fmt.Errorf("a client of Cluster %s: %w", cluster, err)
	}
	if w.remotes == nil {
		w.remotes = map[types.NamespacedName]*remote{}
	}
	w.remotes[cluster] = &remote{secretUID: secret.UID, resourceVersion: secret.ResourceVersion, client: c, http: httpClient}
	return Workload{Client: c}, nil
}

// Forget drops the client of the Cluster, and closes its connections.
func (w *Workloads) Forget(cluster types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(cluster)
}

func (w *Workloads) forgetLocked(cluster types.NamespacedName) {
	if r := w.remotes[cluster]; r != nil {
		r.http.CloseIdleConnections()
		delete(w.remotes, cluster)
	}
}

// Len is the number of workload clients held.
func (w *Workloads) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.remotes)
}

// restConfig is the client configuration of a kubeconfig Secret's value. Its credentials and
// certificates must be in it: a kubeconfig that names files (a token file, a client certificate,
// a CA) or runs a program (exec, an auth provider) would authenticate as whatever nodemaint's
// own files and programs are, such as its ServiceAccount token; whoever may write the Secret
// could get nodemaint's rights. Cluster API itself refuses exec and auth providers.
func restConfig(data []byte) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("no key %q", KubeconfigKey)
	}
	config, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	if err := selfContained(config); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*config, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("not a usable kubeconfig: %w", err)
	}
	return cfg, nil
}

// selfContained refuses a kubeconfig that names files or programs.
func selfContained(config *clientcmdapi.Config) error {
	for name, a := range config.AuthInfos {
		switch {
		case a.TokenFile != "", a.ClientCertificate != "", a.ClientKey != "":
			return fmt.Errorf("user %q names a file (tokenFile, client-certificate, client-key): only inline credentials are used", name)
		case a.Exec != nil, a.AuthProvider != nil:
			return fmt.Errorf("user %q runs a credential plugin (exec, auth-provider): only inline credentials are used", name)
		}
	}
	for name, c := range config.Clusters {
		if c.CertificateAuthority != "" {
			return fmt.Errorf("cluster %q names a certificate-authority file: only inline certificate-authority-data is used", name)
		}
	}
	return nil
}
