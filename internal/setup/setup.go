// Package setup sets nodemaint-controller's controllers up on a manager: the node,
// NodeMaintenance and DrainRule controllers, KEP-4563's Eviction controller and the Deployment
// evacuation responder, with the state they share (one memory of refused evictions, the pods'
// writes the cache does not show yet). nodemaint-controller and every envtest suite call
// Controllers, so that the integration tests run the controllers production runs, as production
// wires them; Options say which and how.
package setup

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/nodemaint/nodemaint/internal/cachetrim"
	"github.com/nodemaint/nodemaint/internal/controller/machine"
	"github.com/nodemaint/nodemaint/internal/evictionbacklog"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/alerts"
	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/internal/controller/drainrule"
	"github.com/nodemaint/nodemaint/internal/controller/eviction"
	"github.com/nodemaint/nodemaint/internal/controller/node"
	"github.com/nodemaint/nodemaint/internal/controller/nodemaintenance"
	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/evictor"
	"github.com/nodemaint/nodemaint/internal/ownwrites"
	"github.com/nodemaint/nodemaint/internal/permissions"
)

// Options say which controllers run, and how.
type Options struct {
	// Maintenance runs the node, NodeMaintenance and DrainRule controllers (the feature gate
	// DeclarativeNodeMaintenance).
	Maintenance bool
	// EvictionController runs KEP-4563's Eviction controller and its imperative evictor; the API
	// server must serve lifecycle.k8s.io/v1alpha1.
	EvictionController bool
	// EvictionControllerName names the Eviction controller: it marks the Evictions it creates
	// with it and writes only those (eviction.Reconciler.Name), under the field
	// manager eviction.FieldManager of it.
	EvictionControllerName string
	// EvictionYield: the Eviction controller creates no Eviction while another Eviction
	// controller answers in the cluster (--eviction-controller=auto).
	EvictionYield bool
	// Responder runs the Deployment evacuation responder (the feature gate
	// NodeMaintenanceDeployment).
	Responder bool

	// Protocol is how owners are asked to move their pods; zero: PodConditions.
	Protocol nodemaintv1alpha1.EvacuationProtocol
	// Concurrency, EvictionConcurrency and ResponderConcurrency are the workers of the node and
	// NodeMaintenance controllers, the Eviction controller and the responder; zero: 1.
	Concurrency, EvictionConcurrency, ResponderConcurrency int
	// MaxEvictions bounds the drain's evictions in flight across all nodes; zero: unbounded.
	MaxEvictions int64
	// EvictionBackoff and EvictionMaxBackoff are the first and the longest wait before a refused
	// eviction of a pod is tried again, by the drain and the imperative evictor; zero: 1s (at
	// most EvictionMaxBackoff) and 5s.
	EvictionBackoff, EvictionMaxBackoff time.Duration
	// StatusBatchDelay gathers a NodeMaintenance's status writes (see
	// nodemaintenance.Reconciler).
	StatusBatchDelay time.Duration
	// Preflight: a Planning NodeMaintenance's status says what a drain would block or lose.
	Preflight bool
	// SurgeTimeout bounds a surge: deployment.DefaultSurgeTimeout when zero.
	SurgeTimeout time.Duration
	// OwnPods are nodemaint-controller's own pods, never evicted or deleted; nil: none.
	OwnPods *observe.OwnPods
	// EvictionClient and ResponderClient write for the Eviction controller and the responder,
	// each through a token bucket of its own; nil: the manager's client.
	EvictionClient, ResponderClient client.Client
	// Clock tells every controller the time; nil: the real clock.
	Clock clock.PassiveClock
	// ClusterAPI runs the Cluster API controller: nodemaint drains the nodes of Machines being
	// deleted that carry its pre-drain hook (internal/controller/machine). The manager's scheme
	// must know Cluster API's Machines (ClusterAPIScheme).
	ClusterAPI bool
	// ClusterAPISelf is the Cluster that is this cluster (--cluster-api-self): its Machines'
	// nodes are drained here, without its kubeconfig Secret; zero: none.
	ClusterAPISelf types.NamespacedName
	// Alerts reads the firing Prometheus alerts that halt rollouts, in the background; it runs
	// on the manager with the NodeMaintenance controller (see nodemaintenance.Reconciler). Nil:
	// none is read.
	Alerts *alerts.Reader
	// PermissionInterval is how often the controller asks whether it may delete pods
	// (permissions.PodDeletion); zero: permissions.DefaultInterval.
	PermissionInterval time.Duration
}

