package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/test/localcluster"
	"github.com/nodemaint/nodemaint/test/manifests"
)

// The methods compared. MethodNodemaintER is nodemaint asking through KEP-4563's EvictionRequest
// API (--evacuation-protocol=eviction-request, its own Eviction controller, the Deployment
// responder registered on pods by config/admission/eviction-responder); MethodNodemaint asks
// through the pods' conditions (KEP-4212) whether or not the cluster serves the API.
const (
	MethodNodemaint   = "nodemaint"
	MethodNodemaintER = "nodemaint-er"
	MethodClassic     = "kubectl-drain"
)

// knownMethods are the methods -methods accepts.
var knownMethods = []string{MethodClassic, MethodNodemaint, MethodNodemaintER, MethodFloor, MethodAlone}

// isNodemaint reports whether the method runs nodemaint-controller (in either protocol).
func isNodemaint(method string) bool { return method == MethodNodemaint || method == MethodNodemaintER }

// needsEvictionRequestAPI reports whether some method needs a cluster serving the EvictionRequest API.
func needsEvictionRequestAPI(ms []string) bool { return slices.Contains(ms, MethodNodemaintER) }

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(scheme))
}

type bench struct {
	o          options
	root       string
	cluster    *localcluster.Cluster
	cs         kubernetes.Interface
	c          client.Client
	kubeconfig string // the controller's: its ServiceAccount's token
	// reasserted counts the rebooting nodes kwok marked Ready, marked NotReady again (reboot).
	reasserted atomic.Int64
}

func newBench(ctx context.Context, o options, root string, cluster *localcluster.Cluster) (*bench, error) {
	c, err := client.New(cluster.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, root: root, cluster: cluster, cs: cluster.Client(), c: c}
	if err := b.install(ctx); err != nil {
		return nil, err
	}
	if b.kubeconfig, err = writeControllerKubeconfig(ctx, cluster); err != nil {
		return nil, err
	}
	return b, nil
}

// scenario runs s with the classic drain and with nodemaint, each on fresh workloads.
func (b *bench) scenario(ctx context.Context, s Scenario) (*ScenarioResult, error) {
	res := &ScenarioResult{Name: s.Name, Description: s.Description, Nodes: s.Nodes, Targets: s.Targets, Pods: s.pods(), Goals: s.Goals}
	empty, settled := idealTimes(s.Workloads)
	if r := s.Rollout; r != nil {
		if _, err := resolveMaxUnavailable(r.MaxUnavailable, s.Targets); err != nil {
			return res, err
		}
		res.Rollout = rolloutResult(s)
	} else {
		res.IdealEmptySeconds, res.IdealSettledSeconds = empty.Seconds(), settled.Seconds()
	}
	for _, method := range b.o.methods {
		if !slices.Contains(knownMethods, method) {
			return res, fmt.Errorf("unknown method %q (%s)", method, strings.Join(knownMethods, ", "))
		}
		slog.Info("Run", "scenario", s.Name, "method", method)
		r, err := b.run(ctx, s, method)
		if err != nil {
			return res, fmt.Errorf("%s: %w", method, err)
		}
		if s.Rollout != nil {
			r.TotalRatio = ratio(r.TotalSeconds, idealRollout(s.Workloads, s.Targets, s.Rollout.atOnce(method, s.Targets), s.Rollout.Reboot))
			slog.Info("Run done", "scenario", s.Name, "method", method, "total", fmtSeconds(r.TotalSeconds),
				"nodesBack", r.NodesBack, "blocked", r.Blocked)
		} else {
			r.EmptyRatio, r.SettledRatio = ratio(r.EmptySeconds, empty), ratio(r.SettledSeconds, settled)
			slog.Info("Run done", "scenario", s.Name, "method", method, "empty", fmtSeconds(r.EmptySeconds),
				"settled", fmtSeconds(r.SettledSeconds), "blocked", r.Blocked)
		}
		res.Runs = append(res.Runs, *r)
	}
	return res, nil
}

