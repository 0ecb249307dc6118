package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// watchNodes feeds nt with every event of the cluster's nodes, until the returned function is
// called.
func (b *bench) watchNodes(ctx context.Context, nt *nodeTracker) (stop func(), err error) {
	lw := toolscache.NewListWatchFromClient(b.cs.CoreV1().RESTClient(), "nodes", "", fields.Everything())
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, nil)
	observe := func(o any) {
		if n, ok := o.(*corev1.Node); ok {
			nt.observe(time.Now(), n.Name, n.Status.NodeInfo.BootID, localcluster.IsNodeReady(n), n.Spec.Unschedulable, drained(n))
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, o any) { observe(o) },
	}); err != nil {
		return nil, err
	}
	return runInformer(ctx, inf, "the node watch")
}

// drained reports whether the node has the KEP-5683 condition Drained=True, what a reboot
// daemon that knows nothing of nodemaint waits for.
func drained(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeDrained && c.Status == corev1.ConditionTrue
	})
}

// reboot simulates the reboot of a drained node, taking d. kwok leaves the node's status alone
// (otherwise kwok's node-initialize stage marks a node that is not Ready Ready again at once)
// while it goes on renewing the node's Lease, and the node reports NotReady. After d it boots: it
// reports a new boot ID, still NotReady, and kwok writes its status again: its node-initialize
// stage marks it Ready, keeping the boot ID (kwok's heartbeat does not write nodeInfo). The boot
// ID changes as the node comes back, as a kubelet reports it, so no write of kwok's can show the
// node Ready and rebooted before its reboot is over.
//
// kwok can still write the node's status after the hold, from work it had queued: the node is
// then marked NotReady again, and the run's rebootsReasserted counts it.
func (b *bench) reboot(ctx context.Context, nt *nodeTracker, node string, d time.Duration) (err error) {
	if err := b.cluster.HoldNodeStatus(ctx, node); err != nil {
		return err
	}
	defer func() {
		// Whatever happened, kwok gets the node's status back: the next runs need it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, b.cluster.ReleaseNodeStatus(ctx, node))
	}()
	if err := b.cluster.MarkNodeNotReady(ctx, node, ""); err != nil {
		return err
	}
	booted := time.After(d)
	down := false
	for {
		n, changed := nt.node(node)
		switch {
		case !n.ready:
			down = true
		case down:
			slog.Info("kwok marked a rebooting node Ready: marking it NotReady again", "node", node)
			b.reasserted.Add(1)
			if err := b.cluster.MarkNodeNotReady(ctx, node, ""); err != nil {
				return err
			}
			down = false
		}
		select {
		case <-changed:
		case <-booted:
			return b.cluster.MarkNodeNotReady(ctx, node, string(uuid.NewUUID()))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// rebootDaemon is what kured or system-upgrade-controller does next to nodemaint: it waits for
// the KEP-5683 condition Drained=True on a node of the pool and reboots it, once per run.
type rebootDaemon struct {
	b      *bench
	nt     *nodeTracker
	reboot time.Duration
	// fail ends the run with the error of a reboot.
	fail    context.CancelCauseFunc
	running sync.WaitGroup
}

// run reboots every node that is drained, until ctx is done; it returns once the reboots it
// started are over.
func (d *rebootDaemon) run(ctx context.Context) {
	defer d.running.Wait()
	rebooted := map[string]bool{}
	for {
		drained, changed := d.nt.drainedNodes()
		for _, name := range drained {
			if rebooted[name] {
				continue
			}
			rebooted[name] = true
			slog.Info("Rebooting", "node", name)
			d.running.Go(func() {
				if err := d.b.reboot(ctx, d.nt, name, d.reboot); err != nil {
					d.fail(fmt.Errorf("rebooting %s: %w", name, err))
				}
			})
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// rollNodemaint creates a NodeMaintenance that rolls through the scenario's pool
// spec.rollout.maxUnavailable nodes at a time and releases each node once rebooted, reboots each
// node once it is drained, and waits until the maintenance is complete (every node released)
// and every workload is back at its replicas, watching the maintenance's status meanwhile. It
// returns what held the rollout up, if anything, and what the watch saw of the status.
func (b *bench) rollNodemaint(ctx context.Context, ns string, s Scenario, tr *tracker, nt *nodeTracker) (string, *StatusFigures, error) {
	r := *s.Rollout
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	daemon := &rebootDaemon{b: b, nt: nt, reboot: r.Reboot, fail: fail}
	daemonCtx, stopDaemon := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		daemon.run(daemonCtx)
	}()
	defer func() {
		stopDaemon()
		<-done
	}()

	nm := b.nodeMaintenance(ns, s.poolRequirement())
	nm.Spec.Rollout = &nodemaintv1alpha1.RolloutSpec{
		MaxUnavailable: ptr.To(r.MaxUnavailable),
		Release:        nodemaintv1alpha1.ReleaseRebooted,
	}
	st := newStatusTracker(s.Targets, r.atOnce(MethodNodemaint, s.Targets))
	if err := b.c.Create(ctx, nm); err != nil {
		return "", nil, err
	}
	final, err := b.waitMaintenanceComplete(ctx, nm.Name, st.observe)
	if err == nil {
		err = waitTracker(ctx, tr, "every workload Ready", func(s snapshot) bool { return s.allDesired })
	}
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	if err != nil {
		return "", nil, err
	}
	if r := final.Status.Rollout; r != nil && r.NodesFailed > 0 {
		return fmt.Sprintf("%d nodes failed their turn", r.NodesFailed), st.figures(), nil
	}
	return "", st.figures(), nil
}

// poolRequirement selects the scenario's target nodes: by poolLabel when the pool is labelled,
// otherwise by their host names.
func (s Scenario) poolRequirement() corev1.NodeSelectorRequirement {
	if s.LabelPool {
		return corev1.NodeSelectorRequirement{Key: poolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{s.Name}}
	}
	return hostnames(s.targetNodes())
}

// hostnames selects the nodes by their host names.
func hostnames(nodes []string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}
}

// nodeMaintenance is the benchmark's NodeMaintenance of the nodes req selects: cordon and drain.
func (b *bench) nodeMaintenance(name string, req corev1.NodeSelectorRequirement) *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{req},
			}}},
			Cordon: true, Drain: true, Reason: "benchmark",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: b.o.responseTimeout},
		},
	}
}

