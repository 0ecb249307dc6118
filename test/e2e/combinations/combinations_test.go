package combinations_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/alerts"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
)

// alertPoll is how often the controllers read the stand-in Prometheus's alerts.
const alertPoll = time.Second

// takeoverTimeout bounds the wait for a replica to lead after the leader was killed: the lease
// (4s) expires, the standby acquires it.
const takeoverTimeout = 20 * time.Second

// totals are a run's figures, over its batches.
type totals struct {
	scenarios, maintenances, edits, kills, exited, judged, budgets, violations int
	// machines are the Machines deleted and released those seen released, by topology; releases
	// the releases of their hook judged.
	machines, released map[topology]int
	releases           int
}

func TestCombinations(t *testing.T) {
	s := size()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("NODEMAINT_COMBINATIONS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("NODEMAINT_COMBINATIONS_SEED: %v", err)
		}
	}
	if v := os.Getenv("NODEMAINT_COMBINATIONS_BATCHES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("NODEMAINT_COMBINATIONS_BATCHES=%q: a number of at least 1", v)
		}
		s.batches = n
	}
	t.Logf("combinations seed %d: batches %d to %d (replay one with NODEMAINT_COMBINATIONS_SEED=<its seed> NODEMAINT_COMBINATIONS_BATCHES=1)", seed, seed, seed+uint64(s.batches)-1)
	// The management cluster, started in the background when a batch has its Machines in it.
	var mgmt *managementCluster
	for i := range s.batches {
		if topologyOf(seed+uint64(i)) == management {
			mgmt = startManagement(t)
			break
		}
	}
	// Under the EvictionRequest protocol the Deployment responder answers for the pods it is
	// registered on, as an admin installs it.
	framework.InstallEvictionResponderPolicy(t)
	installClusterAPI(t)
	for _, rule := range drainRules() {
		if err := framework.Client().Create(t.Context(), rule); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating DrainRule %s: %v", rule.GetName(), err)
		}
	}
	sum := totals{machines: map[topology]int{}, released: map[topology]int{}}
	start := time.Now()
	for i := range s.batches {
		b := drawBatch(seed+uint64(i), s)
		if !t.Run(fmt.Sprintf("batch-%d", b.seed), func(t *testing.T) { runBatch(t, b, s, mgmt, &sum) }) {
			// What a failed batch left (maintenances, cordons) would fail the next ones.
			t.Fatalf("batch %d failed: the batches after it are not run", b.seed)
		}
	}
	t.Logf("combinations figures: %d scenarios in %d batches (%d maintenances, %d edits, Cluster API Machines deleted: %d self-hosted (%d released), %d in the management cluster (%d released); %d leader kills, %d replicas that exited by themselves), "+
		"%d acts of nodemaint's judged (%d releases of the pre-drain hook), %d budgets checked, %d invariant violations, %v in all",
		sum.scenarios, s.batches, sum.maintenances, sum.edits, sum.machines[selfHosted], sum.released[selfHosted], sum.machines[management], sum.released[management],
		sum.kills, sum.exited, sum.judged, sum.releases, sum.budgets, sum.violations, time.Since(start).Round(time.Second))
	if sum.judged == 0 {
		t.Errorf("the checker judged no act of nodemaint's: the run exercised nothing")
	}
}

