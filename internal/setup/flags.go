package setup

import (
	"flag"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/internal/features"
	"github.com/nodemaint/nodemaint/internal/permissions"
	evictionrequest "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// Flags are nodemaint-controller's command-line flags (AddFlags), parsed in this one place; the
// command turns them into Options.
type Flags struct {
	MetricsAddr, ProbeAddr  string
	PprofAddr               string
	MetricsSecure           bool
	MetricsCertPath         string
	MetricsCertName         string
	MetricsCertKey          string
	EnableHTTP2             bool
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	Concurrency             int
	ResponderConcurrency    int
	EvictionConcurrency     int
	QPS                     float32
	Burst                   int
	StatusBatchDelay        time.Duration
	MaxEvictions            int64
	EvictionMaxBackoff      time.Duration
	SurgeTimeout            time.Duration
	OwnPodsNamespace        string
	OwnPodsSelector         string
	EvacuationProtocol      string
	EvictionController      string
	EvictionControllerName  string
	ClusterAPI              bool
	ClusterAPISelf          string
	PrometheusURL           string
	AlertPoll               time.Duration
	PermissionInterval      time.Duration
	// Version: print the version and exit.
	Version bool
	// Zap are the logger's options (controller-runtime's zap flags).
	Zap zap.Options
}

// DefaultNamespace is the leader election namespace of a controller that runs outside a pod.
const DefaultNamespace = "nodemaint-system"

// AddFlags registers the flags on fs, with their defaults.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint (/metrics); 0 disables it.")
	fs.BoolVar(&f.MetricsSecure, "metrics-secure", true, "Serve the metrics over HTTPS, to clients that authenticate with a bearer token (TokenReview) and may get the non-resource URL /metrics (SubjectAccessReview; the ClusterRole nodemaint-metrics-reader grants it). With false, plain HTTP to anyone who can reach the port.")
	fs.StringVar(&f.MetricsCertPath, "metrics-cert-path", "", "Directory of the metrics server's certificate and key (e.g. from cert-manager), reloaded when they change. Default: a self-signed certificate made at start.")
	fs.StringVar(&f.MetricsCertName, "metrics-cert-name", "tls.crt", "File name of the metrics server's certificate in --metrics-cert-path.")
	fs.StringVar(&f.MetricsCertKey, "metrics-cert-key", "tls.key", "File name of the metrics server's key in --metrics-cert-path.")
	fs.BoolVar(&f.EnableHTTP2, "enable-http2", false, "Serve the metrics over HTTP/2 too. Off by default: HTTP/2 Stream Cancellation and Rapid Reset (CVE-2023-44487, CVE-2023-39325).")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&f.PprofAddr, "pprof-bind-address", "", "Address of the Go profiling endpoints (/debug/pprof/: heap, CPU); empty disables them. Bind it to localhost: profiles are not authenticated.")
	fs.BoolVar(&f.LeaderElect, "leader-elect", true, "Elect a leader, so that only one replica reconciles at a time.")
	fs.StringVar(&f.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease. Default: the controller's own namespace ($POD_NAMESPACE from the downward API, else its ServiceAccount's namespace file), so that it follows the namespace its Role was installed in; outside a pod, "+DefaultNamespace+".")
	fs.DurationVar(&f.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a replica that stopped renewing keeps the leadership.")
	fs.DurationVar(&f.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader tries to renew before it gives up the leadership.")
	fs.DurationVar(&f.RetryPeriod, "leader-election-retry-period", 2*time.Second, "How often replicas try to acquire or renew the leadership.")
	fs.IntVar(&f.Concurrency, "concurrency", 8, "Reconciles run in parallel, per controller (the Deployment evacuation responder: see --deployment-responder-concurrency).")
	fs.IntVar(&f.ResponderConcurrency, "deployment-responder-concurrency", 32, "Deployments the Deployment evacuation responder reconciles in parallel. Its reconciles wait on the API server (the answers of a Deployment's newly requested pods, its surge's patch), not on CPU, and each Deployment with a new request waits for a worker: with too few, an answer comes after a round over every evacuating Deployment, which may be past a short evacuationResponseTimeout. Its token bucket (--kube-api-qps) bounds what they send.")
	fs.IntVar(&f.EvictionConcurrency, "eviction-controller-concurrency", 32, "Target pods nodemaint's Eviction controller (--eviction-controller) reconciles in parallel. A pod's Eviction takes a few of its reconciles (created, its responder made Active, collected), each waiting on the API server, not on CPU: with too few, the pods of a large drain wait for their responder's turn past the evacuationResponseTimeout. Under the EvictionRequest protocol the drain creates its requests as fast as this controller looks at them: at most twice this many wait for their first look at once.")
	fs.Float32Var(&f.QPS, "kube-api-qps", 100, "Requests per second to the API server (client-side rate limit): the node and NodeMaintenance controllers share one token bucket of this size; the Deployment evacuation responder and the Eviction controller have one each of their own of the same size, so that the answers, which have a deadline, never wait behind the requests of a large maintenance; leader election has its own.")
	fs.IntVar(&f.Burst, "kube-api-burst", 200, "Burst of requests to the API server, per token bucket (see --kube-api-qps).")
	fs.DurationVar(&f.StatusBatchDelay, "status-batch-delay", time.Second, "How long pod changes are gathered before a NodeMaintenance status is written.")
	fs.Int64Var(&f.MaxEvictions, "max-concurrent-evictions", 20, "Evictions in flight at once, across all nodes.")
	fs.DurationVar(&f.EvictionMaxBackoff, "eviction-max-backoff", 5*time.Second, "The longest wait before a refused eviction (a PodDisruptionBudget) of a pod is tried again, by the drain and by the imperative evictor; it backs off exponentially from 1s. kubectl drain retries every 5s.")
	fs.DurationVar(&f.SurgeTimeout, "deployment-surge-timeout", deployment.DefaultSurgeTimeout, "How long the Deployment evacuation responder waits for surged replacements that make no progress (none created, scheduled, initialized or Ready; plus the Deployment's minReadySeconds) before it gives up and lets eviction move the pods. This bound is for replacements that show a problem (unschedulable, failing to start, not created); a surge that is only slow gets the Deployment's progressDeadlineSeconds if that is longer.")
	fs.StringVar(&f.OwnPodsNamespace, "own-pods-namespace", "", "Namespace of nodemaint-controller's own pods, which nodemaint asks to move like any other but never evicts or deletes. Default: $POD_NAMESPACE (the downward API), else --leader-election-namespace.")
	fs.StringVar(&f.OwnPodsSelector, "own-pods-selector", "app.kubernetes.io/name=nodemaint-controller", "Label selector of nodemaint-controller's own pods in --own-pods-namespace (the Deployment's pod labels); empty: none.")
	fs.StringVar(&f.EvacuationProtocol, "evacuation-protocol", protocolAuto, "How owners are asked to move their pods: pod-conditions (the EvacuationRequest pod condition, KEP-4212), eviction-request (an EvictionRequest per pod, KEP-4563's lifecycle.k8s.io/v1alpha1), or auto: eviction-request where the API server serves evictionrequests, else pod-conditions. Chosen at start; shown in each NodeMaintenance's status.evacuationProtocol.")
	fs.StringVar(&f.EvictionController, "eviction-controller", "auto", "Run nodemaint's own evictionrequest-controller and imperative-eviction.k8s.io/evictor (EvictionRequests to Evictions, responders by priority, the imperative evictor last): on, off, or auto: on where the API server serves lifecycle.k8s.io/v1alpha1. Either way it writes to and deletes only the Evictions it created (label "+evictionrequest.ControllerLabel+"=<--eviction-controller-name>) and leaves a pod another controller's Eviction names to that controller; under auto it also creates no Eviction while another Eviction controller answers in the cluster (another nodemaint installation), and carries its own to their end; while kube-controller-manager's own answers (its field manager evictionrequest-controller in an EvictionRequest's or Eviction's managedFields) it writes nothing at all, and it leaves each pod's first request 2s to it before creating an Eviction. Set off where the control plane runs its own.")
	fs.StringVar(&f.EvictionControllerName, "eviction-controller-name", "", "Name of this installation's Eviction controller, a label value (63 characters at most): the value of "+evictionrequest.ControllerLabel+" on the Evictions it creates, the only ones it writes to or deletes. Default: --leader-election-namespace (one installation per leader election namespace).")
	fs.BoolVar(&f.ClusterAPI, "cluster-api", false, "Drain the nodes of Cluster API Machines being deleted that carry the pre-drain hook "+nodemaintv1alpha1.ClusterAPIPreDrainHook+": a NodeMaintenance per Machine in its workload cluster, reached through its Cluster's kubeconfig Secret (<cluster>-kubeconfig) as Cluster API reaches it, the hook released once its node is drained. Needs the ClusterRoles of config/cluster-api (the chart's clusterAPI.enabled) and Cluster API 1.11 or later (cluster.x-k8s.io/v1beta2); without it the controller says so at start and runs on without.")
	fs.StringVar(&f.ClusterAPISelf, "cluster-api-self", "", "With --cluster-api: the Cluster API Cluster, as <namespace>/<name>, that is the cluster nodemaint-controller runs in (self-hosted): its Machines' nodes are drained with nodemaint's own client, not through its kubeconfig Secret. Only Machines of that namespace and Cluster.")
	fs.StringVar(&f.PrometheusURL, "prometheus-url", "", "URL of the Prometheus server (or any server of its HTTP API, /api/v1/alerts) whose firing alerts halt rollouts that ask for it (spec.rollout.haltOnAlerts). One reader in the background reads them every --prometheus-poll-interval (each read at most 30s, its answer at most 8 MiB); no reconcile waits on Prometheus. The gate fails closed: with no answer yet, an unreachable Prometheus, an answer that is not successful, too large or has warnings (a partial answer), or an answer older than twice the interval and 30s, such rollouts halt, reason AlertsUnknown, saying which and since when. Empty: such rollouts halt, reason AlertsUnknown.")
	fs.DurationVar(&f.AlertPoll, "prometheus-poll-interval", 30*time.Second, "How long the alert reader waits after a read of --prometheus-url before the next. A change of the answer reaches the rollouts that wait on it at once.")
	fs.DurationVar(&f.PermissionInterval, "permission-check-interval", permissions.DefaultInterval, "How often the controller asks the API server whether it may delete pods (a SelfSubjectAccessReview), which drainTimeoutAction: Delete needs and the install grants only on request (Helm podDeletion.enabled, kustomize config/pod-deletion); also at start and after a deletion is forbidden.")
	features.Gate.AddFlag(fs)
	fs.BoolVar(&f.Version, "version", false, "Print the version and commit of nodemaint-controller and exit.")
	// controller-runtime's flags: the logger's (zap) and --kubeconfig.
	goFlags := flag.NewFlagSet("", flag.ExitOnError)
	f.Zap.BindFlags(goFlags)
	config.RegisterFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
}

// The values of --evacuation-protocol: auto, or a protocol's flag value (protocolFlags).
const protocolAuto = "auto"

// protocolFlags are the protocols by their --evacuation-protocol value; the Go spelling of a
// protocol is its API value (nodemaintv1alpha1.EvacuationProtocol), the flag's is only here.
var protocolFlags = map[string]nodemaintv1alpha1.EvacuationProtocol{
	"pod-conditions":   nodemaintv1alpha1.EvacuationProtocolPodConditions,
	"eviction-request": nodemaintv1alpha1.EvacuationProtocolEvictionRequest,
}

// ProtocolFlag is the --evacuation-protocol value of the protocol p.
func ProtocolFlag(p nodemaintv1alpha1.EvacuationProtocol) string {
	for flag, q := range protocolFlags {
		if q == p {
			return flag
		}
	}
	return ""
}

// Protocol is the protocol the --evacuation-protocol value flag asks for, where served says
// whether the API server serves evictionrequests in lifecycle.k8s.io/v1alpha1 (discovery). auto
// is EvictionRequest where served, PodConditions elsewhere; eviction-request where it is not
// served is an error.
func Protocol(flag string, served bool) (nodemaintv1alpha1.EvacuationProtocol, error) {
	p, ok := protocolFlags[flag]
	switch {
	case flag == protocolAuto:
		if served {
			return nodemaintv1alpha1.EvacuationProtocolEvictionRequest, nil
		}
		return nodemaintv1alpha1.EvacuationProtocolPodConditions, nil
	case !ok:
		return "", fmt.Errorf("--evacuation-protocol must be %s, %s or %s, not %q", protocolAuto,
			ProtocolFlag(nodemaintv1alpha1.EvacuationProtocolPodConditions), ProtocolFlag(nodemaintv1alpha1.EvacuationProtocolEvictionRequest), flag)
	case p == nodemaintv1alpha1.EvacuationProtocolEvictionRequest && !served:
		return "", fmt.Errorf("--evacuation-protocol=%s: the API server does not serve evictionrequests.%s (start kube-apiserver with --feature-gates=EvictionRequestAPI=true --runtime-config=%s=true)",
			flag, lifecyclev1alpha1.SchemeGroupVersion, lifecyclev1alpha1.SchemeGroupVersion)
	}
	return p, nil
}

// EvictionControllerOn reads --eviction-controller.
func EvictionControllerOn(flag string, served bool) (bool, error) {
	switch flag {
	case "auto":
		return served, nil
	case "on":
		if !served {
			return false, fmt.Errorf("--eviction-controller=on: the API server does not serve %s", lifecyclev1alpha1.SchemeGroupVersion)
		}
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("--eviction-controller must be auto, on or off, not %q", flag)
}
