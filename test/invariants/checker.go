package invariants

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Kinds of Violation.
const (
	// KindPodDisruptionBudget: fewer healthy pods than a PodDisruptionBudget allows.
	KindPodDisruptionBudget = "PodDisruptionBudget"
	// KindDeploymentReady: a surge-capable Deployment with fewer Ready pods than its replicas.
	KindDeploymentReady = "DeploymentReady"
)

// Violation is one breach of an invariant, seen on a watch event.
type Violation struct {
	Time time.Time
	// Kind is KindPodDisruptionBudget or KindDeploymentReady.
	Kind string
	// Object is the namespace/name of the budget or Deployment.
	Object string
	// Pod is the namespace/name of the pod whose leaving caused it.
	Pod string
	// Healthy is the number of healthy (or Ready) pods after the pod left; Want the least allowed.
	Healthy, Want int32
	// AfterWatchGap: the pod left while the checker's watch was broken; the violation was
	// found by the gap's replay, Time is when the pod left, and Evidence says what that was
	// read from.
	AfterWatchGap bool
	Evidence      string
	// Act is what nodemaint did, for the act checks (acts.go): "ask", "evict" or "delete";
	// Object is then the node or the maintenances that judged it, Detail says why.
	Act, Detail string
}

func (v Violation) String() string {
	if v.Act != "" {
		return fmt.Sprintf("%s %s: nodemaint's %s of pod %s (%s): %s",
			v.Time.Format(time.RFC3339Nano), v.Kind, v.Act, v.Pod, v.Object, v.Detail)
	}
	if v.Pod == "" {
		return fmt.Sprintf("%s %s %s: %s", v.Time.Format(time.RFC3339Nano), v.Kind, v.Object, v.Detail)
	}
	gap := ""
	if v.AfterWatchGap {
		gap = " (reconstructed after a watch gap: " + v.Evidence + ")"
	}
	detail := ""
	if v.Detail != "" {
		detail = "; " + v.Detail
	}
	return fmt.Sprintf("%s %s %s: %d healthy pods after %s left, at least %d allowed%s%s",
		v.Time.Format(time.RFC3339Nano), v.Kind, v.Object, v.Healthy, v.Pod, v.Want, gap, detail)
}

// Options configure Start.
type Options struct {
	// Namespaces limits the workload checks to these namespaces; all when empty. Nodes are
	// always watched.
	Namespaces []string
	// OnViolation, when set, is called with every violation as it is found (from an informer's
	// goroutine), e.g. to log it.
	OnViolation func(Violation)
	// Witness puts WitnessFinalizer on the watched pods, so that none can vanish unseen inside a
	// watch gap; Stop removes it. Needs Namespaces.
	Witness bool
	// AuditLog is the path of the API server's audit log (test/localcluster writes one, see
	// localcluster.Cluster.AuditLog). With it the checker also judges every ask, eviction and
	// deletion of ControllerUser's (acts.go): no act before the node is cordoned, no eviction or
	// deletion under SignalOnly or an unusable spec, of a skipped pod, or (deletions) before the
	// drain and response timeouts of a maintenance with drainTimeoutAction Delete. Without it
	// (the benchmarks, clusters that write no audit log) only the budget and Deployment checks
	// run, as before.
	AuditLog string
	// ControllerUser is the username nodemaint-controller authenticates as, as the audit log
	// names it: DefaultControllerUser when empty.
	ControllerUser string
	// Prometheus is the stand-in the controller reads its alerts from (--prometheus-url): with it
	// the checker also judges every turn of a rollout with haltOnAlerts against what the
	// stand-in answered (KindAlertGate), taking an answer to count for AlertMaxAge (the
	// controller's, alerts.MaxAge of its --prometheus-poll-interval). Needs AuditLog (the
	// NodeMaintenances are watched with it).
	Prometheus  *Prometheus
	AlertMaxAge time.Duration
	// ClusterAPI has the checker also judge nodemaint's part in the deletion of Cluster API
	// Machines (machines.go): the releases of its pre-drain hook, the nodes its NodeMaintenances
	// of Machines select, and none left once their Machine is gone (CheckClean). The Machines
	// may be in another cluster (ClusterAPI.Config). Needs AuditLog.
	ClusterAPI *ClusterAPI
}

// DefaultControllerUser is the user of nodemaint-controller's ServiceAccount as config/rbac and
// the end-to-end tests run it.
const DefaultControllerUser = "system:serviceaccount:nodemaint-system:nodemaint-controller"

