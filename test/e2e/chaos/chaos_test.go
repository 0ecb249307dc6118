package chaos_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// chaosSize is the size of a chaos run.
type chaosSize struct {
	// maintained is the number of nodes of the main maintenance, kwok-node-0 on.
	maintained int
	// scale multiplies the number of workloads.
	scale int
	// kills is the number of times the leader is killed taking turns at aimedWindows; one more
	// kill aims at windowEviction.
	kills int
}

var (
	shortChaos = chaosSize{maintained: 10, scale: 1, kills: 20}
	longChaos  = chaosSize{maintained: 20, scale: 2, kills: 40}
)

// aimTimeout bounds the wait for a window to open: past it the kill lands at random (and is
// counted so).
const aimTimeout = 5 * time.Second

// takeoverTimeout bounds the wait for a replica to lead after the leader was killed: the lease
// (4s) expires, the standby acquires it.
const takeoverTimeout = 20 * time.Second

// responseTimeout is the maintenances' evacuationResponseTimeout: pods nobody answers for (the
// StatefulSet's, the Job's) are evicted within the test, while the Deployment responder, even
// across several leader changes, answers long before.
const responseTimeout = 30 * time.Second

// Pods start and stop slowly enough for the faults to land mid-drain.
var podDelays = map[string]string{
	localcluster.PodReadyDelayAnnotation:  "2s",
	localcluster.PodDeleteDelayAnnotation: "3s",
}

