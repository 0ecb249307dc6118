// Package localcluster runs a real Kubernetes control plane on the local machine, with kwok
// playing the kubelets of fake nodes: etcd, kube-apiserver, kube-controller-manager (every
// default controller), kube-scheduler and kwok, as processes that outlive the program that
// started them. `make cluster-up` (hack/localcluster) and the end-to-end tests
// (test/e2e/framework) use it.
//
// Everything of a cluster lives in its directory:
//
//	cluster.json   binary directory and ports, for Open
//	kubeconfig     cluster-admin kubeconfig
//	pki/           CA, serving and client certificates, ServiceAccount signing key
//	kubeconfigs/   the components' kubeconfigs
//	etcd/          etcd data
//	kwok/          kwok's pod Stages
//	logs/          <component>.log
//	audit/         the API server's audit policy and log (audit.go)
//	run/           <component>.pid
//
// Processes are tracked through /proc, so this runs on Linux only.
package localcluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Ports are the ports a cluster listens on: on 127.0.0.1, kube-apiserver's on the real node's
// address when the cluster has one (APIServerHost).
type Ports struct {
	EtcdClient        int `json:"etcdClient"`
	EtcdPeer          int `json:"etcdPeer"`
	APIServer         int `json:"apiServer"`
	ControllerManager int `json:"controllerManager"`
	Scheduler         int `json:"scheduler"`
}

// DefaultPorts are the fixed ports of the cluster of `make cluster-up`, so that its kubeconfig
// stays valid across restarts. They are off the components' usual ports, to not clash with
// another local cluster, and below the ephemeral port range that free ports come from.
var DefaultPorts = Ports{EtcdClient: 22379, EtcdPeer: 22380, APIServer: 26443, ControllerManager: 20257, Scheduler: 20259}

// Options configure Start.
type Options struct {
	// Dir holds everything of the cluster. It is created if needed.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and
	// kwok, with kwok's Stage configs in BinDir/../stages, as hack/control-plane.sh builds them.
	BinDir string
	// Nodes is the number of fake nodes to create.
	Nodes int
	// Ports are the ports to listen on; nil picks free ones.
	Ports *Ports
	// KillWithParent makes the kernel kill the cluster's processes when the process that
	// started them dies (Linux's parent-death signal), so that a test binary killed by its
	// timeout leaves nothing behind.
	KillWithParent bool
	// Logger receives what the cluster does; nil means slog.Default().
	Logger *slog.Logger
	// EvictionRequestAPI serves KEP-4563's EvictionRequest API: kube-apiserver and
	// kube-controller-manager get the EvictionRequestAPI feature gate, kube-apiserver serves
	// lifecycle.k8s.io/v1alpha1. It is also on when $EVICTION_REQUEST_API is "true", so that
	// `EVICTION_REQUEST_API=true make cluster-up` (and make demo, and the e2e suites) start such a
	// cluster. A running cluster is reused only if it was started the same way.
	EvictionRequestAPI bool
	// RealNodes is the number of real nodes (0 or 1; see realnode.go): a kubelet with
	// containerd, runc and CNI plugins running pods for real, beside the kwok nodes. It needs
	// root and NodeBinDir.
	RealNodes int
	// NodeBinDir holds the real node's binaries, as hack/real-node.sh builds them.
	NodeBinDir string
	// RepoRoot is the repository the real node's images are built from ("." when empty).
	RepoRoot string
}

// EvictionRequestAPIEnv is the environment variable that turns Options.EvictionRequestAPI on.
const EvictionRequestAPIEnv = "EVICTION_REQUEST_API"

// EvictionRequestAPIFromEnv reports whether $EVICTION_REQUEST_API asks for the EvictionRequest API.
func EvictionRequestAPIFromEnv() bool { return os.Getenv(EvictionRequestAPIEnv) == "true" }

// Cluster is a running local cluster.
type Cluster struct {
	dir, binDir    string
	ports          Ports
	killWithParent bool
	// evictionRequestAPI: see Options.EvictionRequestAPI.
	evictionRequestAPI bool
	// audit: the API server writes an audit log (see AuditLog).
	audit bool
	// realNodes and nodeBinDir: see Options.RealNodes and Options.NodeBinDir.
	realNodes  int
	nodeBinDir string
	log        *slog.Logger
	config     *rest.Config
	client     kubernetes.Interface
}

