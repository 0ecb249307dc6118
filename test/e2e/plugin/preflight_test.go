package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drainpreflight"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// TestPreflightPredictsDrain: on a node with a StatefulSet's pod under a budget that allows no
// disruption, a Deployment pinned to the node by its node selector, a bare pod and a pod
// labelled to be skipped, preflight (run as a user bound to config/samples/preflight-reader.yaml,
// who may only list) exits 2 and names each; then a real drain of the node does what it said:
// the budget's pod stays, reported blocked by its budget; the bare pod is gone for good; the
// pinned pod's replacement stays Pending; the skipped pod keeps running. Planned first, the
// maintenance's status.preflight says the same.
func TestPreflightPredictsDrain(t *testing.T) {
	ctx := t.Context()
	c := framework.Client()
	ns := framework.Namespace(t)
	node := "kwok-node-3"

	// The StatefulSet's pod goes to the node: the others are cordoned while it is scheduled.
	others := []string{"kwok-node-0", "kwok-node-1", "kwok-node-2"}
	if out, err := framework.Kubectl(t, append([]string{"cordon"}, others...)...); err != nil {
		t.Fatalf("cordon: %v\n%s", err, out)
	}
	uncordon := func() {
		if out, err := framework.Kubectl(t, append([]string{"uncordon"}, others...)...); err != nil {
			t.Errorf("uncordon: %v\n%s", err, out)
		}
	}
	t.Cleanup(uncordon)
	dbLabels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: dbLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: dbLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	create(t, sts)
	waitReady(t, ns, 1)
	uncordon()
	create(t, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: dbLabels}},
	})
	pinned := framework.NewDeployment(ns, "pinned", 1)
	pinned.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	framework.CreateDeployment(t, pinned)
	create(t, pod(ns, "lonely", node, nil), pod(ns, "tagged", node, map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip}))
	waitReady(t, ns, 4)
	testutil.Eventually(t, timeout, "budget db computed", func(ctx context.Context) (bool, string, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, pdb)
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods == 1 && pdb.Status.CurrentHealthy == 1,
			fmt.Sprintf("%+v", pdb.Status), err
	})
	var pinnedPods corev1.PodList
	if err := c.List(ctx, &pinnedPods, client.InNamespace(ns), client.MatchingLabels{"app": "pinned"}); err != nil || len(pinnedPods.Items) != 1 ||
		pinnedPods.Items[0].Spec.NodeName != node {
		t.Fatalf("the pinned pod: %v %+v", err, pinnedPods.Items)
	}
	pinnedPod := ns + "/" + pinnedPods.Items[0].Name
	if got := mustGetPod(t, ns, "db-0").Spec.NodeName; got != node {
		t.Fatalf("db-0 on %s, want %s", got, node)
	}

	// The prediction, by a user who may only list.
	reader := readerKubeconfig(t, ns)
	out, code := plugin(t, "preflight", node, "--kubeconfig", reader)
	if code != 2 {
		t.Errorf("preflight: exit %d, want 2 (blocked)", code)
	}
	for _, want := range []string{node + ": the drain would be BLOCKED", "PodDisruptionBudget " + ns + "/db: maxUnavailable 0: it never allows a disruption",
		"StatefulSet " + ns + "/db", "BarePod", ns + "/lonely", "NoRoom", pinnedPod, "label nodemaint.dev/drain=skip"} {
		if !strings.Contains(out, want) {
			t.Errorf("preflight does not say %q", want)
		}
	}
	out, code = plugin(t, "preflight", node, "--kubeconfig", reader, "-o", "json")
	if code != 2 {
		t.Errorf("preflight -o json: exit %d, want 2", code)
	}
	var report drainpreflight.Report
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &report); err != nil || len(report.Nodes) != 1 {
		t.Fatalf("preflight -o json: %v", err)
	}
	found := func(sev drainpreflight.Severity, reason, object, pod string) {
		t.Helper()
		for _, f := range report.Nodes[0].Findings {
			if f.Severity == sev && f.Reason == reason && strings.HasPrefix(f.Object, object) && slices.Contains(f.Pods, pod) {
				return
			}
		}
		t.Errorf("no finding %s %s %q of %s in %+v", sev, reason, object, pod, report.Nodes[0].Findings)
	}
	found(drainpreflight.Blocks, drainpreflight.ReasonBudgetBlocked, "PodDisruptionBudget "+ns+"/db", ns+"/db-0")
	found(drainpreflight.Blocks, drainpreflight.ReasonCannotSurge, "StatefulSet "+ns+"/db", ns+"/db-0")
	found(drainpreflight.Loses, drainpreflight.ReasonBarePod, "", ns+"/lonely")
	found(drainpreflight.Loses, drainpreflight.ReasonNoRoom, "", pinnedPod)
	found(drainpreflight.Info, drainpreflight.ReasonSkipped, "label nodemaint.dev/drain=skip", ns+"/tagged")

	// Planned, the maintenance's status says the same (the controller, with exactly its
	// ServiceAccount's permissions, computes it from its cache).
	framework.NewController(t).Start("--deployment-surge-timeout=5s")
	t.Cleanup(func() {
		plugin(t, "complete", node, "--delete")
		noMaintenances(t)
	})
	if out, code := plugin(t, "plan", node, "--reason", "preflight e2e"); code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, timeout, "the preflight in the status of the planned maintenance", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := c.Get(ctx, client.ObjectKey{Name: node}, nm); err != nil || nm.Status.Preflight == nil {
			return false, "no preflight", err
		}
		p := nm.Status.Preflight
		has := func(sev drainpreflight.Severity, reason, pod string) bool {
			return slices.ContainsFunc(p.Findings, func(f nodemaintv1alpha1.PreflightFinding) bool {
				return f.Node == node && f.Severity == string(sev) && f.Reason == reason && slices.Contains(f.Pods, pod)
			})
		}
		return p.NodesBlocked == 1 && has(drainpreflight.Blocks, drainpreflight.ReasonBudgetBlocked, ns+"/db-0") && has(drainpreflight.Loses, drainpreflight.ReasonBarePod, ns+"/lonely") &&
			has(drainpreflight.Loses, drainpreflight.ReasonNoRoom, pinnedPod), fmt.Sprintf("%+v", p), nil
	})

	// The drain, for real.
	if out, code := plugin(t, "drain", node, "--wait=false", "--response-timeout", "2s", "--reason", "preflight e2e"); code != 0 {
		t.Fatalf("drain: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 2*timeout, "the bare pod evicted, the pinned pod replaced by a Pending one", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		var state []string
		lonely, oldPinned, pending := false, false, false
		for _, p := range pods.Items {
			state = append(state, fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, p.Status.Phase))
			switch {
			case p.Name == "lonely":
				lonely = true
			case p.Labels["app"] == "pinned" && ns+"/"+p.Name == pinnedPod:
				oldPinned = true
			case p.Labels["app"] == "pinned":
				pending = pending || unschedulablePod(&p)
			}
		}
		return !lonely && !oldPinned && pending, strings.Join(state, ", "), nil
	})
	// The controller has looked at the pods left past their response timeout: it tried to evict
	// db-0 and the budget refused (the status names the budget), and it skipped tagged (the
	// status says so). Only then: the bare pod did not come back, the replacement is still
	// Pending, the budget's pod and the skipped one are still on the node.
	testutil.Eventually(t, timeout, "the status names the budget of db-0 and the skipped tagged", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := c.Get(ctx, client.ObjectKey{Name: node}, nm); err != nil {
			return false, "", err
		}
		budget, skipped := false, false
		for _, b := range nm.Status.Nodes[node].Blocked {
			budget = budget || b.Reason == nodemaintv1alpha1.BlockedReasonPodDisruptionBudget && slices.Contains(b.Pods, ns+"/db-0")
			skipped = skipped || b.Reason == nodemaintv1alpha1.BlockedReasonSkipped && slices.Contains(b.Pods, ns+"/tagged")
		}
		return budget && skipped, fmt.Sprintf("%+v", nm.Status.Nodes[node].Blocked), nil
	})
	if _, err := getPod(t, ns, "lonely"); !apierrors.IsNotFound(err) {
		t.Errorf("bare pod lonely: %v, want it gone for good", err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "pinned"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Errorf("pinned pods %+v, want one replacement", pods.Items)
	} else if !unschedulablePod(&pods.Items[0]) {
		t.Errorf("pinned pod %+v, want it Pending and unschedulable", pods.Items[0])
	}
	for _, name := range []string{"db-0", "tagged"} {
		p := mustGetPod(t, ns, name)
		if p.Spec.NodeName != node {
			t.Errorf("%s on %s, want it still on %s", name, p.Spec.NodeName, node)
		}
		if p.DeletionTimestamp != nil {
			t.Errorf("%s deleting since %v, want it kept", name, p.DeletionTimestamp)
		}
	}
}

