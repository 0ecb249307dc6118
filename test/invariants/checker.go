package invariants

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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
	// confirmed by a fresh read after the relist, and Healthy is what that read counted.
	AfterWatchGap bool
}

func (v Violation) String() string {
	gap := ""
	if v.AfterWatchGap {
		gap = " (left during a watch gap; a fresh read after it still counts too few)"
	}
	return fmt.Sprintf("%s %s %s: %d healthy pods after %s left, at least %d allowed%s",
		v.Time.Format(time.RFC3339Nano), v.Kind, v.Object, v.Healthy, v.Pod, v.Want, gap)
}

// Options configure Start.
type Options struct {
	// Namespaces limits the workload checks to these namespaces; all when empty. Nodes are
	// always watched.
	Namespaces []string
	// OnViolation, when set, is called with every violation as it is found (from an informer's
	// goroutine), e.g. to log it.
	OnViolation func(Violation)
}

// Checker watches the cluster and records violations. It is safe for concurrent use.
type Checker struct {
	ctx    context.Context
	client kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	state *state
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
	ctx, cancel := context.WithCancel(ctx)
	c := &Checker{ctx: ctx, client: client, cancel: cancel, done: make(chan struct{}), state: newState(opts.OnViolation)}

	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var infs []cache.SharedIndexInformer
	for _, ns := range namespaces {
		infs = append(infs,
			c.informer(listWatch(client.CoreV1().Pods(ns)), &corev1.Pod{}),
			c.informer(listWatch(client.PolicyV1().PodDisruptionBudgets(ns)), &policyv1.PodDisruptionBudget{}),
			c.informer(listWatch(client.AppsV1().Deployments(ns)), &appsv1.Deployment{}),
			c.informer(listWatch(client.AppsV1().ReplicaSets(ns)), &appsv1.ReplicaSet{}),
			c.informer(listWatch(client.AppsV1().StatefulSets(ns)), &appsv1.StatefulSet{}),
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

// Stop stops the informers. Violations stay readable.
func (c *Checker) Stop() {
	c.cancel()
	<-c.done
}

// Violations returns the violations found so far, oldest first.
func (c *Checker) Violations() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.state.violations)
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
		AddFunc:    func(obj any) { c.apply(obj, false) },
		UpdateFunc: func(_, obj any) { c.apply(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			c.apply(obj, true)
		},
	}
}

func (c *Checker) apply(obj any, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
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
	case *corev1.Node:
		c.state.node(o, deleted)
	}
}

// relistHold is how long violations wait after an informer lists again: long enough for the
// relist's events, and the other informers' relists after the same gap, to be delivered.
const relistHold = 5 * time.Second

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
// list (a LIST, or a WATCH that sends the initial events): the events of that relist are not in
// the order things happened, so the checker holds back what it finds until they are delivered.
func (c *Checker) informer(lw *cache.ListWatch, example runtime.Object) cache.SharedIndexInformer {
	var listed atomic.Bool
	noteList := func() {
		if listed.Swap(true) {
			c.relisted()
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

// relisted starts (or extends) the hold and settles it when it ends.
func (c *Checker) relisted() {
	c.mu.Lock()
	c.state.holdUntil = time.Now().Add(relistHold)
	c.mu.Unlock()
	time.AfterFunc(relistHold, c.settle)
}

// settle confirms the suspects of a hold that is over against a fresh read of their namespaces:
// what the relist showed in the wrong order is gone, what is still violated is recorded.
func (c *Checker) settle() {
	c.mu.Lock()
	if time.Now().Before(c.state.holdUntil) {
		// A later relist extended the hold; its own timer settles.
		c.mu.Unlock()
		return
	}
	suspects := c.state.suspects
	c.state.suspects = nil
	c.mu.Unlock()

	fresh := map[string]*state{}
	var retry []Violation
	for _, v := range suspects {
		namespace, _, _ := strings.Cut(v.Object, "/")
		s := fresh[namespace]
		if s == nil {
			var err error
			if s, err = c.read(namespace); err != nil {
				if c.ctx.Err() != nil {
					return
				}
				retry = append(retry, v)
				continue
			}
			fresh[namespace] = s
		}
		if confirmed, violated := s.stillViolated(v); violated {
			confirmed.AfterWatchGap = true
			c.mu.Lock()
			c.state.record(confirmed)
			c.mu.Unlock()
		}
	}
	if len(retry) > 0 {
		// The API server is not back yet: try again after another hold.
		c.mu.Lock()
		c.state.suspects = append(c.state.suspects, retry...)
		c.mu.Unlock()
		c.relisted()
	}
}

// read builds a state from a fresh read of a namespace's workloads.
func (c *Checker) read(namespace string) (*state, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	s := newState(nil)
	deployments, err := c.client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	replicaSets, err := c.client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	statefulSets, err := c.client.AppsV1().StatefulSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pdbs, err := c.client.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range deployments.Items {
		s.deployment(&deployments.Items[i], false)
	}
	for i := range replicaSets.Items {
		s.replicaSet(&replicaSets.Items[i], false)
	}
	for i := range statefulSets.Items {
		s.statefulSet(&statefulSets.Items[i], false)
	}
	for i := range pdbs.Items {
		s.pdb(&pdbs.Items[i], false)
	}
	for i := range pods.Items {
		s.pod(&pods.Items[i], false, time.Time{})
	}
	return s, nil
}

// key returns namespace/name.
func key(namespace, name string) string { return namespace + "/" + name }

// selectorMatches reports whether the selector (nil matches nothing) selects the labels.
func selectorMatches(sel labels.Selector, l map[string]string) bool {
	return sel != nil && !sel.Empty() && sel.Matches(labels.Set(l))
}

// joinProblems renders problems one per line.
func joinProblems(problems []string) string { return strings.Join(problems, "\n") }
