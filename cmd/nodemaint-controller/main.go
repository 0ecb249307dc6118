// Command nodemaint-controller runs nodemaint's controllers: NodeMaintenance (cordon, evacuation
// requests, drain, status) and the Deployment evacuation responder.
package main

import (
	"cmp"
	"crypto/tls"
	"errors"
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
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/features"
	"github.com/nodemaint/nodemaint/internal/setup"
	"github.com/nodemaint/nodemaint/internal/version"
	"github.com/nodemaint/nodemaint/internal/watchevents"
)

// gcPercent is the collector's GOGC unless the environment sets GOGC: the heap grows to 1.5 times
// the live heap between collections, where Go's default (100) lets it double. Most of the
// controller's live heap is its caches, held for good, so the default's headroom is mostly
// garbage the RSS carries; half of it costs more frequent collections (docs/benchmarks.md).
const gcPercent = 50

func main() {
	var o setup.Flags
	o.AddFlags(pflag.CommandLine)
	pflag.Parse()
	if o.Version {
		fmt.Println(version.Line("nodemaint-controller"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}

	if err := run(o); err != nil {
		ctrl.Log.Error(err, "nodemaint-controller failed")
		os.Exit(1)
	}
}

func run(o setup.Flags) error {
	log := ctrl.Log.WithName("setup")
	o.LeaderElectionNamespace = cmp.Or(o.LeaderElectionNamespace, ownNamespace(os.Getenv, os.ReadFile))
	if o.EvictionMaxBackoff <= 0 {
		return fmt.Errorf("--eviction-max-backoff must be positive, not %v", o.EvictionMaxBackoff)
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
func restConfigs(o setup.Flags) (cfg, leaderElection *rest.Config, err error) {
	cfg, err = config.GetConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.UserAgent = "nodemaint-controller"
	// Leader election renews its Lease with a client and rate limiter of its own, so that a busy
	// controller never loses the leadership waiting for its own token bucket.
	leaderElection = rest.CopyConfig(cfg)
	leaderElection.Wrap(apirequests.Wrap("leader-election"))
	cfg.Wrap(apirequests.Wrap("controller"))
	// Every other client shares one token bucket: without it, each API group's REST client (core,
	// events, nodemaint.dev, ...) would get --kube-api-qps of its own.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.QPS, o.Burst)
	return cfg, leaderElection, nil
}

// newManager creates the manager: its caches trimmed, its metrics served as o says, leader
// election on leaderElectionCfg.
func newManager(o setup.Flags, cfg, leaderElectionCfg *rest.Config) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(scheme))
	if o.ClusterAPI {
		utilruntime.Must(setup.ClusterAPIScheme(scheme))
	}
	metricsOpts, certWatcher, err := metricsOptions(o, cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionConfig:          leaderElectionCfg,
		LeaderElectionID:              "nodemaint-controller.nodemaint.dev",
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		// Only what the controllers read is kept in the caches (managed fields, pods'
		// containers, pod templates dropped): see internal/cachetrim.
		Cache:            cachetrim.Options(cache.Options{NewInformer: watchevents.NewInformer}),
		PprofBindAddress: o.PprofAddr,
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
func setupOptions(o setup.Flags, cfg *rest.Config, mgr manager.Manager, ownPods *observe.OwnPods) (setup.Options, error) {
	log := ctrl.Log.WithName("setup")
	served, err := evictionRequestsServed(cfg)
	if err != nil {
		return setup.Options{}, err
	}
	protocol, err := setup.Protocol(o.EvacuationProtocol, served)
	if err != nil {
		return setup.Options{}, err
	}
	runEvictionController, err := setup.EvictionControllerOn(o.EvictionController, served)
	if err != nil {
		return setup.Options{}, err
	}
	controllerName := cmp.Or(o.EvictionControllerName, o.LeaderElectionNamespace)
	if errs := validation.IsValidLabelValue(controllerName); controllerName == "" || len(errs) > 0 {
		return setup.Options{}, fmt.Errorf("--eviction-controller-name %q must be a non-empty label value: %v", controllerName, errs)
	}
	log.Info("evacuation protocol", "protocol", protocol, "flag", o.EvacuationProtocol, "evictionRequestAPIServed", served,
		"evictionController", runEvictionController, "evictionControllerName", controllerName, "yield", o.EvictionController == "auto")
	so := setup.Options{
		Maintenance:        features.Gate.Enabled(features.DeclarativeNodeMaintenance),
		EvictionController: runEvictionController,
		// A name per installation; under auto, the controller stands aside while another answers.
		EvictionControllerName: controllerName, EvictionYield: o.EvictionController == "auto",
		Responder:   features.Gate.Enabled(features.NodeMaintenanceDeployment),
		Protocol:    protocol,
		Concurrency: o.Concurrency, EvictionConcurrency: o.EvictionConcurrency, ResponderConcurrency: o.ResponderConcurrency,
		MaxEvictions:       o.MaxEvictions,
		EvictionMaxBackoff: o.EvictionMaxBackoff,
		StatusBatchDelay:   o.StatusBatchDelay,
		Preflight:          true,
		SurgeTimeout:       o.SurgeTimeout,
		OwnPods:            ownPods,
		PermissionInterval: o.PermissionInterval,
	}
	if err := clusterAPIOptions(o, cfg, &so); err != nil {
		return so, err
	}
	if o.PrometheusURL != "" {
		if so.Alerts, err = alerts.NewReader(o.PrometheusURL, o.AlertPoll, nil); err != nil {
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

// clusterAPIOptions sets whether the Cluster API controller runs (--cluster-api, and the API
// server serves Machines and Clusters) and which Cluster is the one nodemaint runs in
// (--cluster-api-self).
func clusterAPIOptions(o setup.Flags, cfg *rest.Config, so *setup.Options) error {
	if !o.ClusterAPI {
		if o.ClusterAPISelf != "" {
			return errors.New("--cluster-api-self needs --cluster-api")
		}
		return nil
	}
	var err error
	if so.ClusterAPI, err = clusterAPIServed(cfg); err != nil {
		return err
	}
	if !so.ClusterAPI {
		ctrl.Log.WithName("setup").Info("NOT draining the nodes of Cluster API Machines (--cluster-api): the API server serves no Machines and Clusters of " + clusterv1.GroupVersion.String() +
			" (Cluster API 1.11 or later); restart nodemaint-controller once it does")
	}
	if o.ClusterAPISelf != "" {
		ns, name, ok := strings.Cut(o.ClusterAPISelf, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--cluster-api-self must be <namespace>/<name>, not %q", o.ClusterAPISelf)
		}
		so.ClusterAPISelf = types.NamespacedName{Namespace: ns, Name: name}
	}
	return nil
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

// metricsOptions returns the metrics server's options: with --metrics-secure (the default), HTTPS
// with a certificate of --metrics-cert-path (and its watcher, to add to the manager) or a
// self-signed one, and every request authenticated and authorized by the API server (TokenReview
// and SubjectAccessReview of get on /metrics), as kubebuilder's scaffold does.
func metricsOptions(o setup.Flags, cfg *rest.Config) (metricsserver.Options, *certwatcher.CertWatcher, error) {
	opts := metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: o.MetricsSecure}
	if !o.EnableHTTP2 {
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if !o.MetricsSecure {
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
	if o.MetricsCertPath == "" {
		return opts, nil, nil
	}
	w, err := certwatcher.New(filepath.Join(o.MetricsCertPath, o.MetricsCertName), filepath.Join(o.MetricsCertPath, o.MetricsCertKey))
	if err != nil {
		return opts, nil, fmt.Errorf("--metrics-cert-path: %w", err)
	}
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = w.GetCertificate })
	return opts, w, nil
}

// serviceAccountNamespaceFile names the namespace of the pod's ServiceAccount, in its token volume.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace the controller runs in: $POD_NAMESPACE (the downward API, which
// the install manifests set), else its ServiceAccount's namespace file, else setup.DefaultNamespace.
// Installed with a kustomize namespace: overlay, the Deployment and its leader-election Role move
// to the overlay's namespace, and so does the Lease.
func ownNamespace(getenv func(string) string, readFile func(string) ([]byte, error)) string {
	if ns := getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := readFile(serviceAccountNamespaceFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	return setup.DefaultNamespace
}

// ownPodsOf returns the selection of the controller's own pods, from the flags and $POD_NAMESPACE.
func ownPodsOf(o setup.Flags) (*observe.OwnPods, error) {
	if o.OwnPodsSelector == "" {
		return nil, nil
	}
	sel, err := labels.Parse(o.OwnPodsSelector)
	if err != nil {
		return nil, fmt.Errorf("--own-pods-selector: %w", err)
	}
	ns := cmp.Or(o.OwnPodsNamespace, os.Getenv("POD_NAMESPACE"), o.LeaderElectionNamespace)
	return &observe.OwnPods{Namespace: ns, Selector: sel}, nil
}

// clientOfItsOwn is a client for the named component with a token bucket of its own
// (--kube-api-qps, --kube-api-burst) and its own user agent and request metrics' client label;
// it reads from the manager's cache.
func clientOfItsOwn(cfg *rest.Config, mgr ctrl.Manager, o setup.Flags, name string) (client.Client, error) {
	own := rest.CopyConfig(cfg)
	own.WrapTransport = apirequests.Wrap(name)
	own.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.QPS, o.Burst)
	own.UserAgent = "nodemaint-controller/" + name
	return client.New(own, client.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), Cache: &client.CacheOptions{Reader: mgr.GetCache()},
	})
}