// run sets the scenario's workloads up in a new namespace, drains the target nodes with one
// method while the sampler watches, and restores the nodes.
func (b *bench) run(ctx context.Context, s Scenario, method string) (_ *RunResult, err error) {
	ns := fmt.Sprintf("bench-%s-%s-%d", strings.ToLower(s.Name), method, time.Now().Unix())
	targets := s.targetNodes()
	if err := b.setup(ctx, s, ns); err != nil {
		return nil, fmt.Errorf("setting up: %w", err)
	}
	defer func() {
		err = errors.Join(err, b.deleteNamespace(ctx, ns))
	}()

	desired, ignored, kinds := map[string]int{}, map[string]bool{}, map[string]string{}
	for _, w := range s.Workloads {
		desired[w.Name], ignored[w.Name], kinds[w.Name] = int(w.Replicas), w.Blocker, w.Kind
	}
	tr := newTracker(desired, ignored, targets)
	stopSampler, err := b.sample(ctx, ns, tr)
	if err != nil {
		return nil, err
	}
	defer stopSampler()
	var nt *nodeTracker
	if s.Rollout != nil || method == MethodAlone {
		nt = newNodeTracker(targets)
		stopNodes, err := b.watchNodes(ctx, nt)
		if err != nil {
			return nil, err
		}
		defer stopNodes()
	}

	var ctrl *controllerProcess
	if isNodemaint(method) {
		if ctrl, err = b.startController(ctx, ns, method); err != nil {
			return nil, err
		}
		defer ctrl.kill()
	}
	before, beforeRes, beforeLat, err := b.apiRequests(ctx)
	if err != nil {
		return nil, err
	}
	var ctrlBefore controllerMetrics
	if ctrl != nil {
		if ctrlBefore, err = ctrl.metrics(ctx); err != nil {
			return nil, err
		}
	}

	var moving map[string]int32
	if method == MethodFloor {
		if moving, err = b.prepareFloor(ctx, s, ns, targets); err != nil {
			return nil, err
		}
	}
	pids := b.cluster.PIDs()
	pids[benchProcess] = os.Getpid()
	if ctrl != nil {
		pids[controllerProcessName] = ctrl.pid()
	}
	cpuBeforeRun, err := takeCPUSnapshot(pids)
	if err != nil {
		return nil, err
	}
	res := &RunResult{Method: method}
	reasserted := b.reasserted.Load()
	start := time.Now()
	tr.begin(start)
	if nt != nil {
		nt.begin(start)
	}
	timeout := max(b.o.runTimeout, s.Timeout)
	if method == MethodAlone {
		timeout = max(timeout, b.o.aloneFor+time.Minute)
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if ctrl != nil {
		// The controller's CPU profile of the run's first 30 seconds (go tool pprof -top): where
		// its CPU goes while it moves pods.
		res.CPUProfile = fmt.Sprintf("%s-%s-cpu.pb.gz", strings.ToLower(s.Name), method)
		path := filepath.Join(b.o.out, res.CPUProfile)
		go func() {
			if err := httpGetTo(runCtx, "http://"+ctrl.pprofAddr+"/debug/pprof/profile?seconds=30", path); err != nil {
				slog.Info("No CPU profile of the run", "err", err)
			}
		}()
	}
	var clientRequests map[string]float64
	switch {
	case method == MethodAlone:
		err = leaveAlone(runCtx, b.o.aloneFor, nt)
	case s.Rollout != nil && isNodemaint(method):
		res.Blocked, res.Status, err = b.rollNodemaint(runCtx, ns, s, tr, nt)
	case s.Rollout != nil:
		clientRequests, res.Blocked, err = b.rollClassic(runCtx, targets, *s.Rollout, tr, nt)
	case isNodemaint(method):
		err = b.drainNodemaint(runCtx, ns, targets, tr)
	case method == MethodFloor:
		err = b.drainFloor(runCtx, ns, s, moving, targets, tr)
	default:
		clientRequests, res.Blocked, err = b.drainClassic(runCtx, targets, tr)
	}
	if err != nil {
		return nil, err
	}
	end := time.Now()
	res.DurationSeconds = round(end.Sub(start).Seconds())
	cpuAfterRun, err := takeCPUSnapshot(pids)
	if err != nil {
		return nil, err
	}
	res.MachineCPU = cpuAfterRun.since(cpuBeforeRun)

	after, afterRes, afterLat, err := b.apiRequests(ctx)
	if err != nil {
		return nil, err
	}
	if ctrl != nil {
		ctrlAfter, err := ctrl.metrics(ctx)
		if err != nil {
			return nil, err
		}
		// All of them, beside the CPU profile: the responses' codes (conflicts), the queues.
		metrics := filepath.Join(b.o.out, fmt.Sprintf("%s-%s-metrics.txt", strings.ToLower(s.Name), method))
		if err := os.WriteFile(metrics, ctrlAfter.text, 0o644); err != nil {
			return nil, err
		}
		clientRequests = diff(ctrlAfter.requests, ctrlBefore.requests)
		res.ControllerWrites = diff(ctrlAfter.writes, ctrlBefore.writes)
		res.NodeQueueWaitSeconds = meanOf(ctrlAfter.queueWait, ctrlBefore.queueWait)
		res.NodeReconcileSeconds = meanOf(ctrlAfter.reconcile, ctrlBefore.reconcile)
		res.ResponderQueueWaitSeconds = meanOf(ctrlAfter.responderWait, ctrlBefore.responderWait)
		res.ResponderReconcileSeconds = meanOf(ctrlAfter.responderReconcile, ctrlBefore.responderReconcile)
		res.AnswerLatency = answerLatency(ctrlAfter.answers, ctrlBefore.answers)
		res.Evictions = diff(ctrlAfter.evictions, ctrlBefore.evictions)
		res.WatchEvents = diff(ctrlAfter.watchEvents, ctrlBefore.watchEvents)
		_, hwm, err := procStats(ctrl.pid())
		if err != nil {
			return nil, err
		}
		res.ControllerCPUSeconds = ptr.To(res.MachineCPU.Processes[controllerProcessName])
		res.ControllerPeakRSSMiB = ptr.To(round(float64(hwm) / 1024))
	}
	out := tr.outcome(end.Sub(start).Seconds(), kinds)
	res.SettledSeconds = roundp(out.settled)
	res.EvacuatedPods, res.Events, res.Workloads, res.Ready = out.evacuated, out.events, out.workloads, out.total
	if nt != nil {
		res.setRollout(nt.outcome(), out.settled, int(b.reasserted.Load()-reasserted))
	} else {
		res.EmptySeconds, res.PodsLeft = roundp(out.empty), out.left
	}
	res.APIRequests, res.APIRequestsByResource = diff(after, before), diff(afterRes, beforeRes)
	res.PodStatusPatchSeconds = meanOf(afterLat, beforeLat)
	res.ClientRequests = clientRequests
	if res.EvacuatedPods > 0 {
		res.APIRequestsPerPod = perPod(res.APIRequests, res.EvacuatedPods)
		res.ClientRequestsPerPod = perPod(res.ClientRequests, res.EvacuatedPods)
		res.ControllerWritesPerPod = perPod(res.ControllerWrites, res.EvacuatedPods)
	}

	if err := b.restore(ctx, method, targets); err != nil {
		return nil, fmt.Errorf("restoring the nodes: %w", err)
	}
	return res, nil
}

// setRollout sets a rolling maintenance's figures: the nodes' outcome, the total time once the
// nodes are back and the workloads settled (the pods come back to the rebooted nodes: the pool is
// never empty), and the reboots kwok's late writes made the benchmark assert again.
func (res *RunResult) setRollout(nodes nodeOutcome, settled *float64, reasserted int) {
	res.NodesBack, res.MaxNodesOut, res.MaxNodesCordoned, res.NodesLostReady = nodes.back, nodes.maxOut, nodes.maxCordoned, nodes.lostReady
	res.RebootsReasserted = reasserted
	if nodes.allBack != nil && settled != nil {
		res.TotalSeconds = ptr.To(round(max(*nodes.allBack, *settled)))
	}
}

// setup creates the scenario's workloads in ns, on the target nodes only (every other node is
// cordoned meanwhile), and waits until they are Ready and their budgets are computed.
func (b *bench) setup(ctx context.Context, s Scenario, ns string) error {
	targets := map[string]bool{}
	for _, n := range s.targetNodes() {
		targets[n] = true
	}
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var others []string
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			return fmt.Errorf("node %s is cordoned before the run", n.Name)
		}
		if !targets[n.Name] {
			others = append(others, n.Name)
		}
	}
	// The replacements need a node besides the targets, but in a rolling maintenance, where they
	// move within the pool.
	if spare := len(nodes.Items) - len(targets); spare < 0 || spare == 0 && s.Rollout == nil {
		return fmt.Errorf("%d target nodes need a cluster of more than %d nodes", len(targets), len(nodes.Items))
	}
	if err := b.labelPool(ctx, s, nodes.Items, targets); err != nil {
		return err
	}
	if err := b.cordon(ctx, others, true); err != nil {
		return err
	}
	if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Pods can be created once the namespace's default ServiceAccount exists.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := b.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("no default ServiceAccount in %s: %w", ns, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, w := range s.Workloads {
		g.Go(func() error {
			obj, pdb := w.objects(ns)
			if pdb != nil {
				if err := b.c.Create(gctx, pdb.(client.Object)); err != nil {
					return err
				}
			}
			return b.c.Create(gctx, obj.(client.Object))
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	want := s.pods()
	slog.Info("Waiting for the workloads", "namespace", ns, "pods", want)
	ready := func(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && podutils.IsPodReady(p) }
	if err := b.waitPods(ctx, ns, want, "Ready", ready); err != nil {
		return fmt.Errorf("the workloads are not Ready: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, setupTimeout, true, func(ctx context.Context) (bool, error) {
		pdbs, err := b.cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pdbs.Items {
			if p.Status.ObservedGeneration != p.Generation || p.Status.CurrentHealthy != p.Status.ExpectedPods || p.Status.ExpectedPods == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the disruption budgets are not computed: %w", err)
	}
	return b.cordon(ctx, others, false)
}

// labelPool puts poolLabel=<scenario> on the target nodes of a scenario whose pool is labelled,
// and takes it off the others.
func (b *bench) labelPool(ctx context.Context, s Scenario, nodes []corev1.Node, targets map[string]bool) error {
	if !s.LabelPool {
		return nil
	}
	pool := s.Name
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, n := range nodes {
		var patch []byte
		switch has := n.Labels[poolLabel] == pool; {
		case targets[n.Name] && !has:
			patch = fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, poolLabel, pool)
		case !targets[n.Name] && has:
			patch = fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, poolLabel)
		default:
			continue
		}
		g.Go(func() error {
			_, err := b.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	}
	return g.Wait()
}

// cordon sets spec.unschedulable of the nodes.
func (b *bench) cordon(ctx context.Context, nodes []string, unschedulable bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, n := range nodes {
		g.Go(func() error {
			_, err := b.cs.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	}
	return g.Wait()
}

// sample feeds tr with every event of the pods in ns, until the returned function is called.
func (b *bench) sample(ctx context.Context, ns string, tr *tracker) (stop func(), err error) {
	inf := b.podInformer(ns)
	observe := func(o any, deleted bool) {
		if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = tomb.Obj
		}
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		tr.observe(time.Now(), p.Name, p.Labels[appLabel], p.Spec.NodeName, podutils.IsPodReady(p), p.DeletionTimestamp != nil, deleted)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { observe(o, false) },
		UpdateFunc: func(_, o any) { observe(o, false) },
		DeleteFunc: func(o any) { observe(o, true) },
	}); err != nil {
		return nil, err
	}
	return runInformer(ctx, inf, "the sampler")
}

// runInformer runs inf once its cache synced, until the returned function is called.
func runInformer(ctx context.Context, inf toolscache.SharedIndexInformer, what string) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	go inf.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("%s's cache did not sync", what)
	}
	return cancel, nil
}

// drainNodemaint creates a NodeMaintenance that cordons and drains the targets, and waits until
// they are empty and every workload is back at its replicas.
func (b *bench) drainNodemaint(ctx context.Context, ns string, targets []string, tr *tracker) error {
	if err := b.c.Create(ctx, b.nodeMaintenance(ns, hostnames(targets))); err != nil {
		return err
	}
	return waitTracker(ctx, tr, "the nodes empty and every workload Ready", func(s snapshot) bool { return s.left == 0 && s.allDesired })
}

// drainClassic drains the targets as `kubectl drain --ignore-daemonsets --delete-emptydir-data
// --timeout=<classic-timeout> <targets>` does: it cordons them all, then drains them one after
// another; a node that does not drain in time is reported and the next one drained. It returns
// the drainer's requests by HTTP method and what blocked it.
func (b *bench) drainClassic(ctx context.Context, targets []string, tr *tracker) (map[string]float64, string, error) {
	counter := &countingTransport{counts: map[string]float64{}}
	helper, err := b.classicDrainer(ctx, counter)
	if err != nil {
		return nil, "", err
	}
	for _, name := range targets {
		node, err := helper.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, "", err
		}
		if err := drain.RunCordonOrUncordon(helper, node, true); err != nil {
			return nil, "", fmt.Errorf("cordoning %s: %w", name, err)
		}
	}
	var blocked []string
	for _, name := range targets {
		err := drain.RunNodeDrain(helper, name)
		if timedOut(err) {
			blocked = append(blocked, name)
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("draining %s: %w", name, err)
		}
	}
	msg := ""
	if len(blocked) > 0 {
		msg = fmt.Sprintf("timed out after %v on %s", b.o.classicTimeout, strings.Join(blocked, ", "))
	}
	// The drain returns when the pods are gone; their replacements may still be starting.
	err = waitTracker(ctx, tr, "every workload Ready", func(s snapshot) bool { return s.allDesired })
	return counter.snapshot(), msg, err
}

