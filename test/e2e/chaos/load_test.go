package chaos_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
)

// The load test: loadMaintenances NodeMaintenances of loadNodes/loadMaintenances nodes each,
// created at once, over loadNodes nodes running loadPodsPerNode pods each.
const (
	loadNodes        = 500
	loadMaintenances = 50
	loadPodsPerNode  = 2

	// The controller's client rate limit in the load test (its defaults).
	loadQPS, loadBurst = 50, 100
)

// TestLoad creates 50 NodeMaintenances at once over 500 nodes and checks that the controller
// keeps up: every maintenance reaches Drain with every pod of its nodes requested, every node is
// cordoned, its work queues drain to empty, its requests stay within its client rate limit and
// its writes per pod are bounded; then the 50 are deleted at once and everything is restored.
// It reports queue depth and reconcile latency from the controller's metrics, and the API
// server's requests by verb.
func TestLoad(t *testing.T) {
	if !loadTest {
		t.Skip("NODEMAINT_E2E_LOAD is not set (make test-load)")
	}
	ctx := t.Context()
	c := framework.Client()
	ns := framework.Namespace(t)
	pods := loadNodes * loadPodsPerNode
	const deployments = 4
	for i := range deployments {
		d := framework.NewDeployment(ns, fmt.Sprintf("load-%d", i), int32(pods/deployments))
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// Running is enough: requests go to every pod of a node, Ready or not. Lists of a thousand
	// pods on a loaded machine are slow: every 2s.
	var running int
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		running = 0
		for i := range list.Items {
			if list.Items[i].Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == pods, nil
	})
	if err != nil {
		t.Fatalf("%d of %d pods Running: %v", running, pods, err)
	}
	t.Logf("%d pods Running on %d nodes", pods, loadNodes)

	checker, err := invariants.Start(ctx, framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{Namespaces: []string{ns}}))
	if err != nil {
		t.Fatal(err)
	}
	defer checker.Stop()

	ctrl := framework.NewController(t)
	// The NodeMaintenance side only: with every node cordoned no replacement could be scheduled,
	// so the responder would only give up.
	// The production leader election durations: the tests' short ones (a 3s renew deadline) lose
	// the lease when the loaded API server answers slowly, and this replica has no standby.
	ctrl.Start("--feature-gates=NodeMaintenanceDeployment=false",
		fmt.Sprintf("--kube-api-qps=%d", loadQPS), fmt.Sprintf("--kube-api-burst=%d", loadBurst),
		"--leader-election-lease-duration=15s", "--leader-election-renew-deadline=10s", "--leader-election-retry-period=2s")
	ctrl.WaitSettled(t, time.Minute)

	sampler := startDepthSampler(t, ctrl)
	clientBefore := requestsByLabel(t, ctrl.MetricsURL(), "rest_client_requests_total", "method")
	serverBefore := apiServerRequests(t)
	start := time.Now()

	perNM := loadNodes / loadMaintenances
	var nms []*nodemaintv1alpha1.NodeMaintenance
	for i := range loadMaintenances {
		nm := maintenance(fmt.Sprintf("load-%02d", i), nodeRange(i*perNM, (i+1)*perNM), true)
		// Requests only: with every node cordoned, an evicted pod's replacement could not run.
		nm.Spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
		nms = append(nms, nm)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(nms))
	for _, nm := range nms {
		wg.Go(func() {
			if err := c.Create(ctx, nm); err != nil {
				errs <- fmt.Errorf("creating %s: %w", nm.Name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	testutil.Eventually(t, 10*time.Minute, "every maintenance in Drain, every pod requested, every node cordoned", func(ctx context.Context) (bool, string, error) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := c.List(ctx, &list); err != nil {
			return false, "", err
		}
		inDrain, pending := 0, 0
		for _, nm := range list.Items {
			if nm.Status.Phase == nodemaintv1alpha1.PhaseDrain && nm.Status.ObservedGeneration == nm.Generation && int(nm.Status.SelectedNodes) == perNM {
				inDrain++
				pending += int(nm.Status.PodsPendingEvacuation)
			}
		}
		var podList corev1.PodList
		if err := c.List(ctx, &podList, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		requested := 0
		for i := range podList.Items {
			if evacuation.RequestedBy(&podList.Items[i], evacuation.ReasonNodeMaintenance) {
				requested++
			}
		}
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return false, "", err
		}
		cordoned := 0
		for _, n := range nodes.Items {
			if n.Spec.Unschedulable && n.Annotations[nodemaintv1alpha1.CordonedAnnotation] != "" {
				cordoned++
			}
		}
		state := fmt.Sprintf("%d/%d in Drain, %d/%d pods requested, %d reported pending, %d/%d nodes cordoned",
			inDrain, loadMaintenances, requested, pods, pending, cordoned, loadNodes)
		return inDrain == loadMaintenances && requested == pods && pending == pods && cordoned == loadNodes, state, nil
	})
	converged := time.Since(start)
	testutil.Eventually(t, 2*time.Minute, "work queues empty", func(ctx context.Context) (bool, string, error) {
		depth, err := scrape(ctrl.MetricsURL(), "workqueue_depth")
		return depth == 0, fmt.Sprintf("depth %v", depth), err
	})
	elapsed := time.Since(start)
	clientAfter := requestsByLabel(t, ctrl.MetricsURL(), "rest_client_requests_total", "method")
	serverAfter := apiServerRequests(t)

	requests, writes := 0, 0
	byMethod := map[string]int{}
	for m, n := range clientAfter {
		byMethod[m] = n - clientBefore[m]
		requests += byMethod[m]
		if m != "GET" {
			writes += byMethod[m]
		}
	}
	serverByVerb := map[string]int{}
	for v, n := range serverAfter {
		if d := n - serverBefore[v]; d > 0 {
			serverByVerb[v] = d
		}
	}
	maxDepth := sampler.stop()
	latency := reconcileLatency(t, ctrl.MetricsURL())
	t.Logf("load figures: %d NodeMaintenances over %d nodes and %d pods: all in Drain after %v; "+
		"controller: %d requests (%v), %d writes, %.2f writes per pod, %.1f requests/s (limit %d/s, burst %d); "+
		"max work queue depth %v; reconcile latency %s; API server requests by verb %v",
		loadMaintenances, loadNodes, pods, converged.Round(100*time.Millisecond),
		requests, byMethod, writes, float64(writes)/float64(pods), float64(requests)/elapsed.Seconds(), loadQPS, loadBurst,
		maxDepth, latency, serverByVerb)

	// A token bucket lets through at most burst + qps·t requests in t (plus the requests of the
	// reconciles in flight when the window starts and ends). There are two: the maintenance
	// controllers' and the Deployment responder's.
	if limit := 2*(loadBurst+int(math.Ceil(loadQPS*elapsed.Seconds()))) + 3*8*3; requests > limit {
		t.Errorf("%d requests in %v: more than the rate limit allows (%d)", requests, elapsed.Round(time.Second), limit)
	}
	// One status patch per pod, a few writes per node (cordon, condition, annotations) and per
	// maintenance (finalizer, batched status, Events).
	if limit := pods + 4*loadNodes + 20*loadMaintenances; writes > limit {
		t.Errorf("%d writes for %d pods on %d nodes under %d maintenances; want at most %d", writes, pods, loadNodes, loadMaintenances, limit)
	}
	if byMethod["PATCH"] < pods {
		t.Errorf("%d PATCH requests for %d pods: the counter does not count what it should", byMethod["PATCH"], pods)
	}

	// All 50 deleted at once: everything is restored.
	deleted := time.Now()
	for _, nm := range nms {
		wg.Go(func() {
			if err := c.Delete(ctx, nm); err != nil {
				t.Errorf("deleting %s: %v", nm.Name, err)
			}
		})
	}
	wg.Wait()
	testutil.Eventually(t, 10*time.Minute, "every NodeMaintenance gone, nothing of nodemaint's left", func(ctx context.Context) (bool, string, error) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		if err := c.List(ctx, &list); err != nil {
			return false, "", err
		}
		if len(list.Items) > 0 {
			return false, fmt.Sprintf("%d NodeMaintenances left", len(list.Items)), nil
		}
		if err := checker.CheckClean(ctx, ns); err != nil {
			s := err.Error()
			return false, fmt.Sprintf("%d leftovers, first: %s", strings.Count(s, "\n")+1, strings.SplitN(s, "\n", 2)[0]), nil
		}
		return true, "", nil
	})
	t.Logf("restored %d nodes and %d pods %v after deleting the %d maintenances", loadNodes, pods, time.Since(deleted).Round(100*time.Millisecond), loadMaintenances)
	if v := checker.Violations(); len(v) > 0 {
		t.Errorf("invariant violations: %v", v)
	}
}

// depthSampler records the largest work queue depth of the controller, sampled every 500ms.
type depthSampler struct {
	done chan struct{}
	max  float64
	wg   sync.WaitGroup
}

func startDepthSampler(t *testing.T, ctrl *framework.Controller) *depthSampler {
	s := &depthSampler{done: make(chan struct{})}
	s.wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
				if d, err := scrape(ctrl.MetricsURL(), "workqueue_depth"); err == nil {
					s.max = max(s.max, d)
				}
			}
		}
	})
	return s
}

