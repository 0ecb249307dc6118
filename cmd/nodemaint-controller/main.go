// Command nodemaint-controller runs nodemaint's controllers: NodeMaintenance (cordon, evacuation
// requests, drain, status) and the Deployment evacuation responder.
package main

import (
	"cmp"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	// The IANA time zone database, so that maintenance windows' time zones
	// (spec.rollout.window.timeZone) resolve where the host or image has no /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/spf13/pflag"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/alerts"
	"github.com/nodemaint/nodemaint/internal/apirequests"
	"github.com/nodemaint/nodemaint/internal/cachetrim"
	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/features"
	"github.com/nodemaint/nodemaint/internal/permissions"
	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/internal/setup"
	"github.com/nodemaint/nodemaint/internal/version"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

type options struct {
	metricsAddr, probeAddr  string
	pprofAddr               string
	metricsSecure           bool
	metricsCertPath         string
	metricsCertName         string
	metricsCertKey          string
	enableHTTP2             bool
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	concurrency             int
	responderConcurrency    int
	evictionConcurrency     int
	qps                     float32
	burst                   int
	statusBatchDelay        time.Duration
	maxEvictions            int64
	evictionMaxBackoff      time.Duration
	surgeTimeout            time.Duration
	ownPodsNamespace        string
	ownPodsSelector         string
	evacuationProtocol      string
	evictionController      string
	evictionControllerName  string
	clusterAPI              bool
	clusterAPISelf          string
	prometheusURL           string
	alertPoll               time.Duration
	permissionInterval      time.Duration
}

// gcPercent is the collector's GOGC unless the environment sets GOGC: the heap grows to 1.5 times
// the live heap between collections, where Go's default (100) lets it double. Most of the
// controller's live heap is its caches, held for good, so the default's headroom is mostly
// garbage the RSS carries; half of it costs more frequent collections (docs/benchmarks.md).
const gcPercent = 50

func main() {
	var o options
	fs := pflag.CommandLine
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint (/metrics); 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve the metrics over HTTPS, to clients that authenticate with a bearer token (TokenReview) and may get the non-resource URL /metrics (SubjectAccessReview; the ClusterRole nodemaint-metrics-reader grants it). With false, plain HTTP to anyone who can reach the port.")
	fs.StringVar(&o.metricsCertPath, "metrics-cert-path", "", "Directory of the metrics server's certificate and key (e.g. from cert-manager), reloaded when they change. Default: a self-signed certificate made at start.")
	fs.StringVar(&o.metricsCertName, "metrics-cert-name", "tls.crt", "File name of the metrics server's certificate in --metrics-cert-path.")
	fs.StringVar(&o.metricsCertKey, "metrics-cert-key", "tls.key", "File name of the metrics server's key in --metrics-cert-path.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Serve the metrics over HTTP/2 too. Off by default: HTTP/2 Stream Cancellation and Rapid Reset (CVE-2023-44487, CVE-2023-39325).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of the Go profiling endpoints (/debug/pprof/: heap, CPU); empty disables them. Bind it to localhost: profiles are not authenticated.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader, so that only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease. Default: the controller's own namespace ($POD_NAMESPACE from the downward API, else its ServiceAccount's namespace file), so that it follows the namespace its Role was installed in; outside a pod, "+defaultNamespace+".")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a replica that stopped renewing keeps the leadership.")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader tries to renew before it gives up the leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "How often replicas try to acquire or renew the leadership.")
	fs.IntVar(&o.concurrency, "concurrency", 8, "Reconciles run in parallel, per controller (the Deployment evacuation responder: see --deployment-responder-concurrency).")
	fs.IntVar(&o.responderConcurrency, "deployment-responder-concurrency", 32, "Deployments the Deployment evacuation responder reconciles in parallel. Its reconciles wait on the API server (the answers of a Deployment's newly requested pods, its surge's patch), not on CPU, and each Deployment with a new request waits for a worker: with too few, an answer comes after a round over every evacuating Deployment, which may be past a short evacuationResponseTimeout. Its token bucket (--kube-api-qps) bounds what they send.")
	fs.IntVar(&o.evictionConcurrency, "eviction-controller-concurrency", 32, "Target pods nodemaint's Eviction controller (--eviction-controller) reconciles in parallel. A pod's Eviction takes a few of its reconciles (created, its responder made Active, collected), each waiting on the API server, not on CPU: with too few, the pods of a large drain wait for their responder's turn past the evacuationResponseTimeout. Under the EvictionRequest protocol the drain creates its requests as fast as this controller looks at them: at most twice this many wait for their first look at once.")
	fs.Float32Var(&o.qps, "kube-api-qps", 100, "Requests per second to the API server (client-side rate limit): the node and NodeMaintenance controllers share one token bucket of this size; the Deployment evacuation responder and the Eviction controller have one each of their own of the same size, so that the answers, which have a deadline, never wait behind the requests of a large maintenance; leader election has its own.")
	fs.IntVar(&o.burst, "kube-api-burst", 200, "Burst of requests to the API server, per token bucket (see --kube-api-qps).")
	fs.DurationVar(&o.statusBatchDelay, "status-batch-delay", time.Second, "How long pod changes are gathered before a NodeMaintenance status is written.")
	fs.Int64Var(&o.maxEvictions, "max-concurrent-evictions", 20, "Evictions in flight at once, across all nodes.")
	fs.DurationVar(&o.evictionMaxBackoff, "eviction-max-backoff", 5*time.Second, "The longest wait before a refused eviction (a PodDisruptionBudget) of a pod is tried again, by the drain and by the imperative evictor; it backs off exponentially from 1s. kubectl drain retries every 5s.")
	fs.DurationVar(&o.surgeTimeout, "deployment-surge-timeout", deployment.DefaultSurgeTimeout, "How long the Deployment evacuation responder waits for surged replacements that make no progress (none created, scheduled, initialized or Ready; plus the Deployment's minReadySeconds) before it gives up and lets eviction move the pods. This bound is for replacements that show a problem (unschedulable, failing to start, not created); a surge that is only slow gets the Deployment's progressDeadlineSeconds if that is longer.")
	fs.StringVar(&o.ownPodsNamespace, "own-pods-namespace", "", "Namespace of nodemaint-controller's own pods, which nodemaint asks to move like any other but never evicts or deletes. Default: $POD_NAMESPACE (the downward API), else --leader-election-namespace.")
	fs.StringVar(&o.ownPodsSelector, "own-pods-selector", "app.kubernetes.io/name=nodemaint-controller", "Label selector of nodemaint-controller's own pods in --own-pods-namespace (the Deployment's pod labels); empty: none.")
	fs.StringVar(&o.evacuationProtocol, "evacuation-protocol", requester.FlagAuto, "How owners are asked to move their pods: pod-conditions (the EvacuationRequest pod condition, KEP-4212), eviction-request (an EvictionRequest per pod, KEP-4563's lifecycle.k8s.io/v1alpha1), or auto: eviction-request where the API server serves evictionrequests, else pod-conditions. Chosen at start; shown in each NodeMaintenance's status.evacuationProtocol.")
	fs.StringVar(&o.evictionController, "eviction-controller", "auto", "Run nodemaint's own evictionrequest-controller and imperative-eviction.k8s.io/evictor (EvictionRequests to Evictions, responders by priority, the imperative evictor last): on, off, or auto: on where the API server serves lifecycle.k8s.io/v1alpha1. Either way it writes to and deletes only the Evictions it created (label "+names.ControllerLabel+"=<--eviction-controller-name>) and leaves a pod another controller's Eviction names to that controller; under auto it also creates no Eviction while another Eviction controller answers in the cluster (another nodemaint installation), and carries its own to their end; while kube-controller-manager's own answers (its field manager evictionrequest-controller in an EvictionRequest's or Eviction's managedFields) it writes nothing at all, and it leaves each pod's first request 2s to it before creating an Eviction. Set off where the control plane runs its own.")
	fs.StringVar(&o.evictionControllerName, "eviction-controller-name", "", "Name of this installation's Eviction controller, a label value (63 characters at most): the value of "+names.ControllerLabel+" on the Evictions it creates, the only ones it writes to or deletes. Default: --leader-election-namespace (one installation per leader election namespace).")
	fs.BoolVar(&o.clusterAPI, "cluster-api", false, "Drain the nodes of Cluster API Machines being deleted that carry the pre-drain hook "+nodemaintv1alpha1.ClusterAPIPreDrainHook+": a NodeMaintenance per Machine in its workload cluster, reached through its Cluster's kubeconfig Secret (<cluster>-kubeconfig) as Cluster API reaches it, the hook released once its node is drained. Needs the ClusterRoles of config/cluster-api (the chart's clusterAPI.enabled) and Cluster API 1.11 or later (cluster.x-k8s.io/v1beta2); without it the controller says so at start and runs on without.")
	fs.StringVar(&o.clusterAPISelf, "cluster-api-self", "", "With --cluster-api: the Cluster API Cluster, as <namespace>/<name>, that is the cluster nodemaint-controller runs in (self-hosted): its Machines' nodes are drained with nodemaint's own client, not through its kubeconfig Secret. Only Machines of that namespace and Cluster.")
	fs.StringVar(&o.prometheusURL, "prometheus-url", "", "URL of the Prometheus server (or any server of its HTTP API, /api/v1/alerts) whose firing alerts halt rollouts that ask for it (spec.rollout.haltOnAlerts). One reader in the background reads them every --prometheus-poll-interval (each read at most 30s, its answer at most 8 MiB); no reconcile waits on Prometheus. The gate fails closed: with no answer yet, an unreachable Prometheus, an answer that is not successful, too large or has warnings (a partial answer), or an answer older than twice the interval and 30s, such rollouts halt, reason AlertsUnknown, saying which and since when. Empty: such rollouts halt, reason AlertsUnknown.")
	fs.DurationVar(&o.alertPoll, "prometheus-poll-interval", 30*time.Second, "How long the alert reader waits after a read of --prometheus-url before the next. A change of the answer reaches the rollouts that wait on it at once.")
	fs.DurationVar(&o.permissionInterval, "permission-check-interval", permissions.DefaultInterval, "How often the controller asks the API server whether it may delete pods (a SelfSubjectAccessReview), which drainTimeoutAction: Delete needs and the install grants only on request (Helm podDeletion.enabled, kustomize config/pod-deletion); also at start and after a deletion is forbidden.")
	features.Gate.AddFlag(fs)
	printVersion := fs.Bool("version", false, "Print the version and commit of nodemaint-controller and exit.")

	zapOpts := zap.Options{}
	goFlags := flag.NewFlagSet("", flag.ExitOnError)
	zapOpts.BindFlags(goFlags)
	config.RegisterFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	pflag.Parse()
	if *printVersion {
		fmt.Println(version.Line("nodemaint-controller"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}

	if err := run(o); err != nil {
		ctrl.Log.Error(err, "nodemaint-controller failed")
		os.Exit(1)
	}
}

func run(o options) error {
	log := ctrl.Log.WithName("setup")
	o.leaderElectionNamespace = cmp.Or(o.leaderElectionNamespace, ownNamespace(os.Getenv, os.ReadFile))
	if o.evictionMaxBackoff <= 0 {
		return fmt.Errorf("--eviction-max-backoff must be positive, not %v", o.evictionMaxBackoff)
	}
	ownPods, err := ownPodsOf(o)
	if err != nil {
		return err
	}
	cfg, leaderElectionCfg, err := restConfigs(o)
	if err != nil {
		return err
	}
	mgr, err := newManager(o, cfg, leaderElectionCfg)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	so, err := setupOptions(o, cfg, mgr, ownPods)
	if err != nil {
		return err
	}
	if _, err := setup.Controllers(ctx, mgr, so); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if ownPods != nil {
		log.Info("never evicting or deleting the controller's own pods", "namespace", ownPods.Namespace, "selector", ownPods.Selector.String())
	}
	v := version.Get()
	log.Info("starting manager", "version", v.Version, "commit", v.Commit,
		string(features.DeclarativeNodeMaintenance), features.Gate.Enabled(features.DeclarativeNodeMaintenance),
		string(features.NodeMaintenanceDeployment), features.Gate.Enabled(features.NodeMaintenanceDeployment))
	return mgr.Start(ctx)
}

// restConfigs are the clients' configuration, from the kubeconfig, and leader election's.
func restConfigs(o options) (cfg, leaderElection *rest.Config, err error) {
	cfg, err = config.GetConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "nodemaint-controller"
	// Leader election renews its Lease with a client and rate limiter of its own, so that a busy
	// controller never loses the leadership waiting for its own token bucket.
	leaderElection = rest.CopyConfig(cfg)
	leaderElection.Wrap(apirequests.Wrap("leader-election"))
	cfg.Wrap(apirequests.Wrap("controller"))
	// Every other client shares one token bucket: without it, each API group's REST client (core,
	// events, nodemaint.dev, ...) would get --kube-api-qps of its own.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.qps, o.burst)
	return cfg, leaderElection, nil
}

// newManager creates the manager: its caches trimmed, its metrics served as o says, leader
// election on leaderElectionCfg.
func newManager(o options, cfg, leaderElectionCfg *rest.Config) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(scheme))
	if o.clusterAPI {
		utilruntime.Must(setup.ClusterAPIScheme(scheme))
	}
	metricsOpts, certWatcher, err := metricsOptions(o, cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionConfig:          leaderElectionCfg,
		LeaderElectionID:              "nodemaint-controller.nodemaint.dev",
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		// Only what the controllers read is kept in the caches (managed fields, pods'
		// containers, pod templates dropped): see internal/cachetrim.
		Cache:            cachetrim.Options(cache.Options{}),
		PprofBindAddress: o.pprofAddr,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if certWatcher != nil {
		if err := mgr.Add(certWatcher); err != nil {
			return nil, fmt.Errorf("watching the metrics certificate: %w", err)
		}
	}
	// The caches' initial lists leave garbage the runtime would return only gradually.
	if err := mgr.Add(cachetrim.ReleaseStartupMemory(mgr.GetCache(), 10*time.Second)); err != nil {
		return nil, err
	}
	return mgr, nil
}

// setupOptions says which controllers run and how, from the flags, the feature gates and what
// the API server serves.
func setupOptions(o options, cfg *rest.Config, mgr manager.Manager, ownPods *observe.OwnPods) (setup.Options, error) {
	log := ctrl.Log.WithName("setup")
	served, err := evictionRequestsServed(cfg)
	if err != nil {
		return setup.Options{}, err
	}
	protocol, err := requester.Choose(o.evacuationProtocol, served)
	if err != nil {
		return setup.Options{}, err
	}
	runEvictionController, err := evictionControllerOn(o.evictionController, served)
	if err != nil {
		return setup.Options{}, err
	}
	controllerName := cmp.Or(o.evictionControllerName, o.leaderElectionNamespace)
	if errs := validation.IsValidLabelValue(controllerName); controllerName == "" || len(errs) > 0 {
		return setup.Options{}, fmt.Errorf("--eviction-controller-name %q must be a non-empty label value: %v", controllerName, errs)
	}
	log.Info("evacuation protocol", "protocol", protocol, "flag", o.evacuationProtocol, "evictionRequestAPIServed", served,
		"evictionController", runEvictionController, "evictionControllerName", controllerName, "yield", o.evictionController == "auto")
	so := setup.Options{
		Maintenance:        features.Gate.Enabled(features.DeclarativeNodeMaintenance),
		EvictionController: runEvictionController,
		// A name per installation; under auto, the controller stands aside while another answers.
		EvictionControllerName: controllerName, EvictionYield: o.evictionController == "auto",
		Responder:   features.Gate.Enabled(features.NodeMaintenanceDeployment),
		Protocol:    protocol,
		Concurrency: o.concurrency, EvictionConcurrency: o.evictionConcurrency, ResponderConcurrency: o.responderConcurrency,
		MaxEvictions:       o.maxEvictions,
		EvictionMaxBackoff: o.evictionMaxBackoff,
		StatusBatchDelay:   o.statusBatchDelay,
		Preflight:          true,
		SurgeTimeout:       o.surgeTimeout,
		OwnPods:            ownPods,
		PermissionInterval: o.permissionInterval,
	}
	if o.clusterAPI {
		if so.ClusterAPI, err = clusterAPIServed(cfg); err != nil {
			return so, err
		}
		if !so.ClusterAPI {
			log.Info("NOT draining the nodes of Cluster API Machines (--cluster-api): the API server serves no Machines and Clusters of " + clusterv1.GroupVersion.String() +
				" (Cluster API 1.11 or later); restart nodemaint-controller once it does")
		}
		if o.clusterAPISelf != "" {
			ns, name, ok := strings.Cut(o.clusterAPISelf, "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				return so, fmt.Errorf("--cluster-api-self must be <namespace>/<name>, not %q", o.clusterAPISelf)
			}
			so.ClusterAPISelf = types.NamespacedName{Namespace: ns, Name: name}
		}
	} else if o.clusterAPISelf != "" {
		return so, errors.New("--cluster-api-self needs --cluster-api")
	}
	if o.prometheusURL != "" {
		if so.Alerts, err = alerts.NewReader(o.prometheusURL, o.alertPoll, nil); err != nil {
			return so, err
		}
	}
	if so.EvictionController {
		// The Eviction controller writes through a token bucket of its own too: it stands for
		// kube-controller-manager's evictionrequest-controller, and every request waits for it
		// (its Eviction created, its responder made Active) against the response timeout.
		// Sharing the node controller's bucket, its Evictions came late and pods were evicted,
		// unanswered.
		if so.EvictionClient, err = clientOfItsOwn(cfg, mgr, o, "eviction-controller"); err != nil {
			return so, fmt.Errorf("creating the Eviction controller's client: %w", err)
		}
	}
	if so.Responder {
		// The responder writes through a token bucket of its own: it answers evacuation requests
		// against the maintenance's response timeout, and behind the node controller's writes of
		// a large maintenance its answers came late, so the pods it had not answered yet were
		// evicted instead of surged. It stands for an owner's controller, which would have its
		// own client anyway (KEP-4212). It reads from the manager's cache.
		if so.ResponderClient, err = clientOfItsOwn(cfg, mgr, o, "deployment-responder"); err != nil {
			return so, fmt.Errorf("creating the Deployment evacuation responder's client: %w", err)
		}
	} else {
		log.Info("feature gate disabled: not answering the evacuation requests of Deployments' pods", "gate", features.NodeMaintenanceDeployment)
	}
	if !so.Maintenance {
		log.Info("feature gate disabled: not reconciling NodeMaintenances", "gate", features.DeclarativeNodeMaintenance)
	}
	return so, nil
}

// evictionRequestsServed asks discovery whether the API server serves KEP-4563's
// evictionrequests and evictions in lifecycle.k8s.io/v1alpha1.
func evictionRequestsServed(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(lifecyclev1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", lifecyclev1alpha1.SchemeGroupVersion, err)
	}
	found := map[string]bool{}
	for _, r := range list.APIResources {
		found[r.Name] = true
	}
	return found["evictionrequests"] && found["evictions"], nil
}

// clusterAPIServed asks discovery whether the API server serves Cluster API's Machines and
// Clusters in cluster.x-k8s.io/v1beta2 (Cluster API 1.11 and later).
func clusterAPIServed(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(clusterv1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", clusterv1.GroupVersion, err)
	}
	found := map[string]bool{}
	for _, r := range list.APIResources {
		found[r.Name] = true
	}
	return found["machines"] && found["clusters"], nil
}

// evictionControllerOn reads --eviction-controller.
func evictionControllerOn(flag string, served bool) (bool, error) {
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

// metricsOptions returns the metrics server's options: with --metrics-secure (the default), HTTPS
// with a certificate of --metrics-cert-path (and its watcher, to add to the manager) or a
// self-signed one, and every request authenticated and authorized by the API server (TokenReview
// and SubjectAccessReview of get on /metrics), as kubebuilder's scaffold does.
func metricsOptions(o options, cfg *rest.Config) (metricsserver.Options, *certwatcher.CertWatcher, error) {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if !o.enableHTTP2 {
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if !o.metricsSecure {
		return opts, nil, nil
	}
	// The reviews go through a client and token bucket of their own, so that a scrape never
	// waits behind the writes of a large maintenance.
	reviewCfg := rest.CopyConfig(cfg)
	reviewCfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(10, 20)
	reviewCfg.UserAgent = "nodemaint-controller/metrics-auth"
	reviewHTTP, err := rest.HTTPClientFor(reviewCfg)
	if err != nil {
		return opts, nil, fmt.Errorf("creating the metrics server's review client: %w", err)
	}
	opts.FilterProvider = func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
		return filters.WithAuthenticationAndAuthorization(reviewCfg, reviewHTTP)
	}
	if o.metricsCertPath == "" {
		return opts, nil, nil
	}
	w, err := certwatcher.New(filepath.Join(o.metricsCertPath, o.metricsCertName), filepath.Join(o.metricsCertPath, o.metricsCertKey))
	if err != nil {
		return opts, nil, fmt.Errorf("--metrics-cert-path: %w", err)
	}
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = w.GetCertificate })
	return opts, w, nil
}

// defaultNamespace is the leader election namespace of a controller that runs outside a pod.
const defaultNamespace = "nodemaint-system"

// serviceAccountNamespaceFile names the namespace of the pod's ServiceAccount, in its token volume.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace the controller runs in: $POD_NAMESPACE (the downward API, which
// the install manifests set), else its ServiceAccount's namespace file, else defaultNamespace.
// Installed with a kustomize namespace: overlay, the Deployment and its leader-election Role move
// to the overlay's namespace, and so does the Lease.
func ownNamespace(getenv func(string) string, readFile func(string) ([]byte, error)) string {
	if ns := getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := readFile(serviceAccountNamespaceFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	return defaultNamespace
}

// ownPodsOf returns the selection of the controller's own pods, from the flags and $POD_NAMESPACE.
func ownPodsOf(o options) (*observe.OwnPods, error) {
	if o.ownPodsSelector == "" {
		return nil, nil
	}
	sel, err := labels.Parse(o.ownPodsSelector)
	if err != nil {
		return nil, fmt.Errorf("--own-pods-selector: %w", err)
	}
	ns := cmp.Or(o.ownPodsNamespace, os.Getenv("POD_NAMESPACE"), o.leaderElectionNamespace)
	return &observe.OwnPods{Namespace: ns, Selector: sel}, nil
}

// clientOfItsOwn is a client for the named component with a token bucket of its own
// (--kube-api-qps, --kube-api-burst) and its own user agent and request metrics' client label;
// it reads from the manager's cache.
func clientOfItsOwn(cfg *rest.Config, mgr ctrl.Manager, o options, name string) (client.Client, error) {
	own := rest.CopyConfig(cfg)
	own.WrapTransport = apirequests.Wrap(name)
	own.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.qps, o.burst)
	own.UserAgent = "nodemaint-controller/" + name
	return client.New(own, client.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), Cache: &client.CacheOptions{Reader: mgr.GetCache()},
	})
}