// runBatch runs a batch: its lanes' workloads, a checker watching them, two controller replicas
// of the batch's protocol, the maintenances and edits on time while the leader is killed; then
// every maintenance is deleted, and nothing of nodemaint's may be left.
func runBatch(t *testing.T, b batch, s runSize, mgmt *managementCluster, sum *totals) {
	ctx := t.Context()
	c := framework.Client()
	t.Logf("batch %d: protocol %s, Cluster API %s", b.seed, b.protocol, b.topology)
	for _, sc := range b.lanes {
		t.Logf("scenario %s", sc)
	}
	// The Prometheus the controllers read their alerts from, and the checker judges the turns of
	// rollouts with haltOnAlerts against.
	prom := invariants.StartPrometheus()
	t.Cleanup(prom.Close)

	// The lanes' workloads, each in a namespace of its own, all Ready before anything starts.
	namespaces := make([]string, len(b.lanes))
	want := 0
	for i, sc := range b.lanes {
		namespaces[i] = framework.Namespace(t)
		for _, k := range sc.workloads {
			for _, obj := range k.objects(namespaces[i], sc.nodes) {
				if err := c.Create(ctx, obj); err != nil {
					t.Fatalf("creating %T %s/%s: %v", obj, namespaces[i], obj.GetName(), err)
				}
			}
			want += k.pods(sc.nodes)
		}
	}
	testutil.Eventually(t, 3*time.Minute, fmt.Sprintf("%d pods Ready", want), func(ctx context.Context) (bool, string, error) {
		ready, err := readyPods(ctx, namespaces)
		return ready >= want, "", err
	})

	// Cluster API: the batch's Machines, in a namespace of their own, in this cluster (the
	// controllers run with --cluster-api-self) or in the management cluster (whose controller
	// runs with --cluster-api); the checker watches them there (with its audit log).
	capiOpts := &invariants.ClusterAPI{}
	capiArgs := []string{}
	if b.topology == management {
		mgmt.ready(t)
		capiOpts = &invariants.ClusterAPI{Config: mgmt.Config, AuditLog: mgmt.AuditLog}
	}
	capi := newMachines(t, b.topology, mgmt)
	if b.topology == selfHosted {
		capiArgs = []string{"--cluster-api", "--cluster-api-self=" + capi.self()}
	}
	checker, err := invariants.Start(ctx, framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{
		Namespaces:  namespaces,
		OnViolation: func(v invariants.Violation) { t.Logf("VIOLATION %s", v) },
		Witness:     true,
		Prometheus:  prom, AlertMaxAge: alerts.MaxAge(alertPoll),
		ClusterAPI: capiOpts,
	}))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = checker.Stop()
		}
	})

	f := &fleet{t: t, ctrls: []*framework.Controller{framework.NewController(t), framework.NewController(t)},
		// A lease a little longer than the framework's: a replica that misses its renewal on a
		// loaded machine is started again (keepAlive), but each such loss is a minute of work redone.
		args: append([]string{"--evacuation-protocol=" + b.protocol,
			"--leader-election-lease-duration=8s", "--leader-election-renew-deadline=6s", "--leader-election-retry-period=1s",
			"--prometheus-url=" + prom.URL(), "--prometheus-poll-interval=" + alertPoll.String()}, capiArgs...),
		// Cluster API lets a Machine go once its hook is released.
		tick: func() {
			capi.letReleasedGo(t.Context())
			mgmt.keepAlive(t)
		}}
	for _, ctrl := range f.ctrls {
		ctrl.Start(f.args...)
	}

	// The timeline: creations, edits and kills, in order.
	type step struct {
		at time.Duration
		do func()
		// what says the step in the log.
		what string
	}
	var steps []step
	created := map[string]bool{}
	for _, sc := range b.lanes {
		for _, nm := range sc.nms {
			steps = append(steps, step{at: nm.createAt, what: "create " + nm.name, do: func() {
				if err := c.Create(ctx, nm.object()); err != nil {
					t.Fatalf("creating NodeMaintenance %s: %v", nm.name, err)
				}
				created[nm.name] = true
			}})
		}
		for _, e := range sc.edits {
			name := sc.nms[e.nm].name
			steps = append(steps, step{at: e.at, what: fmt.Sprintf("%s %s", name, e.what), do: func() {
				if !created[name] {
					return // deleted before
				}
				if e.what == remove {
					deleteMaintenance(t, name)
					delete(created, name)
					return
				}
				editMaintenance(t, name, e.what)
			}})
		}
	}
	for _, at := range b.kills {
		steps = append(steps, step{at: at, what: "kill the leader", do: f.killLeader})
	}
	for _, sc := range b.lanes {
		if m := sc.machine; m != nil {
			steps = append(steps, step{at: m.deleteAt, what: "delete " + m.String(), do: func() { capi.delete(m) }})
		}
	}
	for _, a := range b.alerts {
		steps = append(steps, step{at: a.at, what: string(a.what), do: func() {
			switch a.what {
			case alertFires:
				prom.Fire(gateAlert, nil)
			case alertClears:
				prom.Clear(gateAlert)
			case prometheusWarns:
				prom.Answer(invariants.AnswerWarnings)
			case prometheusSilent:
				prom.Answer(invariants.AnswerNothing)
			case prometheusAnswers:
				prom.Answer(invariants.AnswerAlerts)
			}
		}})
	}
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
	begin := time.Now()
	for _, st := range steps {
		f.sleepUntil(begin.Add(st.at))
		t.Logf("%v: %s", st.at.Round(100*time.Millisecond), st.what)
		st.do()
	}
	f.sleepUntil(begin.Add(s.span))

	// Evidence that the controller looked at every maintenance as it is now, before they go.
	f.eventually(2*time.Minute, "every NodeMaintenance observed at its generation", func(ctx context.Context) (bool, error) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		for _, nm := range list.Items {
			if nm.Status.ObservedGeneration != nm.Generation {
				return false, fmt.Errorf("NodeMaintenance %s observed at generation %d of %d", nm.Name, nm.Status.ObservedGeneration, nm.Generation)
			}
		}
		return true, nil
	})
	for name := range created {
		deleteMaintenance(t, name)
	}
	// The batch is over: Cluster API lets its Machines go, released or not; their
	// NodeMaintenances go with them.
	capi.letAllGo(ctx)
	f.eventually(3*time.Minute, "every NodeMaintenance gone and nothing of nodemaint's left", func(ctx context.Context) (bool, error) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		if len(list.Items) > 0 {
			return false, fmt.Errorf("%d NodeMaintenances left", len(list.Items))
		}
		return true, checker.CheckClean(ctx, namespaces...)
	})

	// Every release of the hook the test saw, judged by the checker.
	released := capi.released[selfHosted] + capi.released[management]
	f.eventually(time.Minute, fmt.Sprintf("the checker judging the %d releases of the pre-drain hook seen", released), func(context.Context) (bool, error) {
		if n := checker.MachineReleases(); n < released {
			return false, fmt.Errorf("%d judged", n)
		}
		return true, nil
	})
	stopped = true
	if err := checker.Stop(); err != nil {
		t.Errorf("stopping the invariant checker: %v", err)
	}
	_, _, _, judged := checker.AuditStats()
	budgets, _ := checker.Watched()
	violations := checker.Violations()
	sum.scenarios += len(b.lanes)
	sum.kills += len(b.kills)
	sum.judged += judged
	sum.budgets += budgets
	sum.violations += len(violations)
	sum.releases += checker.MachineReleases()
	for tp, n := range capi.released {
		sum.released[tp] += n
	}
	for _, sc := range b.lanes {
		sum.maintenances += len(sc.nms)
		sum.edits += len(sc.edits)
		if sc.machine != nil {
			sum.machines[sc.machine.topology]++
		}
	}
	sum.exited += f.exited
	t.Logf("batch %d (%s, Cluster API %s): %d scenarios, %d acts of nodemaint's judged (%d releases of the pre-drain hook), %d budgets checked, %d turns of rollouts with haltOnAlerts judged (%d answers of Prometheus), %d replicas that exited by themselves, %d violations",
		b.seed, b.protocol, b.topology, len(b.lanes), judged, checker.MachineReleases(), budgets, checker.AlertTurns(), prom.Served(), f.exited, len(violations))
	for _, v := range violations {
		t.Errorf("invariant violated (replay: NODEMAINT_COMBINATIONS_SEED=%d NODEMAINT_COMBINATIONS_BATCHES=1): %s\n  in %s",
			b.seed, v, scenarioOf(b, namespaces, v))
	}
}