// Checker watches the cluster and records violations. It is safe for concurrent use.
type Checker struct {
	ctx    context.Context
	client kubernetes.Interface
	// dynamic reads nodemaint's CRDs (CheckClean).
	dynamic dynamic.Interface
	cancel  context.CancelFunc
	done    chan struct{}

	// informers is the number of informers, each with an id below it.
	informers  int
	namespaces []string
	witness    *witness
	// audit tails Options.AuditLog; nil without one.
	audit *auditTail
	// machines reads the Machines (Options.ClusterAPI, CheckClean); machineAudit tails the
	// audit log of their cluster where it is another. Nil without them.
	machines     dynamic.Interface
	machineAudit *auditTail

	mu    sync.Mutex
	state *state
	// gapOpened, gapRelisted, lastRelist: when the open gap opened, the informers that listed
	// again since, when the last did. gaps counts the gaps closed.
	gapOpened, lastRelist time.Time
	gapRelisted           map[int]bool
	gaps                  int
}

// Start starts the informers and returns once their caches are synced. The checker runs until
// ctx ends or Stop is called.
func Start(ctx context.Context, config *rest.Config, opts Options) (*Checker, error) {
	config = rest.CopyConfig(config)
	// The checker must not be the one throttled: it only watches.
	config.QPS, config.Burst = 100, 200
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		if opts.Witness {
			return nil, errors.New("invariant checker: a witness needs namespaces")
		}
		namespaces = []string{metav1.NamespaceAll}
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Checker{ctx: ctx, client: client, dynamic: dyn, cancel: cancel, done: make(chan struct{}), state: newState(opts.OnViolation), namespaces: namespaces}
	if opts.Witness {
		c.witness = newWitness(c)
	}
	var infs []cache.SharedIndexInformer
	if opts.Prometheus != nil {
		if opts.AuditLog == "" || opts.AlertMaxAge <= 0 {
			cancel()
			return nil, errors.New("invariant checker: the alert gate's check needs AuditLog and AlertMaxAge")
		}
		c.state.alertGate = newAlertGate(opts.Prometheus, opts.AlertMaxAge)
	}
	if opts.AuditLog != "" {
		c.state.acts = newActs(cmp.Or(opts.ControllerUser, DefaultControllerUser), time.Now())
		c.audit = &auditTail{path: opts.AuditLog}
		more, err := c.actInformers(client)
		if err != nil {
			cancel()
			return nil, err
		}
		infs = append(infs, more...)
	}
	if opts.ClusterAPI != nil {
		inf, err := c.machineInformer(opts)
		if err != nil {
			cancel()
			return nil, err
		}
		infs = append(infs, inf)
	}
	for _, ns := range namespaces {
		infs = append(infs,
			c.informer(listWatch(client.CoreV1().Pods(ns)), &corev1.Pod{}),
			c.informer(listWatch(client.PolicyV1().PodDisruptionBudgets(ns)), &policyv1.PodDisruptionBudget{}),
			c.informer(listWatch(client.AppsV1().Deployments(ns)), &appsv1.Deployment{}),
			c.informer(listWatch(client.AppsV1().ReplicaSets(ns)), &appsv1.ReplicaSet{}),
			c.informer(listWatch(client.AppsV1().StatefulSets(ns)), &appsv1.StatefulSet{}),
			c.informer(listWatch(client.AutoscalingV2().HorizontalPodAutoscalers(ns)), &autoscalingv2.HorizontalPodAutoscaler{}),
		)
	}
	infs = append(infs, c.informer(listWatch(client.CoreV1().Nodes()), &corev1.Node{}))
	var synced []cache.InformerSynced
	for _, inf := range infs {
		reg, err := inf.AddEventHandler(c.handler())
		if err != nil {
			cancel()
			return nil, err
		}
		synced = append(synced, reg.HasSynced)
	}

	var running sync.WaitGroup
	for _, inf := range infs {
		running.Go(func() { inf.RunWithContext(ctx) })
	}
	if c.witness != nil {
		running.Go(c.witness.run)
		context.AfterFunc(ctx, c.witness.queue.ShutDown)
	}
	if c.audit != nil {
		running.Go(c.runAudit)
	}
	go func() {
		running.Wait()
		close(c.done)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		cancel()
		return nil, fmt.Errorf("invariant checker: caches not synced: %w", context.Cause(ctx))
	}
	return c, nil
}

// Stop stops the informers and, with Options.Witness, removes WitnessFinalizer from every pod.
// Violations stay readable.
func (c *Checker) Stop() error {
	if c.audit != nil && c.ctx.Err() == nil {
		// The acts of the last moments: read them, and judge them once the watches delivered
		// their time.
		time.Sleep(settle)
		c.readAudit()
		c.mu.Lock()
		c.state.judgeAudit(time.Now().Add(settle))
		c.state.releaseHeld(time.Now(), true)
		c.mu.Unlock()
	}
	c.cancel()
	<-c.done
	if c.witness != nil {
		return c.witness.release(c.namespaces)
	}
	return nil
}

