// Package plugin_test drives the built kubectl-maintenance binary against the local cluster.
package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.Options{Nodes: 4})) }

const timeout = 90 * time.Second

// plugin runs bin/kubectl-maintenance with the cluster's kubeconfig; it returns the output and
// the exit code.
func plugin(t *testing.T, args ...string) (string, int) {
	t.Helper()
	bin := filepath.Join(os.Getenv("NODEMAINT_BIN_DIR"), "kubectl-maintenance")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no plugin binary (make build): %v", err)
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", framework.Cluster().Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	t.Logf("kubectl-maintenance %s\n%s", strings.Join(args, " "), out)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

func pod(ns, name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := framework.Client().Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func waitReady(t *testing.T, ns string, n int) {
	t.Helper()
	testutil.Eventually(t, timeout, "pods ready", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		err := framework.Client().List(ctx, &pods, client.InNamespace(ns))
		ready := 0
		for i := range pods.Items {
			if podutils.IsPodReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready == n, fmt.Sprint(ready), err
	})
}

func unschedulable(ctx context.Context, name string) (bool, error) {
	n := &corev1.Node{}
	err := framework.Client().Get(ctx, client.ObjectKey{Name: name}, n)
	return n.Spec.Unschedulable, err
}

// TestDrainStatusComplete: drain waits and names the blocking budget, exits 3 on its timeout;
// status --blocking quotes the budget; once it is gone drain finishes with 0; complete makes the
// node schedulable again.
func TestDrainStatusComplete(t *testing.T) {
	ns := framework.Namespace(t)
	framework.NewController(t).Start()
	node := "kwok-node-1"
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "precious"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "precious"}}},
	}
	create(t, pdb, pod(ns, "precious", node, map[string]string{"app": "precious"}), pod(ns, "plain", node, nil))
	waitReady(t, ns, 2)

	out, code := plugin(t, "drain", node, "--reason", "e2e", "--timeout", "20s", "--response-timeout", "2s")
	if code != 3 {
		t.Errorf("drain blocked by a budget: exit %d, want 3", code)
	}
	for _, want := range []string{"PodDisruptionBudget", ns + "/precious", "The disruption budget precious does not allow evicting pods"} {
		if !strings.Contains(out, want) {
			t.Errorf("drain blocked by a budget: output %q, want the budget named: %q", out, want)
		}
	}
	out, code = plugin(t, "status", node, "--blocking")
	if code != 0 {
		t.Errorf("status --blocking: exit %d, want 0", code)
	}
	if !strings.Contains(out, "The disruption budget precious") {
		t.Errorf("status --blocking: output %q does not quote the budget", out)
	}
	out, code = plugin(t, "list", "-o", "wide")
	if code != 0 {
		t.Errorf("list -o wide: exit %d, want 0", code)
	}
	if !strings.Contains(out, node) {
		t.Errorf("list -o wide: %q, want node %s in it", out, node)
	}
	if !strings.Contains(out, "e2e") {
		t.Errorf("list -o wide: %q, want the reason e2e in it", out)
	}
	out, code = plugin(t, "status", node, "-o", "yaml")
	if code != 0 {
		t.Errorf("status -o yaml: exit %d, want 0", code)
	}
	if !strings.Contains(out, "kind: NodeMaintenance") {
		t.Errorf("status -o yaml: output %q, want kind: NodeMaintenance", out)
	}

	if err := framework.Client().Delete(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	// Running drain again is idempotent: it follows the same NodeMaintenance to the end.
	out, code = plugin(t, "drain", node, "--timeout", "60s", "--response-timeout", "2s")
	if code != 0 {
		t.Errorf("drain: exit %d, want 0", code)
	}
	if !strings.Contains(out, "drained") {
		t.Errorf("drain: output %q, want drained", out)
	}
	if ok, err := unschedulable(t.Context(), node); err != nil || !ok {
		t.Errorf("node %s schedulable during maintenance (%v)", node, err)
	}
	// complete ends the maintenance drain created, and deletes it: nothing is left behind.
	out, code = plugin(t, "complete", node)
	if code != 0 {
		t.Errorf("complete: exit %d, want 0", code)
	}
	if !strings.Contains(out, "deleted") {
		t.Errorf("complete: output %q, want the NodeMaintenance deleted", out)
	}
	noMaintenances(t)
	testutil.Eventually(t, timeout, "node schedulable again", func(ctx context.Context) (bool, string, error) {
		ok, err := unschedulable(ctx, node)
		return !ok, "", err
	})

	// --keep keeps it, complete; and one the plugin did not create is kept unless --delete.
	if _, code := plugin(t, "cordon", node); code != 0 {
		t.Fatalf("cordon: exit %d", code)
	}
	if _, code := plugin(t, "complete", node, "--keep"); code != 0 {
		t.Errorf("complete --keep: exit %d", code)
	}
	kept := func(name string) {
		t.Helper()
		testutil.Eventually(t, timeout, "NodeMaintenance "+name+" kept, complete", func(ctx context.Context) (bool, string, error) {
			nm := &nodemaintv1alpha1.NodeMaintenance{}
			if err := framework.Client().Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
				return false, "", err
			}
			return nm.Status.Phase == nodemaintv1alpha1.PhaseMaintenanceComplete, string(nm.Status.Phase), nil
		})
	}
	kept(node)
	if _, code := plugin(t, "complete", node, "--delete"); code != 0 {
		t.Errorf("complete --delete: exit %d", code)
	}
	noMaintenances(t)
	applied := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "applied"}, Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
		Cordon: true, NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	create(t, applied)
	out, code = plugin(t, "complete", "--name", "applied")
	if code != 0 {
		t.Errorf("complete --name applied: exit %d, want 0", code)
	}
	if !strings.Contains(out, "complete") {
		t.Errorf("complete --name applied: output %q, want complete", out)
	}
	kept("applied")
	if _, code := plugin(t, "complete", "--name", "applied", "--delete"); code != 0 {
		t.Errorf("complete --name applied --delete: exit %d", code)
	}
	// The controller is still running: it finishes the cleanup and lets the object go.
	noMaintenances(t)
}