func (s *depthSampler) stop() float64 {
	close(s.done)
	s.wg.Wait()
	return s.max
}

// requestsByLabel sums a counter of a Prometheus endpoint by the value of one label.
func requestsByLabel(t *testing.T, url, metric, label string) map[string]int {
	t.Helper()
	resp, err := framework.GetMetrics(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := readAll(resp)
	if err != nil {
		t.Fatal(err)
	}
	return sumByLabel(t, body, metric, label)
}

// apiServerRequests reads the API server's apiserver_request_total by verb, as cluster admin.
func apiServerRequests(t *testing.T) map[string]int {
	t.Helper()
	body, err := framework.Cluster().Client().Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return sumByLabel(t, string(body), "apiserver_request_total", "verb")
}

func sumByLabel(t *testing.T, body, metric, label string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		i := strings.Index(line, label+`="`)
		if i < 0 {
			continue
		}
		value := line[i+len(label)+2:]
		value = value[:strings.IndexByte(value, '"')]
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[value] += int(n)
	}
	return out
}

// reconcileLatency renders p50 and p99 of controller_runtime_reconcile_time_seconds per
// controller, interpolated in the histogram's buckets as Prometheus' histogram_quantile does.
func reconcileLatency(t *testing.T, url string) string {
	t.Helper()
	resp, err := framework.GetMetrics(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := readAll(resp)
	if err != nil {
		t.Fatal(err)
	}
	type bucket struct{ le, count float64 }
	buckets := map[string][]bucket{}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "controller_runtime_reconcile_time_seconds_bucket{") {
			continue
		}
		ctrlName := labelValue(line, "controller")
		le, err := strconv.ParseFloat(labelValue(line, "le"), 64)
		if err != nil {
			le = math.Inf(1)
		}
		n, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		buckets[ctrlName] = append(buckets[ctrlName], bucket{le, n})
	}
	// bs is sorted by le.
	quantile := func(bs []bucket, q float64) float64 {
		total := bs[len(bs)-1].count
		if total == 0 {
			return 0
		}
		rank := q * total
		prevLE, prevCount := 0.0, 0.0
		for _, b := range bs {
			if b.count >= rank {
				if math.IsInf(b.le, 1) {
					return prevLE
				}
				return prevLE + (b.le-prevLE)*(rank-prevCount)/(b.count-prevCount)
			}
			prevLE, prevCount = b.le, b.count
		}
		return prevLE
	}
	var names []string
	for n := range buckets {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		bs := buckets[n]
		sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
		parts = append(parts, fmt.Sprintf("%s: %.0f reconciles, p50 %.1fms, p99 %.1fms", n, bs[len(bs)-1].count,
			1000*quantile(bs, 0.5), 1000*quantile(bs, 0.99)))
	}
	return strings.Join(parts, "; ")
}

func labelValue(line, label string) string {
	i := strings.Index(line, label+`="`)
	if i < 0 {
		return ""
	}
	v := line[i+len(label)+2:]
	return v[:strings.IndexByte(v, '"')]
}

func readAll(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