// scenarioOf returns the scenario a violation happened in, by its pod's namespace (or its
// maintenance, for a violation of no pod).
func scenarioOf(b batch, namespaces []string, v invariants.Violation) string {
	for i, ns := range namespaces {
		lane := fmt.Sprintf("lane-%d-", b.lanes[i].lane)
		if strings.HasPrefix(v.Pod, ns+"/") || v.Pod == "" && (strings.HasPrefix(v.Object, lane) || strings.Contains(v.Object, "/"+lane)) {
			return b.lanes[i].String()
		}
	}
	return "an unknown lane"
}

// editMaintenance applies an edit to the maintenance's spec, as an admin would: read, change,
// write, again on a conflict.
func editMaintenance(t *testing.T, name string, what editKind) {
	t.Helper()
	c := framework.Client()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var nm nodemaintv1alpha1.NodeMaintenance
		if err := c.Get(t.Context(), client.ObjectKey{Name: name}, &nm); err != nil {
			return err
		}
		spec := nm.Spec.DeepCopy()
		what.apply(spec)
		if reflect.DeepEqual(*spec, nm.Spec) {
			return nil
		}
		nm.Spec = *spec
		return c.Update(t.Context(), &nm)
	})
	if err != nil {
		t.Fatalf("editing NodeMaintenance %s (%s): %v", name, what, err)
	}
}

