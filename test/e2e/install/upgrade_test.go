package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// previousChart is the chart before its CRDs were templates: 0.1.0, whose CRDs were in crds/
// (installed once, never upgraded) with the short name nm. Made from its commit with
// `git archive 6a7c033^ charts/nodemaint | tar -x -C DIR && helm package DIR/charts/nodemaint`.
var previousChart = repoPath("test", "e2e", "install", "testdata", "nodemaint-0.1.0.tgz")

// TestHelmUpgrade upgrades an install of the previous chart to this one with a maintenance in
// flight, as the user guide says: the CRDs are adopted by the release and upgraded (nm becomes
// nmaint), the maintenance keeps its spec and status and finishes once unblocked, and
// uninstalling the release keeps the CRDs.
func TestHelmUpgrade(t *testing.T) {
	ns := framework.Namespace(t)
	name := ns + "-nodemaint"
	// The cluster as the previous chart left it: its CRDs, which Helm installed from crds/.
	crds, err := runHelm(t, "show", "crds", previousChart)
	if err != nil {
		t.Fatalf("helm show crds: %v\n%s", err, crds)
	}
	applyCRDs(t, crds)
	t.Cleanup(func() {
		// Whatever happened, the other tests get this version's CRDs back.
		if out, err := framework.Kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", repoPath("config", "crd", "bases")); err != nil {
			t.Errorf("restoring the CRDs: %v\n%s", err, out)
		}
	})
	if got := shortNames(t); !slices.Equal(got, []string{"nm"}) {
		t.Fatalf("the previous CRD's short names %v, want [nm]", got)
	}
	if out, err := runHelm(t, "install", ns, previousChart, "--namespace", ns, "--set", "fullnameOverride="+name); err != nil {
		t.Fatalf("helm install of the previous chart: %v\n%s", err, out)
	}
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_, _ = runHelm(t, "uninstall", ns, "--namespace", ns)
		}
	})

	// In flight: a bare pod whose eviction a budget refuses holds the drain.
	framework.NewController(t).Start()
	node := "kwok-node-0"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Labels: map[string]string{"app": "held"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &intstr.IntOrString{IntVal: 0},
			Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}}}
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: testutil.NodeSelectorFor(node), Cordon: true, Drain: true, Reason: "upgrade e2e",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Second}}}
	for _, o := range []client.Object{pod, pdb, nm} {
		if err := framework.Client().Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), nm) })
	held := func(ctx context.Context) (bool, string, error) {
		var got nodemaintv1alpha1.NodeMaintenance
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(nm), &got); err != nil {
			return false, "", err
		}
		blocked := got.Status.Nodes[node].Blocked
		return len(blocked) > 0 && blocked[0].Reason == nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, fmt.Sprintf("%+v", got.Status.Nodes[node]), nil
	}
	testutil.Eventually(t, time.Minute, "the drain held by the budget", held)
	var before nodemaintv1alpha1.NodeMaintenance
	if err := framework.Client().Get(t.Context(), client.ObjectKeyFromObject(nm), &before); err != nil {
		t.Fatal(err)
	}

	// The user guide's upgrade from 0.1.0: the release adopts the CRDs, then upgrades.
	for _, crd := range []string{"nodemaintenances.nodemaint.dev", "drainrules.nodemaint.dev"} {
		for _, args := range [][]string{
			{"label", "crd", crd, "app.kubernetes.io/managed-by=Helm", "--overwrite"},
			{"annotate", "crd", crd, "meta.helm.sh/release-name=" + ns, "meta.helm.sh/release-namespace=" + ns, "--overwrite"},
		} {
			if out, err := framework.Kubectl(t, args...); err != nil {
				t.Fatalf("kubectl %v: %v\n%s", args, err, out)
			}
		}
	}
	if out, err := runHelm(t, "upgrade", ns, repoPath("charts", "nodemaint"), "--namespace", ns, "--set", "fullnameOverride="+name); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if got := shortNames(t); !slices.Equal(got, []string{"nmaint"}) {
		t.Errorf("after the upgrade, short names %v, want [nmaint]: the CRD was not upgraded", got)
	}
	var after nodemaintv1alpha1.NodeMaintenance
	if err := framework.Client().Get(t.Context(), client.ObjectKeyFromObject(nm), &after); err != nil {
		t.Fatalf("the maintenance after the upgrade: %v", err)
	}
	if after.UID != before.UID {
		t.Errorf("the maintenance replaced in the upgrade: UID %s, was %s", after.UID, before.UID)
	}
	if after.Generation != before.Generation {
		t.Errorf("the maintenance's spec changed in the upgrade: generation %d, was %d", after.Generation, before.Generation)
	}
	if after.Status.Phase != before.Status.Phase {
		t.Errorf("the maintenance's phase changed in the upgrade: %s, was %s", after.Status.Phase, before.Status.Phase)
	}
	if got, was := after.Status.Nodes[node].PodsPendingEvacuation, before.Status.Nodes[node].PodsPendingEvacuation; got != was {
		t.Errorf("the maintenance's pods pending evacuation on %s changed in the upgrade: %+v, was %+v", node, after.Status.Nodes[node], before.Status.Nodes[node])
	}
	if ok, msg, err := held(t.Context()); !ok || err != nil {
		t.Errorf("after the upgrade, the drain is no longer reported held: %s %v", msg, err)
	}

	// The budget goes: the drain finishes.
	if err := framework.Client().Delete(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, nm.Name+" drained", func(ctx context.Context) (bool, string, error) {
		v, err := testutil.ViewStatus(ctx, framework.Client(), nm.Name, "")
		return v.Drained == "True" && v.Phase == nodemaintv1alpha1.PhaseDrainComplete, fmt.Sprintf("%+v", v), err
	})

	// Uninstalling keeps the CRDs, and with them the maintenances.
	if out, err := runHelm(t, "uninstall", ns, "--namespace", ns); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	uninstalled = true
	if err := framework.Client().Get(t.Context(), client.ObjectKeyFromObject(nm), &after); err != nil {
		t.Errorf("the maintenance after helm uninstall: %v", err)
	}
	if got := shortNames(t); len(got) == 0 {
		t.Error("helm uninstall deleted the CRDs")
	}
}

// applyCRDs applies CRD manifests as Helm's crds/ would have created them.
func applyCRDs(t *testing.T, manifests string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crds.yaml")
	if err := os.WriteFile(path, []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := framework.Kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", path); err != nil {
		t.Fatalf("applying the CRDs: %v\n%s", err, out)
	}
}

// shortNames are the NodeMaintenance CRD's short names, once the API server serves them.
func shortNames(t *testing.T) []string {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: "nodemaintenances.nodemaint.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Names.ShortNames
}