// classicDrainer returns what kubectl drain --ignore-daemonsets --delete-emptydir-data
// --timeout=<classic-timeout> runs with: a client of its own (its own rate limit), whose
// requests counter counts by HTTP method.
func (b *bench) classicDrainer(ctx context.Context, counter *countingTransport) (*drain.Helper, error) {
	config := b.cluster.RESTConfig()
	// kubectl's defaults.
	config.QPS, config.Burst = 50, 300
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countedTransport{next: rt, counter: counter} })
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &drain.Helper{
		Ctx: ctx, Client: cs, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		Timeout: b.o.classicTimeout, Out: io.Discard, ErrOut: io.Discard,
		// kubectl drain's default; the Helper's zero value retries a refused eviction at once.
		EvictErrorRetryDelay: 5 * time.Second,
	}, nil
}

// timedOut reports whether kubectl drain gave up on a node at its --timeout: its evictions were
// still refused ("global timeout reached"), or evicted pods had not terminated yet (the
// termination wait's context deadline). kubectl reports the node and exits non-zero; the
// benchmark reports it and drains the next node, as a script running kubectl drain per node
// would.
func timedOut(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "global timeout reached") ||
		strings.Contains(err.Error(), "to terminate: "+context.DeadlineExceeded.Error()))
}

// waitTracker waits until cond holds, evaluated at every event.
func waitTracker(ctx context.Context, tr *tracker, what string, cond func(snapshot) bool) error {
	for {
		s := tr.snapshot()
		if cond(s) {
			return nil
		}
		select {
		case <-s.changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (%d pods left on the nodes)", what, ctx.Err(), s.left)
		}
	}
}