// waitMaintenanceComplete watches the NodeMaintenance until its phase is MaintenanceComplete,
// and returns it then; observe, when set, is shown every version of it.
func (b *bench) waitMaintenanceComplete(ctx context.Context, name string, observe func(*nodemaintv1alpha1.NodeMaintenance)) (*nodemaintv1alpha1.NodeMaintenance, error) {
	wc, err := client.NewWithWatch(b.cluster.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			list := &nodemaintv1alpha1.NodeMaintenanceList{}
			return list, wc.List(ctx, list, &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return wc.Watch(ctx, &nodemaintv1alpha1.NodeMaintenanceList{}, &client.ListOptions{Raw: &opts})
		},
	}
	ev, err := watchtools.UntilWithSync(ctx, lw, &nodemaintv1alpha1.NodeMaintenance{}, nil, func(ev watch.Event) (bool, error) {
		nm, ok := ev.Object.(*nodemaintv1alpha1.NodeMaintenance)
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("NodeMaintenance %s deleted", name)
		}
		if ok && observe != nil {
			observe(nm)
		}
		return ok && nm.Status.Phase == nodemaintv1alpha1.PhaseMaintenanceComplete, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for NodeMaintenance %s to be complete: %w", name, err)
	}
	return ev.Object.(*nodemaintv1alpha1.NodeMaintenance), nil
}