// readerKubeconfig writes a kubeconfig of a ServiceAccount of the namespace bound to
// config/samples/preflight-reader.yaml, and nothing else.
func readerKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	ctx := t.Context()
	c := framework.Client()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "samples", "preflight-reader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(b, role); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, role); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "preflight-reader"}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "preflight-reader-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	create(t, sa, binding)
	t.Cleanup(func() { _ = c.Delete(context.Background(), binding) })
	token, err := framework.Cluster().Client().CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "preflight-reader.kubeconfig")
	if err := framework.Cluster().WriteKubeconfig(path, &clientcmdapi.AuthInfo{Token: token.Status.Token}); err != nil {
		t.Fatal(err)
	}
	return path
}

func getPod(t *testing.T, ns, name string) (*corev1.Pod, error) {
	t.Helper()
	p := &corev1.Pod{}
	return p, framework.Client().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, p)
}

func mustGetPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := getPod(t, ns, name)
	if err != nil {
		t.Fatalf("pod %s/%s: %v", ns, name, err)
	}
	return p
}

// unschedulablePod reports whether the scheduler found no node for the pod.
func unschedulablePod(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// TestPreflightDeadlockForecast: on a cluster built to deadlock, a Deployment of one replica with
// maxSurge 0 under a budget of minAvailable 1 (as the disruption controller computes it),
// preflight names, before anything moves, the budget that never allows a disruption
// (BudgetBlocked) and the Deployment nothing surges (CannotSurge) in its deadlock forecast, and
// exits 2. A rollout with spec.rollout.preflight Block of the node does not start (the node stays
// uncordoned, RolloutHalted says PreflightBlocked, status.preflight the findings); once the
// budget is relaxed to minAvailable 0, it starts.
func TestPreflightDeadlockForecast(t *testing.T) {
	ctx := t.Context()
	c := framework.Client()
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "solo", 1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
	}}
	framework.CreateDeployment(t, d)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: d.Spec.Selector},
	}
	create(t, pdb)
	budgetComputed := func(allowed int32) {
		t.Helper()
		testutil.Eventually(t, timeout, fmt.Sprintf("budget solo computed, %d allowed", allowed), func(ctx context.Context) (bool, string, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
			return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods == 1 && pdb.Status.DisruptionsAllowed == allowed,
				fmt.Sprintf("%+v", pdb.Status), err
		})
	}
	budgetComputed(0)
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "solo"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("the pod of solo: %v %+v", err, pods.Items)
	}
	node, solo := pods.Items[0].Spec.NodeName, ns+"/"+pods.Items[0].Name

	out, code := plugin(t, "preflight", node)
	if code != 2 {
		t.Errorf("preflight: exit %d, want 2 (blocked)", code)
	}
	for _, want := range []string{
		"Deadlock forecast: 2 findings (1 BudgetBlocked, 1 CannotSurge): the drain would wait on them for good",
		"PodDisruptionBudget " + ns + "/solo: minAvailable 1 is all of its 1 pod: it never allows a disruption",
		"Deployment " + ns + "/solo: its only live pod moves and nothing surges it: the Deployment's maxSurge is 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("preflight does not say %q", want)
		}
	}
	out, _ = plugin(t, "preflight", node, "-o", "json")
	var report drainpreflight.Report
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &report); err != nil || report.Deadlocks != 2 {
		t.Errorf("preflight -o json: %v, deadlocks %d, want 2", err, report.Deadlocks)
	}

	framework.NewController(t).Start()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "forecast-e2e"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: true, Reason: "deadlock forecast e2e",
			Rollout: &nodemaintv1alpha1.RolloutSpec{Preflight: nodemaintv1alpha1.PreflightBlock},
		},
	}
	create(t, nm)
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), nm)
		noMaintenances(t)
	})
	testutil.Eventually(t, timeout, "the rollout held by its forecast", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(nm), nm); err != nil || nm.Status.Preflight == nil {
			return false, "no preflight", err
		}
		p := nm.Status.Preflight
		has := func(reason string) bool {
			return slices.ContainsFunc(p.Findings, func(f nodemaintv1alpha1.PreflightFinding) bool {
				return f.Node == node && f.Severity == string(drainpreflight.Blocks) && f.Reason == reason && slices.Contains(f.Pods, solo)
			})
		}
		halted := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionRolloutHalted)
		return p.Deadlocks == 2 && has(nodemaintv1alpha1.PreflightReasonBudgetBlocked) && has(nodemaintv1alpha1.PreflightReasonCannotSurge) &&
				halted != nil && halted.Reason == nodemaintv1alpha1.ReasonPreflightBlocked && nm.Status.Rollout != nil && len(nm.Status.Rollout.InTurn) == 0,
			fmt.Sprintf("preflight %+v, halted %+v", p, halted), nil
	})
	if cordoned, err := unschedulable(ctx, node); err != nil || cordoned {
		t.Fatalf("%s cordoned while the forecast holds the rollout (%v)", node, err)
	}

	// Relaxed: the pod may be evicted (the Deployment goes down while it moves, which the
	// forecast reports as a loss, not a deadlock); the rollout starts.
	if err := c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
	if err := c.Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	budgetComputed(1)
	testutil.Eventually(t, timeout, "the rollout started once the forecast is clean", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(nm), nm); err != nil {
			return false, "", err
		}
		cordoned, err := unschedulable(ctx, node)
		return cordoned && nm.Status.Rollout != nil && len(nm.Status.Rollout.InTurn) == 1, fmt.Sprintf("rollout %+v, %s cordoned %v", nm.Status.Rollout, node, cordoned), err
	})
}