// noMaintenances waits until no NodeMaintenance exists any more.
func noMaintenances(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, timeout, "no NodeMaintenance left", func(ctx context.Context) (bool, string, error) {
		var list nodemaintv1alpha1.NodeMaintenanceList
		err := framework.Client().List(ctx, &list)
		names := make([]string, 0, len(list.Items))
		for _, nm := range list.Items {
			names = append(names, nm.Name)
		}
		return len(list.Items) == 0, strings.Join(names, ","), err
	})
}

// TestFallbackWithoutCRD: on a cluster without the NodeMaintenance API (nodemaint not installed,
// or the wrong context), drain refuses, changing nothing, unless --classic-fallback asks for the
// classic drain, which it then does with a warning. It removes the CRD, and installs it again
// when it ends.
func TestFallbackWithoutCRD(t *testing.T) {
	ns := framework.Namespace(t)
	node := "kwok-node-2"
	d := framework.NewDeployment(ns, "web", 2)
	d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	framework.CreateDeployment(t, d)
	// Deleting the CRD waits for every NodeMaintenance to go, and ours carry a finalizer that only
	// a running controller removes: make sure none is left from an earlier test.
	noMaintenances(t)

	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "nodemaintenances.nodemaint.dev"}}
	if err := framework.Client().Delete(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, file, _, _ := runtime.Caller(0)
		crds := filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "crd", "bases")
		if out, err := framework.Kubectl(t, "apply", "--server-side", "-f", crds); err != nil {
			t.Errorf("installing the CRDs again: %v\n%s", err, out)
		}
		if out, err := framework.Kubectl(t, "wait", "--for", "condition=Established", "crd/nodemaintenances.nodemaint.dev"); err != nil {
			t.Errorf("CRD not established again: %v\n%s", err, out)
		}
	})
	testutil.Eventually(t, timeout, "CRD gone", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(crd), crd)
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	out, code := plugin(t, "drain", node, "--timeout", "60s", "--force")
	if code != 1 {
		t.Errorf("drain without nodemaint: exit %d, want 1", code)
	}
	if !strings.Contains(out, "serves no NodeMaintenance API") {
		t.Errorf("drain without nodemaint: output %q, want the missing API named", out)
	}
	if !strings.Contains(out, "--classic-fallback") {
		t.Errorf("drain without nodemaint: output %q, want --classic-fallback offered", out)
	}
	if strings.Contains(out, "drained") {
		t.Errorf("drain without nodemaint: output %q, want not drained", out)
	}
	if ok, err := unschedulable(t.Context(), node); err != nil || ok {
		t.Errorf("node %s cordoned by a drain that should have changed nothing (%v)", node, err)
	}
	out, code = plugin(t, "drain", node, "--timeout", "60s", "--classic-fallback")
	if code != 0 {
		t.Errorf("fallback drain: exit %d, want 0", code)
	}
	if !strings.Contains(out, "Warning: this cluster has no NodeMaintenance API") {
		t.Errorf("fallback drain: output %q, want the warning that the cluster has no NodeMaintenance API", out)
	}
	if !strings.Contains(out, "node/"+node+" drained") {
		t.Errorf("fallback drain: output %q, want node/%s drained", out, node)
	}
	if ok, err := unschedulable(t.Context(), node); err != nil || !ok {
		t.Errorf("node %s not cordoned by the classic drain (%v)", node, err)
	}
	var pods corev1.PodList
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": node}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s still runs on the drained node", p.Name)
		}
	}
	_, _ = framework.Kubectl(t, "uncordon", node)
}

// TestCompletion: kubectl's completion of the plugin (bin/kubectl_complete-maintenance, which
// kubectl runs for `kubectl maintenance <TAB>`) completes node names where a command takes nodes,
// and NodeMaintenance names for status and --name, from the cluster.
func TestCompletion(t *testing.T) {
	framework.NewController(t).Start()
	script := filepath.Join(os.Getenv("NODEMAINT_BIN_DIR"), "kubectl_complete-maintenance")
	complete := func(args ...string) []string {
		t.Helper()
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+framework.Cluster().Kubeconfig(),
			"PATH="+os.Getenv("NODEMAINT_BIN_DIR")+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v", script, strings.Join(args, " "), err)
		}
		// The completions, a line each, then the shell directive (":4", no file completion).
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if last := lines[len(lines)-1]; last != ":4" {
			t.Errorf("%s: directive %q, want :4 (names only, no files)", strings.Join(args, " "), last)
		}
		return lines[:len(lines)-1]
	}
	if got := complete("drain", "kwok-node-0", "kwok-node-"); !slices.Equal(got, []string{"kwok-node-1", "kwok-node-2", "kwok-node-3"}) {
		t.Errorf("drain kwok-node-0 kwok-node-<TAB>: %v, want the other nodes", got)
	}
	node := "kwok-node-2"
	if out, code := plugin(t, "plan", node); code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	t.Cleanup(func() { plugin(t, "complete", node); noMaintenances(t) })
	if got := complete("status", ""); !slices.Equal(got, []string{node}) {
		t.Errorf("status <TAB>: %v, want the NodeMaintenance %s", got, node)
	}
	if got := complete("complete", "--name", "kwok"); !slices.Equal(got, []string{node}) {
		t.Errorf("complete --name kwok<TAB>: %v, want the NodeMaintenance %s", got, node)
	}
}
