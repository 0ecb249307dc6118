// Package scale_test runs a NodeMaintenance on a cluster of many kwok nodes and pods, and checks
// that the controller marks every pod of the selected nodes with a bounded number of writes.
//
// `make test` runs it on 50 nodes and 1,000 pods; `make test-scale` (NODEMAINT_E2E_SCALE=full) on
// 200 nodes and 5,000 pods, selecting 20 nodes.
package scale_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// The size of the cluster and of the maintenance.
var nodes, deployments, replicas, selected = 50, 4, int32(250), 5

func TestMain(m *testing.M) {
	if os.Getenv("NODEMAINT_E2E_SCALE") == "full" {
		nodes, deployments, replicas, selected = 200, 10, 500, 20
	}
	os.Exit(framework.Run(m, framework.Options{Nodes: nodes}))
}

// requestCounts scrapes the controller's client-go request counter, by HTTP method.
func requestCounts(t *testing.T, c *framework.Controller) map[string]int {
	t.Helper()
	resp, err := framework.GetMetrics(c.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		i := strings.Index(line, `method="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			continue
		}
		method := line[i+len(`method="`):]
		method = method[:strings.IndexByte(method, '"')]
		n, err := strconv.ParseFloat(line[j+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		counts[method] += int(n)
	}
	return counts
}

// apiServerWrites scrapes the API server's apiserver_request_total: writes by verb and resource,
// every client, Leases left out. It tells where the controller's writes went when there are too
// many (the controller's own counter has no resource).
func apiServerWrites(t *testing.T) map[string]int {
	t.Helper()
	data, err := framework.Cluster().Client().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	label := func(line, name string) string {
		i := strings.Index(line, name+`="`)
		if i < 0 {
			return ""
		}
		v := line[i+len(name)+2:]
		return v[:strings.IndexByte(v, '"')]
	}
	writes := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		verb, resource := label(line, "verb"), label(line, "resource")
		if resource == "leases" || (verb != "POST" && verb != "PUT" && verb != "PATCH" && verb != "DELETE") {
			continue
		}
		if sub := label(line, "subresource"); sub != "" {
			resource += "/" + sub
		}
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		writes[verb+" "+resource] += int(n)
	}
	return writes
}

func TestMarkPodsOfSelectedNodes(t *testing.T) {
	ctx := t.Context()
	ns := framework.Namespace(t)
	start := time.Now()
	for i := range deployments {
		d := framework.NewDeployment(ns, fmt.Sprintf("app-%d", i), replicas)
		if err := framework.Client().Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Minute, fmt.Sprintf("%d pods running", deployments*int(replicas)), func(ctx context.Context) (bool, string, error) {
		var list appsv1.DeploymentList
		if err := framework.Client().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		ready := int32(0)
		for _, d := range list.Items {
			ready += d.Status.ReadyReplicas
		}
		return ready == int32(deployments)*replicas, fmt.Sprintf("%d ready", ready), nil
	})
	t.Logf("%d pods on %d nodes ready after %v", deployments*int(replicas), nodes, time.Since(start).Round(time.Second))

	ctrl := framework.NewController(t)
	// Only the NodeMaintenance controller's writes are measured here: the Deployment responder
	// (which would start moving the pods) is off.
	// Leader election is off: its Lease renewals, a write every retry period, would make the count
	// depend on how long the marking takes rather than on what it does.
	ctrl.Start("--feature-gates=NodeMaintenanceDeployment=false", "--leader-elect=false")
	// The controller settles on the idle cluster; counted from here.
	ctrl.WaitSettled(t, time.Minute)
	before, apiBefore := requestCounts(t, ctrl), apiServerWrites(t)

	names := make([]string, selected)
	inSelection := map[string]bool{}
	for i := range names {
		names[i] = fmt.Sprintf("kwok-node-%d", i)
		inSelection[names[i]] = true
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "scale"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: names}},
			}}},
			Cordon: true, Drain: true, Reason: "scale test",
		},
	}
	created := time.Now()
	if err := framework.Client().Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	var targeted int
	testutil.Eventually(t, 5*time.Minute, "every pod of the selected nodes requested", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := framework.Client().List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		targeted = 0
		marked := 0
		for i := range pods.Items {
			if !inSelection[pods.Items[i].Spec.NodeName] {
				continue
			}
			targeted++
			if evacuation.RequestedBy(&pods.Items[i], evacuation.ReasonNodeMaintenance) {
				marked++
			}
		}
		return targeted > 0 && marked == targeted, fmt.Sprintf("%d of %d", marked, targeted), nil
	})
	marking := time.Since(created)
	testutil.Eventually(t, time.Minute, "status reports every pod", func(ctx context.Context) (bool, string, error) {
		v, err := testutil.ViewStatus(ctx, framework.Client(), "scale", names[0])
		return v.Phase == nodemaintv1alpha1.PhaseDrain && int(v.Selected) == selected && int(v.Pending) == targeted, fmt.Sprintf("%+v", v), err
	})
	after, apiAfter := requestCounts(t, ctrl), apiServerWrites(t)
	byResource := map[string]int{}
	for k, v := range apiAfter {
		if d := v - apiBefore[k]; d > 0 {
			byResource[k] = d
		}
	}
	writes := map[string]int{}
	total := 0
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		writes[m] = after[m] - before[m]
		total += writes[m]
	}
	t.Logf("marked %d pods on %d of %d nodes in %v with %d API writes (%v): %.2f writes per pod",
		targeted, selected, nodes, marking.Round(100*time.Millisecond), total, writes, float64(total)/float64(targeted))

	// One status patch per pod, plus a few writes per node (cordon, condition) and for the
	// NodeMaintenance (finalizer, batched status, Events), plus up to half the pods patched twice:
	// a reconcile that runs before the informer has seen the requests it wrote writes them again
	// (measured on 2026-11-24: 108 to 164 writes for about 100 pods, the code before the safety
	// work included, which failed the earlier bound of targeted + 4*selected + 40 one run in four).
	// Those repeats are waste that the scale work (issue 18) is to remove; anything beyond is new.
	if limit := targeted + targeted/2 + 4*selected + 40; total > limit {
		t.Errorf("%d API writes to mark %d pods on %d nodes; want at most %d (all clients' writes meanwhile: %v)", total, targeted, selected, limit, byResource)
	}
	if writes["PATCH"] < targeted {
		t.Errorf("%d PATCH requests for %d pods: the counter does not count what it should", writes["PATCH"], targeted)
	}

	// Withdraw everything, at scale too.
	if err := framework.Client().Delete(ctx, nm); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	testutil.Eventually(t, 5*time.Minute, "every request withdrawn and nodes restored", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := framework.Client().List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		left := 0
		for i := range pods.Items {
			if evacuation.Requested(&pods.Items[i]) {
				left++
			}
		}
		cordoned := 0
		for _, n := range names {
			v, err := testutil.ViewNode(ctx, framework.Client(), n)
			if err != nil {
				return false, "", err
			}
			if v != (testutil.NodeView{}) {
				cordoned++
			}
		}
		return left == 0 && cordoned == 0, fmt.Sprintf("%d requests, %d nodes not restored", left, cordoned), nil
	})
	t.Logf("withdrew every request and restored %d nodes in %v", selected, time.Since(deleted).Round(100*time.Millisecond))
}