// Set are the controllers set up, for tests that look inside them; nil where not asked for.
type Set struct {
	Nodes        *node.Reconciler
	Maintenances *nodemaintenance.Reconciler
	Evictions    *eviction.Reconciler
	Responder    *deployment.Reconciler
}

// Controllers sets up on mgr the controllers o asks for.
func Controllers(ctx context.Context, mgr manager.Manager, o Options) (*Set, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	var (
		c        Set
		recorder = mgr.GetEventRecorder("nodemaint-controller")
		// One memory of refused evictions, shared by every evictor: the drain's and the
		// imperative evictor.
		refusals = evictor.NewRefusals(backoff(o.EvictionBackoff, o.EvictionMaxBackoff))
		// The pods' writes of the node controller and the responder, until the cache shows them.
		written = ownwrites.New(cachetrim.Pod)
	)
	var backlog *evictionbacklog.Backlog
	if o.EvictionController && o.Maintenance && o.Protocol == nodemaintv1alpha1.EvacuationProtocolEvictionRequest {
		// The drain creates its EvictionRequests as fast as the Eviction controller looks at
		// them: two waiting a worker keep every worker busy, and no more wait in its queue
		// while their response timeout runs.
		backlog = evictionbacklog.New(2 * max(o.EvictionConcurrency, 1))
	}
	if o.EvictionController {
		c.Evictions = &eviction.Reconciler{
			Client:    client.WithFieldOwner(clientOr(o.EvictionClient, mgr), eviction.FieldManager(o.EvictionControllerName)),
			APIReader: mgr.GetAPIReader(), Recorder: recorder, Refusals: refusals, Clock: o.Clock,
			Name: o.EvictionControllerName, Yield: o.EvictionYield, Backlog: backlog,
			Protected: func(pod *corev1.Pod) string {
				if o.OwnPods.Match(pod) {
					return "nodemaint-controller's own pod"
				}
				return ""
			},
		}
		if err := c.Evictions.SetupWithManager(ctx, mgr, max(o.EvictionConcurrency, 1)); err != nil {
			return nil, fmt.Errorf("setting up the Eviction controller: %w", err)
		}
	}
	if o.Maintenance {
		if err := maintenance(ctx, mgr, o, &c, recorder, refusals, written, backlog); err != nil {
			return nil, err
		}
	}
	if o.Responder {
		if err := responder(ctx, mgr, o, &c, recorder, written); err != nil {
			return nil, err
		}
	}
	if o.ClusterAPI {
		workloads := &machine.Workloads{Local: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
			Self: o.ClusterAPISelf, UserAgent: "nodemaint-controller/cluster-api"}
		if err := (&machine.Reconciler{Client: mgr.GetClient(), Recorder: recorder, Workloads: workloads}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the Cluster API controller: %w", err)
		}
	}
	return &c, nil
}

// ClusterAPIScheme adds Cluster API's Machines and Clusters to the scheme, for Options.ClusterAPI.
func ClusterAPIScheme(scheme *runtime.Scheme) error { return clusterv1.AddToScheme(scheme) }