// restore undoes the drain: nodemaint's maintenance is deleted (nodemaint uncordons the nodes),
// the classic drain's nodes are uncordoned; it waits until no node is cordoned.
func (b *bench) restore(ctx context.Context, method string, targets []string) error {
	if method == MethodAlone {
		// Nothing was cordoned; a node that went not Ready is marked Ready by its next Lease.
		return nil
	}
	if isNodemaint(method) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := b.c.List(ctx, &list); err != nil {
			return err
		}
		for i := range list.Items {
			if err := b.c.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			var list nodemaintv1alpha1.NodeMaintenanceList
			if err := b.c.List(ctx, &list); err != nil {
				return false, err
			}
			return len(list.Items) == 0, nil
		})
		if err != nil {
			return fmt.Errorf("NodeMaintenance not deleted: %w", err)
		}
	} else if err := b.cordon(ctx, targets, false); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range targets {
		want[n] = true
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		// One list, not a request a node: a pool has a thousand.
		nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, node := range nodes.Items {
			if want[node.Name] && (node.Spec.Unschedulable || len(node.Spec.Taints) > 0) {
				return false, nil
			}
		}
		return true, nil
	})
}

// setupTimeout bounds the waits for a scenario's pods to be Ready and for its namespace to be
// gone: scenario L's 10,000 pods take minutes on 2 cores.
const setupTimeout = 30 * time.Minute