// rollClassic runs the loop every reboot daemon runs (kured): for each node of the pool in name
// order, `kubectl drain` (cordon, then drain, with the classic drain's options and timeout), the
// simulated reboot, once the node is Ready again `kubectl uncordon` (kured uncordons from its pod
// on the node, which runs once the node is up), next node; the rollout's ClassicAtOnce nodes at a
// time (kured's --concurrency), each worker with a client of its own, as each node's daemon has.
// A drain that times out is run again: a reboot daemon does not reboot a node it could not
// drain. It returns the drainers' requests by HTTP method and the drains that timed out.
func (b *bench) rollClassic(ctx context.Context, pool []string, r Rollout, tr *tracker, nt *nodeTracker) (map[string]float64, string, error) {
	counter := &countingTransport{counts: map[string]float64{}}
	next := make(chan string)
	var mu sync.Mutex
	var timeouts []string
	g, gctx := errgroup.WithContext(ctx)
	for range min(r.atOnce(MethodClassic, len(pool)), len(pool)) {
		helper, err := b.classicDrainer(gctx, counter)
		if err != nil {
			return nil, "", err
		}
		g.Go(func() error {
			for name := range next {
				t, err := b.rollClassicNode(gctx, helper, name, r.Reboot, nt)
				mu.Lock()
				timeouts = append(timeouts, t...)
				mu.Unlock()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(next)
		for _, name := range slices.Sorted(slices.Values(pool)) {
			select {
			case next <- name:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	err := waitTracker(ctx, tr, "every workload Ready", func(s snapshot) bool { return s.allDesired })
	return counter.snapshot(), drainTimeouts(timeouts, len(pool), b.o.classicTimeout), err
}

// rollClassicNode is the classic loop's turn of one node: cordon, drain (again while it times
// out), reboot, wait until it is Ready, uncordon. It returns the node's name once for each drain
// that timed out.
func (b *bench) rollClassicNode(ctx context.Context, helper *drain.Helper, name string, reboot time.Duration, nt *nodeTracker) ([]string, error) {
	node, err := helper.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if err := drain.RunCordonOrUncordon(helper, node, true); err != nil {
		return nil, fmt.Errorf("cordoning %s: %w", name, err)
	}
	var timeouts []string
	for {
		err := drain.RunNodeDrain(helper, name)
		if timedOut(err) {
			timeouts = append(timeouts, name)
			continue
		}
		if err != nil {
			return timeouts, fmt.Errorf("draining %s: %w", name, err)
		}
		break
	}
	slog.Info("Rebooting", "node", name)
	if err := b.reboot(ctx, nt, name, reboot); err != nil {
		return timeouts, fmt.Errorf("rebooting %s: %w", name, err)
	}
	if err := waitNode(ctx, nt, name, "Ready after its reboot", func(n nodeState) bool { return n.rebooted && n.ready }); err != nil {
		return timeouts, err
	}
	if node, err = helper.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
		return timeouts, err
	}
	if err := drain.RunCordonOrUncordon(helper, node, false); err != nil {
		return timeouts, fmt.Errorf("uncordoning %s: %w", name, err)
	}
	return timeouts, nil
}

// drainTimeouts says which drains of the classic loop timed out and were run again, naming at
// most 3 nodes: timeouts has a node's name for each.
func drainTimeouts(timeouts []string, pool int, timeout time.Duration) string {
	if len(timeouts) == 0 {
		return ""
	}
	nodes := slices.Compact(slices.Clone(timeouts))
	which := strings.Join(nodes, ", ")
	if len(nodes) > 3 {
		which = fmt.Sprintf("%d of the %d nodes", len(nodes), pool)
	}
	return fmt.Sprintf("%d drains timed out after %v and were run again (%s)", len(timeouts), timeout, which)
}

// waitNode waits until cond holds of the node, evaluated at every node event.
func waitNode(ctx context.Context, nt *nodeTracker, name, what string, cond func(nodeState) bool) error {
	for {
		n, changed := nt.node(name)
		if cond(n) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s %s: %w", name, what, ctx.Err())
		}
	}
}