func deleteMaintenance(t *testing.T, name string) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	nm.Name = name
	if err := framework.Client().Delete(t.Context(), nm); client.IgnoreNotFound(err) != nil {
		t.Fatalf("deleting NodeMaintenance %s: %v", name, err)
	}
}

// fleet is a batch's two controller replicas, run with args.
type fleet struct {
	t     *testing.T
	ctrls []*framework.Controller
	args  []string
	// tick, when set, runs about every second while the batch waits.
	tick func()
	// exited counts the replicas that exited by themselves and were started again.
	exited int
}

// killLeader SIGKILLs the replica that leads (a random one when none is seen to), waits until one
// leads again, and starts the killed one again as the standby.
func (f *fleet) killLeader() {
	f.t.Helper()
	i := f.leader()
	if i < 0 {
		i = 0
	}
	f.ctrls[i].Kill()
	killed := time.Now()
	j := f.leader()
	f.t.Logf("replica %d killed; replica %d leads %v later", i, j, time.Since(killed).Round(100*time.Millisecond))
	f.ctrls[i].Start(f.args...)
}

// leader returns the replica that leads, waiting for one at most takeoverTimeout; -1 when none
// does.
func (f *fleet) leader() int {
	leader := -1
	_ = wait.PollUntilContextTimeout(f.t.Context(), 200*time.Millisecond, takeoverTimeout, true, func(ctx context.Context) (bool, error) {
		for j, ctrl := range f.ctrls {
			if ctrl.Running() && ctrl.Leads(ctx) {
				leader = j
				return true, nil
			}
		}
		f.keepAlive()
		return false, nil
	})
	return leader
}

// keepAlive starts again a replica that exited by itself: one that cannot renew its lease in
// time on a loaded machine exits, as it should, and its Deployment would restart it.
func (f *fleet) keepAlive() {
	f.t.Helper()
	for i, ctrl := range f.ctrls {
		if !ctrl.Running() || ctrl.Healthy() {
			continue
		}
		f.t.Logf("replica %d exited by itself; starting it again", i)
		f.exited++
		ctrl.Kill()
		ctrl.Start(f.args...)
	}
}

// sleepUntil waits until t, keeping the replicas running.
func (f *fleet) sleepUntil(t time.Time) {
	for time.Now().Before(t) && f.t.Context().Err() == nil {
		select {
		case <-f.t.Context().Done():
		case <-time.After(min(time.Until(t), time.Second)):
		}
		f.keepAlive()
		if f.tick != nil {
			f.tick()
		}
	}
}

// eventually polls cond every second, keeping the replicas running, until it is done; it fails
// the test after timeout with cond's last error.
func (f *fleet) eventually(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(f.t.Context(), 30*time.Second)
		done, err := cond(ctx)
		cancel()
		if done && err == nil {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: not after %v (last: %v)", what, timeout, err)
		}
		f.sleepUntil(time.Now().Add(time.Second))
	}
}

// readyPods counts the Ready pods of the namespaces that are not terminating.
func readyPods(ctx context.Context, namespaces []string) (int, error) {
	ready := 0
	for _, ns := range namespaces {
		var list corev1.PodList
		if err := framework.Client().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		for i := range list.Items {
			if podutils.IsPodReady(&list.Items[i]) && list.Items[i].DeletionTimestamp == nil {
				ready++
			}
		}
	}
	return ready, nil
}