func TestChaos(t *testing.T) {
	if loadTest {
		t.Skip("NODEMAINT_E2E_LOAD runs the load test only")
	}
	size := shortChaos
	if long {
		size = longChaos
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NODEMAINT_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("NODEMAINT_CHAOS_SEED: %v", err)
		}
	}
	t.Logf("chaos seed %d (replay with NODEMAINT_CHAOS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	ctx := t.Context()
	c := framework.Client()
	ns := framework.Namespace(t)
	pods := createWorkloads(t, ns, size.scale)
	waitAllReady(t, ns, pods)
	t.Logf("%d pods Ready", pods)

	checker, err := invariants.Start(ctx, framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{
		Namespaces:  []string{ns},
		OnViolation: func(v invariants.Violation) { t.Logf("VIOLATION %s", v) },
		Witness:     true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := checker.Stop(); err != nil {
			t.Errorf("stopping the invariant checker: %v", err)
		}
	})
	wins, err := watchWindows(ctx, framework.Cluster().RESTConfig(), ns)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	d := &driver{t: t, rng: rng, windows: wins, aimed: map[window]int{}, missed: map[window]int{}}
	d.ctrls = []*framework.Controller{framework.NewController(t), framework.NewController(t)}
	for _, ctrl := range d.ctrls {
		ctrl.Start()
	}

	main := maintenance("chaos", nodeRange(0, size.maintained), true)
	if err := c.Create(ctx, main); err != nil {
		t.Fatal(err)
	}
	// Overlapping maintenances, created and deleted mid-way: one drains nodes inside and
	// outside the main one's, one only cordons nodes inside it.
	overlaps := []*nodemaintv1alpha1.NodeMaintenance{
		maintenance("overlap-drain", nodeRange(size.maintained-2, size.maintained+2), true),
		maintenance("overlap-cordon", nodeRange(2, 5), false),
	}
	// Which fault comes after which kill.
	createAt := map[int]*nodemaintv1alpha1.NodeMaintenance{1: overlaps[0], 2: overlaps[1]}
	deleteAt := map[int]*nodemaintv1alpha1.NodeMaintenance{size.kills/2 + 1: overlaps[0], size.kills - 1: overlaps[1]}
	restartAt := size.kills / 2
	if long {
		// A second round of the overlapping drain (the first may still be finalizing).
		again := overlaps[0].DeepCopy()
		again.Name = "overlap-drain-again"
		createAt[size.kills-6] = again
		deleteAt[size.kills-2] = createAt[size.kills-6]
	}

	restarts := 0
	for kill := 1; kill <= size.kills; kill++ {
		d.killLeader(aimedWindows[(kill-1)%len(aimedWindows)], aimTimeout)
		if nm := createAt[kill]; nm != nil {
			nm = nm.DeepCopy()
			nm.ResourceVersion = ""
			if err := c.Create(ctx, nm); err != nil {
				t.Fatalf("creating NodeMaintenance %s: %v", nm.Name, err)
			}
			t.Logf("created NodeMaintenance %s", nm.Name)
		}
		if nm := deleteAt[kill]; nm != nil {
			if err := c.Delete(ctx, nm.DeepCopy()); err != nil {
				t.Fatalf("deleting NodeMaintenance %s: %v", nm.Name, err)
			}
			t.Logf("deleted NodeMaintenance %s", nm.Name)
		}
		if kill == restartAt {
			d.sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
			t.Logf("restarting the API server")
			if err := framework.Cluster().RestartAPIServer(ctx); err != nil {
				t.Fatalf("restarting the API server: %v", err)
			}
			restarts++
		}
	}
	// Last, right after the first eviction of a pod nobody answers for, once its response
	// timeout ran out under one leader.
	d.killLeader(windowEviction, responseTimeout+15*time.Second)
	lastFault := time.Now()
	t.Logf("faults over: %d kills survived, API server restarted %d times", d.kills, restarts)

	d.waitFor(10*time.Minute, "NodeMaintenance chaos drained", func(ctx context.Context) (bool, string, error) {
		var nm nodemaintv1alpha1.NodeMaintenance
		if err := c.Get(ctx, client.ObjectKey{Name: "chaos"}, &nm); err != nil {
			return false, "", err
		}
		drained := meta.IsStatusConditionTrue(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained)
		why := ""
		if cond := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained); cond != nil {
			why = fmt.Sprintf("; %s: %s", cond.Reason, cond.Message)
		}
		return nm.Status.Phase == nodemaintv1alpha1.PhaseDrainComplete && drained,
			fmt.Sprintf("phase %s, %d pending, %d evacuating%s", nm.Status.Phase, nm.Status.PodsPendingEvacuation, nm.Status.PodsEvacuating, why), nil
	})
	converged := time.Since(lastFault)
	t.Logf("drained %v after the last fault", converged.Round(100*time.Millisecond))

	// Complete the maintenance, then delete it, as an admin would.
	if err := c.Get(ctx, client.ObjectKeyFromObject(main), main); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(main.DeepCopy())
	main.Spec.Cordon, main.Spec.Drain = false, false
	if err := c.Patch(ctx, main, patch); err != nil {
		t.Fatal(err)
	}
	completed := time.Now()
	d.waitFor(3*time.Minute, "NodeMaintenance chaos complete", func(ctx context.Context) (bool, string, error) {
		var nm nodemaintv1alpha1.NodeMaintenance
		if err := c.Get(ctx, client.ObjectKey{Name: "chaos"}, &nm); err != nil {
			return false, "", err
		}
		return nm.Status.Phase == nodemaintv1alpha1.PhaseMaintenanceComplete, string(nm.Status.Phase), nil
	})
	if err := c.Delete(ctx, main); err != nil {
		t.Fatal(err)
	}
	d.waitFor(3*time.Minute, "every NodeMaintenance gone and nothing of nodemaint's left", func(ctx context.Context) (bool, string, error) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := c.List(ctx, &list); err != nil {
			return false, "", err
		}
		if len(list.Items) > 0 {
			return false, fmt.Sprintf("%d NodeMaintenances left", len(list.Items)), nil
		}
		if err := checker.CheckClean(ctx, ns); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	t.Logf("restored %v after the maintenance completed", time.Since(completed).Round(100*time.Millisecond))

	gaps, gapChanges := checker.Gaps()
	budgets, deployments := checker.Watched()
	violations := checker.Violations()
	var byWindow []string
	for _, win := range append(slices.Clone(aimedWindows), windowEviction) {
		byWindow = append(byWindow, fmt.Sprintf("%s %d", win, d.aimed[win]))
		if d.missed[win] > 0 {
			byWindow[len(byWindow)-1] += fmt.Sprintf(" (+%d not seen open, at random)", d.missed[win])
		}
	}
	t.Logf("chaos figures: seed %d, %d pods, %d nodes maintained, %d leader kills (%s), %d failovers to the other replica "+
		"(longest takeover %v), %d replicas that exited by themselves, API server restarted %d times, %d watch gaps replayed (%d pod changes inside), "+
		"%d budgets and %d surge-capable Deployments checked, %d invariant violations, drained %v after the last fault, %v in all",
		seed, pods, size.maintained, d.kills, strings.Join(byWindow, ", "), d.failovers, d.longestTakeover.Round(100*time.Millisecond),
		d.exited, restarts, gaps, gapChanges, budgets, deployments, len(violations), converged.Round(100*time.Millisecond),
		time.Since(start).Round(time.Second))
	for _, v := range violations {
		t.Errorf("invariant violated: %s", v)
	}
	if budgets == 0 {
		t.Errorf("the checker checked no budget: it saw nothing to check")
	}
	if deployments == 0 {
		t.Errorf("the checker checked no Deployment: it saw nothing to check")
	}
	if d.kills < size.kills+1 {
		t.Errorf("%d leader kills, want %d", d.kills, size.kills+1)
	}
	if d.failovers == 0 {
		t.Errorf("no failover, want at least 1")
	}
	if restarts != 1 {
		t.Errorf("%d API server restarts, want 1", restarts)
	}
	if gaps == 0 {
		t.Errorf("no watch gap of the checker replayed, want at least 1: the restart's")
	}
}

