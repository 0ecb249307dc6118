// Package invariants watches a cluster while nodemaint works on it and records every breach of
// what nodemaint promises a cluster admin:
//
//   - a PodDisruptionBudget is never violated: the number of healthy pods it selects (Ready, not
//     terminating, counted from the pods themselves) never drops below what its minAvailable or
//     maxUnavailable allows;
//   - a surge-capable Deployment (RollingUpdate with maxSurge > 0, not paused) never has fewer
//     Ready pods than the replicas its user asked for;
//   - once the maintenances are over, nothing of nodemaint's is left (CheckClean): no cordon,
//     taint, annotation or condition on nodes, no evacuation condition or annotation on pods, no
//     annotation on Deployments and ReplicaSets, and every Deployment back at its replicas.
//
// The first two are checked on every watch event (client-go informers), so no breach falls
// between two polls. Only a disruption violates them: the check runs when a pod stops counting
// (it is deleted, starts terminating or turns not Ready), never because a budget or a replica
// count went up. A budget or Deployment is checked only once it was seen fully available, so
// workloads still starting up when the checker starts, or when they are created, are no false
// positives.
//
// The package does not import testing: the end-to-end tests and the benchmarks both use it.
package invariants

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
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
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s %s: %d healthy pods after %s left, at least %d allowed",
		v.Time.Format(time.RFC3339Nano), v.Kind, v.Object, v.Healthy, v.Pod, v.Want)
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
	c := &Checker{client: client, cancel: cancel, done: make(chan struct{}), state: newState(opts.OnViolation)}

	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var synced []cache.InformerSynced
	var factories []informers.SharedInformerFactory
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		factories = append(factories, f)
		for _, inf := range []cache.SharedIndexInformer{
			f.Core().V1().Pods().Informer(),
			f.Policy().V1().PodDisruptionBudgets().Informer(),
			f.Apps().V1().Deployments().Informer(),
			f.Apps().V1().ReplicaSets().Informer(),
			f.Apps().V1().StatefulSets().Informer(),
		} {
			reg, err := inf.AddEventHandler(c.handler())
			if err != nil {
				cancel()
				return nil, err
			}
			synced = append(synced, reg.HasSynced)
		}
	}
	nodes := informers.NewSharedInformerFactory(client, 0)
	factories = append(factories, nodes)
	reg, err := nodes.Core().V1().Nodes().Informer().AddEventHandler(c.handler())
	if err != nil {
		cancel()
		return nil, err
	}
	synced = append(synced, reg.HasSynced)

	for _, f := range factories {
		f.Start(ctx.Done())
	}
	go func() {
		<-ctx.Done()
		for _, f := range factories {
			f.Shutdown()
		}
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

// key returns namespace/name.
func key(namespace, name string) string { return namespace + "/" + name }

// selectorMatches reports whether the selector (nil matches nothing) selects the labels.
func selectorMatches(sel labels.Selector, l map[string]string) bool {
	return sel != nil && !sel.Empty() && sel.Matches(labels.Set(l))
}

// joinProblems renders problems one per line.
func joinProblems(problems []string) string { return strings.Join(problems, "\n") }