// deleteNamespace deletes ns and waits until it is gone.
func (b *bench) deleteNamespace(ctx context.Context, ns string) error {
	err := b.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, setupTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := b.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// apiRequests returns the API server's apiserver_request_total by verb, and by verb,
// resource and subresource.
func (b *bench) apiRequests(ctx context.Context) (byVerb, byResource, podStatusPatch map[string]float64, err error) {
	data, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	byResource, err = sumCounter(strings.NewReader(string(data)), "apiserver_request_total", "verb", "resource", "subresource")
	if err != nil {
		return nil, nil, nil, err
	}
	// Lease renewals are the fake kubelets' heartbeats (and leader election): they go on at the
	// same pace whatever drains, so they are left out of the per-verb figures.
	byVerb = map[string]float64{}
	for k, v := range byResource {
		verb, rest, _ := strings.Cut(k, " ")
		if rest != "leases" {
			byVerb[verb] += v
		}
	}
	// How long the API server takes to serve a PATCH of a pod's status (the evacuation
	// requests and answers, the kubelets' status): the histogram's sum and count.
	podStatusPatch = map[string]float64{}
	for _, part := range []string{"sum", "count"} {
		m, err := sumCounter(strings.NewReader(string(data)), "apiserver_request_duration_seconds_"+part, "verb", "resource", "subresource")
		if err != nil {
			return nil, nil, nil, err
		}
		podStatusPatch[part] = m["PATCH pods status"]
	}
	return byVerb, byResource, podStatusPatch, nil
}

func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func perPod(counts map[string]float64, pods int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range counts {
		out[k] = round(v / float64(pods))
	}
	return out
}

func roundp(f *float64) *float64 {
	if f == nil {
		return nil
	}
	return ptr.To(round(*f))
}

// countingTransport counts requests by HTTP method, of every client whose countedTransport
// names it.
type countingTransport struct {
	mu     sync.Mutex
	counts map[string]float64
}

// countedTransport counts a client's requests in counter.
type countedTransport struct {
	next    http.RoundTripper
	counter *countingTransport
}

func (t *countedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.counter.mu.Lock()
	t.counter.counts[r.Method]++
	t.counter.mu.Unlock()
	return t.next.RoundTrip(r)
}

func (t *countingTransport) snapshot() map[string]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]float64{}
	for k, v := range t.counts {
		out[k] = v
	}
	return out
}