// driver kills and restarts the controllers; it runs on the test's goroutine (Start may fail
// the test).
type driver struct {
	t       *testing.T
	rng     *rand.Rand
	ctrls   []*framework.Controller
	windows *windows
	// kills, aimed and missed by window, failovers (the other replica took over), replicas that
	// exited by themselves, the longest takeover.
	kills, failovers, exited int
	aimed, missed            map[window]int
	longestTakeover          time.Duration
}

func (d *driver) sleep(dur time.Duration) {
	select {
	case <-d.t.Context().Done():
	case <-time.After(dur):
	}
	d.keepAlive()
}

// killLeader waits for win to open, at most timeout (windowRandom: a random moment of up to
// 2s), SIGKILLs the
// leader, waits until a replica leads again, and starts the killed one again: it becomes the
// standby. As the killed replica is not running until a replica leads again, the other one
// took over: a failover.
func (d *driver) killLeader(win window, timeout time.Duration) {
	d.t.Helper()
	d.keepAlive()
	what := ""
	if win == windowRandom {
		d.sleep(time.Duration(d.rng.Int64N(int64(2 * time.Second))))
	} else if what = d.windows.wait(d.t.Context(), win, timeout); what == "" {
		d.missed[win]++
	}
	i := d.leader(takeoverTimeout)
	if i < 0 {
		i = d.rng.IntN(len(d.ctrls))
	}
	d.ctrls[i].Kill()
	killed := time.Now()
	d.kills++
	if what != "" || win == windowRandom {
		d.aimed[win]++
	}
	if what == "" && win != windowRandom {
		what = fmt.Sprintf("not seen open in %v, at random", timeout)
	}
	j := d.leader(takeoverTimeout)
	took := time.Since(killed)
	if j >= 0 && j != i {
		d.failovers++
		d.longestTakeover = max(d.longestTakeover, took)
	}
	d.t.Logf("kill %d aimed at %s: %s; replica %d killed, replica %d leads %v later", d.kills, win, what, i, j, took.Round(100*time.Millisecond))
	d.ctrls[i].Start()
}

// leader returns the replica that leads, waiting for one at most timeout; -1 when none does.
func (d *driver) leader(timeout time.Duration) int {
	leader := -1
	_ = wait.PollUntilContextTimeout(d.t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for j, ctrl := range d.ctrls {
			if ctrl.Leads(ctx) {
				leader = j
				return true, nil
			}
		}
		d.keepAlive()
		return false, nil
	})
	return leader
}

// keepAlive starts again a replica that exited by itself: a replica that cannot renew its
// lease in time (the API server restarting, a starved machine) exits, as it should.
func (d *driver) keepAlive() {
	d.t.Helper()
	for i, ctrl := range d.ctrls {
		if !ctrl.Running() || ctrl.Healthy() {
			continue
		}
		d.t.Logf("replica %d exited by itself; starting it again", i)
		d.exited++
		ctrl.Kill()
		ctrl.Start()
	}
}

// waitFor polls cond every second, keeping the controllers running, until it is done.
func (d *driver) waitFor(timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	d.t.Helper()
	deadline, logged := time.Now().Add(timeout), time.Now()
	var state string
	var err error
	for {
		var done bool
		ctx, cancel := context.WithTimeout(d.t.Context(), 10*time.Second)
		done, state, err = cond(ctx)
		cancel()
		if done && err == nil {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: not after %v (state: %s, last error: %v)", what, timeout, state, err)
		}
		if time.Since(logged) >= 15*time.Second {
			d.t.Logf("waiting for %s: %s", what, state)
			logged = time.Now()
		}
		d.sleep(time.Second)
	}
}