// state is what <dir>/cluster.json records.
type state struct {
	BinDir             string `json:"binDir"`
	Ports              Ports  `json:"ports"`
	EvictionRequestAPI bool   `json:"evictionRequestAPI,omitempty"`
	// Audit: the API server writes the audit log (see AuditLog).
	Audit bool `json:"audit,omitempty"`
	// RealNodes and NodeBinDir: see Options.
	RealNodes  int    `json:"realNodes,omitempty"`
	NodeBinDir string `json:"nodeBinDir,omitempty"`
}

const (
	// startTimeout bounds the wait for one component to become healthy.
	startTimeout = time.Minute
	// nodeMonitorGracePeriod is how long a node may go without a heartbeat before
	// kube-controller-manager marks it NotReady (upstream default 50s). kwok renews the node
	// Leases every 10s (a quarter of nodeLeaseDuration), so this tolerates three missed renewals:
	// an API server restart of a few seconds must not look like failed nodes. With 20s, one
	// missed renewal did, and kube-controller-manager marked every pod of those nodes not Ready
	// (kwok marks them Ready again a second later, see the pod-ready-again stage, but the tests
	// count that as a disruption).
	nodeMonitorGracePeriod = 40 * time.Second
	// maxStartAttempts bounds the retries on another process taking a free port first.
	maxStartAttempts = 3
)

// Start starts a cluster in opts.Dir with opts.Nodes Ready nodes and returns once the
// default ServiceAccount exists. A cluster already running healthy in opts.Dir is reused
// (missing nodes are added); the remains of a stopped or broken one are removed first.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}

	evictionRequestAPI := opts.EvictionRequestAPI || EvictionRequestAPIFromEnv()
	if c, err := open(dir, log); err == nil {
		err := c.Healthy(ctx)
		if err == nil && c.evictionRequestAPI != evictionRequestAPI {
			err = fmt.Errorf("it was started with the EvictionRequest API %s", map[bool]string{true: "on", false: "off"}[c.evictionRequestAPI])
		}
		if err == nil && c.realNodes != opts.RealNodes {
			err = fmt.Errorf("it was started with %d real nodes", c.realNodes)
		}
		if err == nil {
			log.Info("Reusing the running cluster", "dir", dir)
			c.killWithParent = opts.KillWithParent
			return c, c.ensureNodes(ctx, opts.Nodes)
		}
		log.Info("Replacing the cluster that does not run", "dir", dir, "reason", err)
	}

	for attempt := 1; ; attempt++ {
		if err := stopAll(log, dir); err != nil {
			return nil, err
		}
		if err := clean(dir); err != nil {
			return nil, err
		}
		ports := opts.Ports
		if ports == nil {
			if ports, err = freePorts(); err != nil {
				return nil, err
			}
		}
		c := &Cluster{dir: dir, binDir: opts.BinDir, ports: *ports, killWithParent: opts.KillWithParent, evictionRequestAPI: evictionRequestAPI, audit: true,
			realNodes: opts.RealNodes, nodeBinDir: opts.NodeBinDir, log: log}
		var err error
		if c.realNodes > 0 {
			// kube-apiserver listens on the node's bridge: it is made first.
			err = c.prepareRealNode()
		}
		if err == nil {
			err = c.start(ctx, opts.Nodes)
		}
		if err == nil && c.realNodes > 0 {
			err = c.startRealNode(ctx, cmp.Or(opts.RepoRoot, "."))
		}
		if err == nil {
			return c, nil
		}
		if opts.Ports != nil || !errors.Is(err, errAddressInUse) || attempt == maxStartAttempts {
			return nil, errors.Join(err, stopAll(log, dir))
		}
		log.Info("A port was taken meanwhile, starting again on other ports", "err", err)
	}
}

// Open returns the cluster recorded in dir, running or not.
func Open(dir string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return open(dir, slog.Default())
}

func open(dir string, log *slog.Logger) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, "cluster.json"), err)
	}
	c := &Cluster{dir: dir, binDir: s.BinDir, ports: s.Ports, evictionRequestAPI: s.EvictionRequestAPI, audit: s.Audit,
		realNodes: s.RealNodes, nodeBinDir: s.NodeBinDir, log: log}
	return c, c.connect()
}

// Stop stops every process of the cluster in dir and waits until they are gone. It keeps
// the directory, for its logs; the next Start in dir starts afresh. Stopping a cluster that
// does not run does nothing.
func Stop(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return stopAll(slog.Default(), dir)
}