// install applies config/crd/bases and config/rbac and waits until the CRDs are established; on
// a cluster serving the EvictionRequest API, also config/admission/eviction-responder, the
// MutatingAdmissionPolicy that registers the Deployment responder on Deployments' pods.
func (b *bench) install(ctx context.Context) error {
	if err := manifests.Install(ctx, b.c, b.root, controllerNamespace, "nodemaint-bench"); err != nil {
		return err
	}
	if !b.cluster.EvictionRequestAPI() {
		return nil
	}
	objs, err := manifests.Read(filepath.Join(b.root, "config", "admission", "eviction-responder"))
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := b.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("nodemaint-bench"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	// The admission plugin learns of the policy through an informer: wait until a Deployment's
	// pod (a dry run) gets the responder.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNamespace, Name: "probe", Labels: map[string]string{"pod-template-hash": "probe"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "probe",
				UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := probe.DeepCopy()
		if err := b.c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err
		}
		return slices.ContainsFunc(p.Spec.EvictionResponders, func(r corev1.EvictionResponder) bool { return r.Name == deployment.EvictionResponder }), nil
	})
	if err != nil {
		return fmt.Errorf("the MutatingAdmissionPolicy of config/admission/eviction-responder not in force: %w", err)
	}
	return nil
}

// idleMemory grows the cluster to nodes nodes and pods pods (spread over every node), runs the
// controller with no maintenance, and reports its memory once its caches are synced.
func (b *bench) idleMemory(ctx context.Context, nodes, pods int) (*IdleResult, error) {
	list, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	if missing := nodes - len(list.Items); missing > 0 {
		slog.Info("Adding nodes for the idle measurement", "nodes", missing)
		if _, err := b.cluster.AddNodes(ctx, missing); err != nil {
			return nil, err
		}
	}
	ns := fmt.Sprintf("bench-idle-%d", time.Now().Unix())
	if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if b.o.keep {
		// Otherwise the cluster goes with the benchmark, and tens of thousands of pods need
		// not be deleted one by one first.
		defer func() {
			if err := b.deleteNamespace(ctx, ns); err != nil {
				slog.Error("Deleting the idle namespace", "err", err)
			}
		}()
	}
	if err := b.createIdlePods(ctx, ns, pods); err != nil {
		return nil, err
	}
	slog.Info("Waiting for the idle pods", "pods", pods)
	running := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }
	if err := b.waitPods(ctx, ns, pods, "Running", running); err != nil {
		return nil, fmt.Errorf("the idle pods are not Running: %w", err)
	}
	ctrl, err := b.startController(ctx, ns, MethodNodemaint)
	if err != nil {
		return nil, err
	}
	defer ctrl.kill()
	// Let the caches sync and the first reconciles of every node pass.
	time.Sleep(30 * time.Second)
	cpu, hwm, err := procStats(ctrl.pid())
	if err != nil {
		return nil, err
	}
	rss, err := procRSS(ctrl.pid())
	if err != nil {
		return nil, err
	}
	res := &IdleResult{Nodes: nodes, Pods: pods, RSSMiB: round(float64(rss) / 1024), PeakRSSMiB: round(float64(hwm) / 1024), CPUSeconds: round(cpu)}
	// The heap profile says what the memory holds: go tool pprof -top -sample_index=inuse_space.
	profile := fmt.Sprintf("idle-heap-%d-%d.pb.gz", nodes, pods)
	inuse, err := ctrl.heapProfile(ctx, filepath.Join(b.o.out, profile))
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	res.HeapInuseMiB, res.HeapProfile = round(inuse/(1<<20)), profile
	// What the RSS is made of beside the live heap: /proc's RssAnon and RssFile (the binary's
	// pages), the Go runtime's memstats (the heap's goal, the memory it keeps and releases).
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ctrl.pid()))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(b.o.out, fmt.Sprintf("idle-status-%d-%d.txt", nodes, pods)), status, 0o644); err != nil {
		return nil, err
	}
	if err := httpGetTo(ctx, "http://"+ctrl.metricsAddr+"/metrics", filepath.Join(b.o.out, fmt.Sprintf("idle-metrics-%d-%d.txt", nodes, pods))); err != nil {
		return nil, err
	}
	idle0, err := ctrl.metrics(ctx)
	if err != nil {
		return nil, err
	}
	idleFrom := time.Now()
	// The runtime returns the pages the start's garbage left (decoding every object, the
	// initial notifications) gradually: the RSS of a controller idle for longer.
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if rss, err = procRSS(ctrl.pid()); err != nil {
		return nil, err
	}
	res.SettledRSSMiB = round(float64(rss) / 1024)
	if err := httpGetTo(ctx, "http://"+ctrl.metricsAddr+"/metrics", filepath.Join(b.o.out, fmt.Sprintf("idle-metrics-%d-%d-settled.txt", nodes, pods))); err != nil {
		return nil, err
	}
	if b.o.idlePlanning > 0 {
		idle1, err := ctrl.metrics(ctx)
		if err != nil {
			return nil, err
		}
		if res.Planning, err = b.idlePlanning(ctx, ctrl, b.o.idlePlanning, idle0, idle1, time.Since(idleFrom)); err != nil {
			return res, fmt.Errorf("with Planning maintenances: %w", err)
		}
		slog.Info("With Planning maintenances", "result", res.Planning.summary())
		if err := httpGetTo(ctx, "http://"+ctrl.metricsAddr+"/metrics", filepath.Join(b.o.out, fmt.Sprintf("idle-metrics-%d-%d-planning.txt", nodes, pods))); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// idleSettle is how much longer the idle measurement reads the RSS again (IdleResult.SettledRSSMiB).
const idleSettle = 90 * time.Second

// createIdlePods creates pods pods in namespace, spread evenly over the cluster's kwok nodes,
// bound to them already, and Running: on 2 cores kube-scheduler places about 10 pods a second on
// a cluster of 1,000 nodes and kwok starts about 20 a second, so tens of thousands of pods would
// take hours to schedule and most of an hour to start. Each pod is created with kwok's
// pod-create stage held back and its status written right after as kwok would have left it
// (idle.go). What the controller holds in memory for them (pods in its informer, indexed by
// node) is the same.
func (b *bench) createIdlePods(ctx context.Context, ns string, pods int) error {
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0", LabelSelector: localcluster.KwokNodeLabel + "=fake"})
	if err != nil {
		return err
	}
	if len(nodes.Items) == 0 {
		return errors.New("no kwok nodes")
	}
	config := b.cluster.RESTConfig()
	config.QPS, config.Burst = 1000, 2000
	// Protobuf: the API server decodes and encodes 100,000 requests here.
	config.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	w := Workload{Name: "idle", Kind: KindDeployment, Replicas: 1, ReadyDelay: sec, DeleteDelay: sec}
	obj, _ := w.objects(ns)
	tmpl := obj.(*appsv1.Deployment).Spec.Template
	tmpl.Annotations[localcluster.PodCreateDelayAnnotation] = idleCreateDelay.String()
	slog.Info("Creating the idle pods, Running", "pods", pods, "nodes", len(nodes.Items))
	start := time.Now()
	var created atomic.Int64
	next := make(chan int)
	g, ctx := errgroup.WithContext(ctx)
	for range 32 {
		g.Go(func() error {
			for i := range next {
				node := &nodes.Items[i%len(nodes.Items)]
				pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
				pod.Name, pod.Namespace = fmt.Sprintf("idle-%05d", i), ns
				pod.Spec.NodeName = node.Name
				got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				if err != nil {
					return fmt.Errorf("creating pod %s: %w", pod.Name, err)
				}
				got.Status = runningStatus(got, nodeHostIP(node), idlePodIP(i), time.Now())
				if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("starting pod %s: %w", pod.Name, err)
				}
				if n := created.Add(1); n%5000 == 0 {
					slog.Info("Idle pods Running", "count", n, "of", pods, "took", time.Since(start).Round(time.Second))
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(next)
		for i := range pods {
			select {
			case next <- i:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	return g.Wait()
}

// podInformer returns an informer on the pods of ns.
func (b *bench) podInformer(ns string) toolscache.SharedIndexInformer {
	lw := toolscache.NewListWatchFromClient(b.cs.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	return toolscache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, nil)
}

// waitPods waits up to setupTimeout until want pods of ns are what ok says (what names it in
// the log). It watches them: listing thousands of pods again and again takes the CPU the API
// server and kwok need to start them.
func (b *bench) waitPods(ctx context.Context, ns string, want int, what string, ok func(*corev1.Pod) bool) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	inf := b.podInformer(ns)
	go inf.RunWithContext(ctx)
	n, last := 0, time.Now()
	err := wait.PollUntilContextCancel(ctx, time.Second, false, func(context.Context) (bool, error) {
		n = 0
		for _, o := range inf.GetStore().List() {
			if ok(o.(*corev1.Pod)) {
				n++
			}
		}
		if time.Since(last) >= 15*time.Second {
			slog.Info("Pods "+what, "count", n, "of", want)
			last = time.Now()
		}
		return n >= want, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d pods %s: %w", n, want, what, err)
	}
	return nil
}