// Violations returns the violations found so far, oldest first.
func (c *Checker) Violations() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.state.violations)
	if a := c.state.acts; a != nil {
		// Those still held (for a deletion that may excuse them) count until excused.
		for _, h := range a.held {
			if _, ok := a.excused[h.v.Pod]; !ok {
				out = append(out, h.v)
			}
		}
	}
	return out
}

// Watched returns the number of budgets and Deployments the checker has seen fully available,
// so checks them: a test can assert that it checked something.
func (c *Checker) Watched() (budgets, deployments int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.state.pdbs {
		if b.armed {
			budgets++
		}
	}
	for _, d := range c.state.deployments {
		if d.armed {
			deployments++
		}
	}
	return budgets, deployments
}

func (c *Checker) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.apply(obj, false); c.witnessPod(obj) },
		UpdateFunc: func(_, obj any) { c.apply(obj, false); c.witnessPod(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			c.apply(obj, true)
		},
	}
}

// witnessPod queues a pod for the witness, once the state applied it.
func (c *Checker) witnessPod(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok && c.witness != nil {
		c.witness.queue.Add(podKey(pod))
	}
}

func (c *Checker) apply(obj any, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.state.gap == nil {
		c.state.lastEvent = now
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		c.state.pod(o, deleted, now)
	case *policyv1.PodDisruptionBudget:
		c.state.pdb(o, deleted)
	case *appsv1.Deployment:
		c.state.deployment(o, deleted)
	case *appsv1.ReplicaSet:
		c.state.replicaSet(o, deleted)
	case *appsv1.StatefulSet:
		c.state.statefulSet(o, deleted)
	case *autoscalingv2.HorizontalPodAutoscaler:
		c.state.hpa(o, deleted)
	case *corev1.Node:
		c.state.node(o, deleted)
		c.state.controlPlane(o, deleted, now)
		c.state.capiNode(o, deleted, now)
	case *corev1.Namespace:
		c.state.namespace(o, deleted)
	case *unstructured.Unstructured:
		c.state.custom(o, deleted, now)
	}
}

// A watch gap closes once every informer listed again and relistDelivery passed since the last
// of them listed (their events are delivered by then), or gapCap after it opened (one informer
// listed again on its own, an expired resource version: the others never will).
const (
	relistDelivery = 2 * time.Second
	gapCap         = 30 * time.Second
)

// lister is a typed client of one resource, as client-go's clientsets have them.
type lister[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// listWatch makes a typed client a ListerWatcher.
func listWatch[L runtime.Object](api lister[L]) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return api.List(ctx, opts)
		},
		WatchFuncWithContext: api.Watch,
	}
}

// informer returns an informer that tells the checker whenever it lists again after its first
// list (a LIST, or a WATCH that sends the initial events): a watch gap.
func (c *Checker) informer(lw *cache.ListWatch, example runtime.Object) cache.SharedIndexInformer {
	var listed atomic.Bool
	id := c.informers
	c.informers++
	noteList := func() {
		if listed.Swap(true) {
			c.relisted(id)
		}
	}
	list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
	lw.ListWithContextFunc = func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		obj, err := list(ctx, opts)
		if err == nil && opts.Continue == "" {
			noteList()
		}
		return obj, err
	}
	lw.WatchFuncWithContext = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		if ptr.Deref(opts.SendInitialEvents, false) {
			noteList()
		}
		return watchFn(ctx, opts)
	}
	return cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
}

// relisted notes that informer id listed again, before the relist's events are delivered: it
// opens a gap (the state as it is now is what the replay starts from) or extends the one open.
func (c *Checker) relisted(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.state.gap == nil {
		c.state.openGap()
		c.gapOpened, c.gapRelisted = now, map[int]bool{}
		time.AfterFunc(gapCap, c.maybeCloseGap)
	}
	c.gapRelisted[id] = true
	c.lastRelist = now
	time.AfterFunc(relistDelivery, c.maybeCloseGap)
}

// maybeCloseGap closes the open gap once its relists are delivered (see relistDelivery).
func (c *Checker) maybeCloseGap() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.gap == nil {
		return
	}
	now := time.Now()
	all := len(c.gapRelisted) == c.informers
	if (all && now.Sub(c.lastRelist) >= relistDelivery) || now.Sub(c.gapOpened) >= gapCap {
		c.state.closeGap()
		c.gaps++
	}
}

// Gaps returns the number of watch gaps the checker replayed, and the number of pods that
// joined, went down or left inside them, as the replays found.
func (c *Checker) Gaps() (gaps, changes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gaps, c.state.gapChanges
}

// key returns namespace/name.
func key(namespace, name string) string { return namespace + "/" + name }

// selectorMatches reports whether the selector (nil matches nothing) selects the labels.
func selectorMatches(sel labels.Selector, l map[string]string) bool {
	return sel != nil && !sel.Empty() && sel.Matches(labels.Set(l))
}

// joinProblems renders problems one per line.
func joinProblems(problems []string) string { return strings.Join(problems, "\n") }