// maintenance sets up the node, NodeMaintenance and DrainRule controllers.
func maintenance(ctx context.Context, mgr manager.Manager, o Options, c *Set, recorder events.EventRecorder, refusals *evictor.Refusals,
	written *ownwrites.Writes[*corev1.Pod], backlog *evictionbacklog.Backlog) error {
	if err := observe.SetupIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("setting up indexes: %w", err)
	}
	// Whether the controller may delete pods (drainTimeoutAction Delete), asked before the
	// controllers start and again while they run.
	deletion := &permissions.PodDeletion{Client: mgr.GetClient(), Interval: o.PermissionInterval}
	if err := deletion.Check(ctx); err != nil {
		return err
	}
	if err := mgr.Add(deletion); err != nil {
		return err
	}
	var slots *semaphore.Weighted
	if o.MaxEvictions > 0 {
		slots = semaphore.NewWeighted(o.MaxEvictions)
	}
	// One Observer for the node and NodeMaintenance reconcilers: the status reports what the node
	// reconciler decides from, read through the same indexes, clock and selectors.
	obs, err := observe.New(ctx, mgr, observe.Config{Client: mgr.GetClient(), OwnPods: o.OwnPods, Refusals: refusals, Written: written,
		PodDeletion: deletion, Protocol: o.Protocol, Clock: o.Clock})
	if err != nil {
		return fmt.Errorf("setting up the observer: %w", err)
	}
	c.Nodes = &node.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Observer: obs, EvictionSlots: slots, Backlog: backlog,
	}
	if err := c.Nodes.SetupWithManager(mgr, max(o.Concurrency, 1)); err != nil {
		return fmt.Errorf("setting up the node controller: %w", err)
	}
	c.Maintenances = &nodemaintenance.Reconciler{
		Client: mgr.GetClient(), Preflight: o.Preflight, Recorder: recorder, Observer: obs, StatusBatchDelay: o.StatusBatchDelay, Protocol: o.Protocol,
	}
	if o.Alerts != nil {
		if err := mgr.Add(o.Alerts); err != nil {
			return fmt.Errorf("adding the alert reader: %w", err)
		}
		c.Maintenances.Alerts = o.Alerts
	}
	if err := c.Maintenances.SetupWithManager(mgr, max(o.Concurrency, 1)); err != nil {
		return fmt.Errorf("setting up the NodeMaintenance controller: %w", err)
	}
	if err := (&drainrule.Reconciler{Client: mgr.GetClient(), Recorder: recorder}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DrainRule controller: %w", err)
	}
	return nil
}

// responder sets up the Deployment evacuation responder: on pod conditions, and on KEP-4563's
// Evictions where the API server serves them (any requester may create EvictionRequests,
// whatever protocol nodemaint's drain speaks).
func responder(ctx context.Context, mgr manager.Manager, o Options, c *Set, recorder events.EventRecorder, written *ownwrites.Writes[*corev1.Pod]) error {
	evictions, err := deployment.ServesEvictions(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	evictionResponder := ""
	if evictions {
		evictionResponder = deployment.EvictionResponder
	}
	log.Log.Info("Deployment evacuation responder", "podConditions", true, "evictions", evictions, "evictionResponder", evictionResponder)
	c.Responder = &deployment.Reconciler{
		Client: clientOr(o.ResponderClient, mgr), Recorder: recorder,
		SurgeTimeout: o.SurgeTimeout, Written: written, EvictionResponder: evictionResponder, Clock: o.Clock,
	}
	if err := c.Responder.SetupWithManager(ctx, mgr, max(o.ResponderConcurrency, 1)); err != nil {
		return fmt.Errorf("setting up the Deployment evacuation responder: %w", err)
	}
	return nil
}

// backoff is the first and the longest back-off of refused evictions (see Options).
func backoff(first, longest time.Duration) (time.Duration, time.Duration) {
	if longest <= 0 {
		longest = 5 * time.Second
	}
	if first <= 0 {
		first = time.Second
	}
	return min(first, longest), longest
}

func clientOr(c client.Client, mgr manager.Manager) client.Client {
	if c != nil {
		return c
	}
	return mgr.GetClient()
}