// Stop stops every process of the cluster; see the package-level Stop.
func (c *Cluster) Stop() error { return stopAll(c.log, c.dir) }

// Dir returns the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// BinDir returns the directory of the cluster's binaries, kubectl included.
func (c *Cluster) BinDir() string { return c.binDir }

// Kubeconfig returns the path of the cluster-admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.dir, "kubeconfig") }

// EvictionRequestAPI reports whether the cluster serves KEP-4563's EvictionRequest API.
func (c *Cluster) EvictionRequestAPI() bool { return c.evictionRequestAPI }

// Ports returns the ports the cluster listens on.
func (c *Cluster) Ports() Ports { return c.ports }

// RESTConfig returns a cluster-admin client configuration, with client-side rate limiting
// raised far above client-go's defaults.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// Client returns a cluster-admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// WriteKubeconfig writes to path a kubeconfig for the cluster that authenticates as user.
func (c *Cluster) WriteKubeconfig(path string, user *clientcmdapi.AuthInfo) error {
	ca, err := os.ReadFile(filepath.Join(c.dir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	const name = "nodemaint-local"
	config := clientcmdapi.NewConfig()
	config.Clusters[name] = &clientcmdapi.Cluster{Server: c.serverURL(), CertificateAuthorityData: ca}
	config.AuthInfos[name] = user
	config.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	config.CurrentContext = name
	return clientcmd.WriteToFile(*config, path)
}

func (c *Cluster) serverURL() string {
	return "https://" + net.JoinHostPort(c.APIServerHost(), strconv.Itoa(c.ports.APIServer))
}

// Server returns the URL of kube-apiserver.
func (c *Cluster) Server() string { return c.serverURL() }

// APIServerHost returns the address kube-apiserver listens on and advertises: 127.0.0.1, or with
// a real node the node's address on its pods' bridge, so that the pods reach it through the
// kubernetes Service as in any cluster (a Service cannot point at a loopback address).
func (c *Cluster) APIServerHost() string {
	if c.realNodes > 0 {
		return realNodeIP
	}
	return "127.0.0.1"
}

// start starts the processes of a new cluster and creates its nodes.
func (c *Cluster) start(ctx context.Context, nodes int) error {
	if err := generatePKI(filepath.Join(c.dir, "pki"), net.ParseIP(c.APIServerHost())); err != nil {
		return err
	}
	if err := c.writeConfigs(); err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}

	etcdExited, err := c.startProcess(etcd)
	if err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, etcd, etcdExited, c.etcdHealthy); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	exited := map[string]<-chan struct{}{}
	for _, name := range []string{kubeControllerManager, kubeScheduler, kwok} {
		if exited[name], err = c.startProcess(name); err != nil {
			return err
		}
	}
	if err := c.waitHealthy(ctx, kubeControllerManager, exited[kubeControllerManager], c.healthz(c.ports.ControllerManager)); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, kubeScheduler, exited[kubeScheduler], c.healthz(c.ports.Scheduler)); err != nil {
		return err
	}
	if err := c.ensureNodes(ctx, nodes); err != nil {
		return err
	}
	// Pods can only be created in a namespace once its default ServiceAccount exists.
	return c.waitHealthy(ctx, kubeControllerManager, exited[kubeControllerManager], func(ctx context.Context) error {
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// writeConfigs writes cluster.json, the kubeconfigs and kwok's pod Stages.
func (c *Cluster) writeConfigs() error {
	b, err := json.MarshalIndent(state{BinDir: c.binDir, Ports: c.ports, EvictionRequestAPI: c.evictionRequestAPI, Audit: c.audit, RealNodes: c.realNodes, NodeBinDir: c.nodeBinDir}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "cluster.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "kubeconfigs"), 0o755); err != nil {
		return err
	}
	for _, name := range []string{"admin", kubeControllerManager, kubeScheduler, kwok} {
		path := filepath.Join(c.dir, "kubeconfigs", name+".kubeconfig")
		if name == "admin" {
			path = c.Kubeconfig()
		}
		if err := c.WriteKubeconfig(path, &clientcmdapi.AuthInfo{
			ClientCertificate: filepath.Join(c.dir, "pki", name+".crt"),
			ClientKey:         filepath.Join(c.dir, "pki", name+".key"),
		}); err != nil {
			return err
		}
	}
	if err := c.writeAuditPolicy(); err != nil {
		return err
	}
	return writeKwokStages(filepath.Join(c.dir, "kwok"), c.kwokStagesDir())
}

// connect builds the cluster-admin clients.
func (c *Cluster) connect() error {
	config, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return err
	}
	config.QPS, config.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	c.config, c.client = config, client
	return nil
}

// args returns the command line of the component name, with the EvictionRequest API's flags
// where the cluster serves it.
func (c *Cluster) args(name string) []string {
	args := c.baseArgs(name)
	if c.evictionRequestAPI {
		switch name {
		case kubeAPIServer:
			args = append(args, "--feature-gates=EvictionRequestAPI=true", "--runtime-config=lifecycle.k8s.io/v1alpha1=true")
		case kubeControllerManager:
			// It has no evictionrequest-controller (1.37), but knows the gate (the pod field).
			args = append(args, "--feature-gates=EvictionRequestAPI=true")
		}
	}
	return args
}

// baseArgs returns the command line of the component name.
func (c *Cluster) baseArgs(name string) []string {
	pki := func(file string) string { return filepath.Join(c.dir, "pki", file) }
	kubeconfig := filepath.Join(c.dir, "kubeconfigs", name+".kubeconfig")
	loopback := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	switch name {
	case etcd:
		return []string{
			"--name=default",
			"--data-dir=" + filepath.Join(c.dir, "etcd"),
			"--listen-client-urls=http://" + loopback(c.ports.EtcdClient),
			"--advertise-client-urls=http://" + loopback(c.ports.EtcdClient),
			"--listen-peer-urls=http://" + loopback(c.ports.EtcdPeer),
			"--initial-advertise-peer-urls=http://" + loopback(c.ports.EtcdPeer),
			"--initial-cluster=default=http://" + loopback(c.ports.EtcdPeer),
			// A throwaway cluster: losing the last writes in a machine crash is fine.
			"--unsafe-no-fsync",
			"--log-level=warn",
		}
	case kubeAPIServer:
		const issuer = "https://kubernetes.default.svc.cluster.local"
		args := []string{
			"--bind-address=" + c.APIServerHost(),
			"--advertise-address=" + c.APIServerHost(),
			"--secure-port=" + strconv.Itoa(c.ports.APIServer),
			"--etcd-servers=http://" + loopback(c.ports.EtcdClient),
			"--tls-cert-file=" + pki("serving.crt"),
			"--tls-private-key-file=" + pki("serving.key"),
			"--client-ca-file=" + pki("ca.crt"),
			// The aggregation layer's front proxy, whose CA kube-controller-manager and
			// kube-scheduler look up for their delegated authentication.
			"--requestheader-client-ca-file=" + pki("ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + pki("front-proxy-client.crt"),
			"--proxy-client-key-file=" + pki("front-proxy-client.key"),
			"--authorization-mode=Node,RBAC",
			"--service-account-issuer=" + issuer,
			"--api-audiences=" + issuer,
			"--service-account-key-file=" + pki("sa.pub"),
			"--service-account-signing-key-file=" + pki("sa.key"),
			"--service-cluster-ip-range=" + serviceClusterIPRange,
			"--allow-privileged",
			// Close watches on SIGTERM rather than wait for their clients to go: a restart
			// takes seconds, not a minute.
			"--shutdown-watch-termination-grace-period=1s",
		}
		if c.realNodes > 0 {
			args = append(args, c.realNodeAPIServerArgs()...)
		} else {
			// The kubernetes Service cannot point at a loopback address.
			args = append(args, "--endpoint-reconciler-type=none")
		}
		if c.audit {
			args = append(args, c.auditFlags()...)
		}
		return args
	case kubeControllerManager:
		return []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(c.ports.ControllerManager),
			"--tls-cert-file=" + pki("serving.crt"),
			"--tls-private-key-file=" + pki("serving.key"),
			"--controllers=*",
			"--use-service-account-credentials",
			"--root-ca-file=" + pki("ca.crt"),
			"--service-account-private-key-file=" + pki("sa.key"),
			"--leader-elect=false",
			"--node-monitor-grace-period=" + nodeMonitorGracePeriod.String(),
			"--kube-api-qps=100",
			"--kube-api-burst=200",
		}
	case kubeScheduler:
		return []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(c.ports.Scheduler),
			"--tls-cert-file=" + pki("serving.crt"),
			"--tls-private-key-file=" + pki("serving.key"),
			"--leader-elect=false",
			// Its default of 50 requests a second (a binding and an Event per pod) makes
			// scheduling thousands of pods take minutes; kube-controller-manager gets the same.
			"--kube-api-qps=100",
			"--kube-api-burst=200",
		}
	case kwok:
		return c.kwokArgs(kubeconfig)
	}
	panic("unknown component " + name)
}