// scrape sums the samples of the metric whose labels contain every one of match.
func scrape(url, metric string, match ...string) (float64, error) {
	resp, err := framework.GetMetrics(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		for _, m := range match {
			if !strings.Contains(line, m) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

func nodeRange(from, to int) []string {
	var names []string
	for i := from; i < to; i++ {
		names = append(names, localcluster.NodeNamePrefix+strconv.Itoa(i))
	}
	return names
}

// maintenance returns a NodeMaintenance of the nodes that cordons them and drains them or not.
func maintenance(name string, nodes []string, drain bool) *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}},
			}}},
			Cordon: true, Drain: drain, Reason: "chaos test",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: responseTimeout},
		},
	}
}

// createWorkloads creates every kind of workload and returns how many pods they run.
func createWorkloads(t *testing.T, ns string, scale int) int {
	t.Helper()
	ctx := t.Context()
	c := framework.Client()
	var objs []client.Object
	pods := 0
	deployment := func(name string, replicas int32, maxSurge intstr.IntOrString, pdb *policyv1.PodDisruptionBudgetSpec) {
		d := framework.NewDeployment(ns, name, replicas)
		d.Spec.Template.Annotations = podDelays
		d.Spec.Strategy = appsv1.DeploymentStrategy{
			Type:          appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		}
		objs = append(objs, d)
		pods += int(replicas)
		if pdb != nil {
			pdb.Selector = d.Spec.Selector
			objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: *pdb})
		}
	}
	maxUnavailable := func(v intstr.IntOrString) *policyv1.PodDisruptionBudgetSpec {
		return &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &v}
	}
	for i := range 5 * scale {
		deployment(fmt.Sprintf("surge-%d", i), 8, intstr.FromInt32(1), maxUnavailable(intstr.FromInt32(1)))
	}
	for i := range 8 * scale {
		var pdb *policyv1.PodDisruptionBudgetSpec
		if i%2 == 0 {
			pdb = &policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}
		}
		deployment(fmt.Sprintf("single-%d", i), 1, intstr.FromString("25%"), pdb)
	}
	deployment("big", int32(50*scale), intstr.FromString("25%"), maxUnavailable(intstr.FromString("10%")))
	for i := range 3 * scale {
		// Evicted one at a time (maxUnavailable 1), each waiting for the disruption controller
		// to see the replacement Ready: the slowest workload to drain.
		deployment(fmt.Sprintf("nosurge-%d", i), int32(2+2*scale), intstr.FromInt32(0), maxUnavailable(intstr.FromInt32(1)))
	}
	for i := range 2 * scale {
		name := fmt.Sprintf("db-%d", i)
		labels := map[string]string{"app": name}
		objs = append(objs, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(5)), ServiceName: name,
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector:            &metav1.LabelSelector{MatchLabels: labels},
				Template:            podTemplate(labels),
			},
		}, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		})
		pods += 5
	}
	for i := range 12 * scale {
		tmpl := podTemplate(map[string]string{"app": "bare"})
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("bare-%d", i), Labels: tmpl.Labels, Annotations: tmpl.Annotations,
		}, Spec: tmpl.Spec})
		pods++
	}
	dsLabels := map[string]string{"app": "agent"}
	objs = append(objs, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dsLabels}, Template: podTemplate(dsLabels)},
	})
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	pods += len(nodes.Items)
	jobTmpl := podTemplate(map[string]string{"app": "batch"})
	jobTmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	// The Job runs longer than the test: its evicted pods are replaced.
	jobTmpl.Annotations = map[string]string{localcluster.PodCompleteDelayAnnotation: "1h"}
	for k, v := range podDelays {
		jobTmpl.Annotations[k] = v
	}
	parallelism := int32(12 * scale)
	objs = append(objs, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"},
		Spec: batchv1.JobSpec{
			Parallelism: &parallelism, Completions: &parallelism, BackoffLimit: ptr.To(int32(1000)),
			// Evicted pods are replaced, not failures.
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: jobTmpl,
		},
	})
	pods += int(parallelism)
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	return pods
}

func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	annotations := map[string]string{}
	for k, v := range podDelays {
		annotations[k] = v
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// waitAllReady waits until the namespace has want Ready pods.
func waitAllReady(t *testing.T, ns string, want int) {
	t.Helper()
	testutil.Eventually(t, 5*time.Minute, fmt.Sprintf("%d pods Ready", want), func(ctx context.Context) (bool, string, error) {
		var list corev1.PodList
		if err := framework.Client().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		ready := 0
		for i := range list.Items {
			if podutils.IsPodReady(&list.Items[i]) && list.Items[i].DeletionTimestamp == nil {
				ready++
			}
		}
		return ready == want, "", nil
	})
}