// startAPIServer starts kube-apiserver and waits until it is ready.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	exited, err := c.startProcess(kubeAPIServer)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, kubeAPIServer, exited, func(ctx context.Context) error {
		return c.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	})
}

// RestartAPIServer stops kube-apiserver (SIGTERM) and starts it again on the same port,
// returning once it is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	if err := stopProcesses(c.log, c.dir, kubeAPIServer); err != nil {
		return err
	}
	// The port can stay taken for a moment after the process is gone.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, startTimeout, true, func(context.Context) (bool, error) {
		l, err := net.Listen("tcp", net.JoinHostPort(c.APIServerHost(), strconv.Itoa(c.ports.APIServer)))
		if err != nil {
			return false, nil
		}
		return true, l.Close()
	})
	if err != nil {
		return fmt.Errorf("port %d of kube-apiserver still taken: %w", c.ports.APIServer, err)
	}
	return c.startAPIServer(ctx)
}

// PIDs returns the pids of the cluster's running processes, by component.
func (c *Cluster) PIDs() map[string]int {
	pids := map[string]int{}
	for _, name := range append(Components, RealNodeComponents...) {
		if pid, ok := runningPid(c.dir, name); ok {
			pids[name] = pid
		}
	}
	return pids
}

// Healthy reports whether every process of the cluster runs and kube-apiserver is ready.
func (c *Cluster) Healthy(ctx context.Context) error {
	for _, name := range Components {
		if _, ok := runningPid(c.dir, name); !ok {
			return fmt.Errorf("%s does not run", name)
		}
	}
	if c.realNodes > 0 {
		for _, name := range RealNodeComponents {
			if _, ok := runningPid(c.dir, name); !ok {
				return fmt.Errorf("the real node's %s does not run", name)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// waitHealthy polls check until it succeeds, failing early when the component exits.
func (c *Cluster) waitHealthy(ctx context.Context, name string, exited <-chan struct{}, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, exitError(c.dir, name)
		default:
		}
		last = check(ctx)
		return last == nil, nil
	})
	if wait.Interrupted(err) && last != nil {
		return fmt.Errorf("%s is not healthy after %v: %w (log: %s)", name, startTimeout, last, logPath(c.dir, name))
	}
	return err
}

func (c *Cluster) etcdHealthy(ctx context.Context) error {
	return httpGetOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", c.ports.EtcdClient))
}

// healthz returns a check of the /healthz endpoint of the component serving on port, with
// the cluster's serving certificate.
func (c *Cluster) healthz(port int) func(context.Context) error {
	return func(ctx context.Context) error {
		config := rest.CopyConfig(c.config)
		config.Host = "https://127.0.0.1:" + strconv.Itoa(port)
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			return err
		}
		return client.Discovery().RESTClient().Get().AbsPath("/healthz").Do(ctx).Error()
	}
}

// freePorts picks free 127.0.0.1 ports. They are free now: another process may take one
// before the component listens on it, which Start detects and retries.
func freePorts() (*Ports, error) {
	var ports [5]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Closed only when all are picked, so that they differ.
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return &Ports{EtcdClient: ports[0], EtcdPeer: ports[1], APIServer: ports[2], ControllerManager: ports[3], Scheduler: ports[4]}, nil
}

// clean removes what a previous cluster left in dir, and nothing else.
func clean(dir string) error {
	for _, name := range []string{"cluster.json", "kubeconfig", "pki", "kubeconfigs", "etcd", "kwok", "logs", "run", "audit", "realnode"} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return os.MkdirAll(dir, 0o755)
}

// BuildRealNode runs hack/real-node.sh of the repository at repoRoot, which builds the real
// node's binaries once per machine, and returns their directory.
func BuildRealNode(ctx context.Context, repoRoot string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "hack", "real-node.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/real-node.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// BuildControlPlane runs hack/control-plane.sh of the repository at repoRoot, which builds
// the binaries a cluster needs once per machine, and returns their directory. The build
// reports its progress on stderr.
func BuildControlPlane(ctx context.Context, repoRoot string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "hack", "control-plane.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/control-plane.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
