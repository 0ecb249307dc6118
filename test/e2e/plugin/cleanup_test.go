package plugin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
)

// TestTyposRefused: plan, cordon and drain of a node that does not exist, or of a selector that
// matches no node, exit 1 naming what is missing, and create nothing.
func TestTyposRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"drain", "no-such-node", "--timeout", "5s"}, "no node named no-such-node: nothing changed"},
		{[]string{"cordon", "kwok-node-1", "kwok-nod-2", "--name", "typo"}, "no node named kwok-nod-2: nothing changed"},
		{[]string{"plan", "-l", "example.com/rack=nowhere", "--name", "typo"}, `selector "example.com/rack=nowhere" matches no node: nothing changed`},
	} {
		out, code := plugin(t, tc.args...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", strings.Join(tc.args, " "), code)
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s: output %q, want %q in it", strings.Join(tc.args, " "), out, tc.want)
		}
	}
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := framework.Client().List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	for _, nm := range list.Items {
		if nm.Name == "no-such-node" || nm.Name == "typo" {
			t.Errorf("NodeMaintenance %s created for a typo", nm.Name)
		}
	}
	if ok, err := unschedulable(t.Context(), "kwok-node-1"); err != nil || ok {
		t.Errorf("kwok-node-1 cordoned by a command that failed (%v)", err)
	}
}

// TestCleanupAfterKill: a drain is under way, a Deployment mid-surge (its replacement cannot be
// placed), the NodeMaintenance is being deleted, and the controller is killed (SIGKILL), as an
// uninstall that forgot the order would. kubectl maintenance cleanup refuses while a controller
// holds its Lease, then restores everything: the invariant checker's clean check passes, the
// Deployment is back to its replicas, the NodeMaintenance is gone, a node cordoned before it
// stays cordoned.
func TestCleanupAfterKill(t *testing.T) {
	ctx := t.Context()
	c := framework.Client()
	ns := framework.Namespace(t)
	drained, cordonedBefore := "kwok-node-3", "kwok-node-0"
	if out, err := framework.Kubectl(t, "cordon", cordonedBefore); err != nil {
		t.Fatalf("cordon: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = framework.Kubectl(t, "uncordon", cordonedBefore) })
	// The replacements can go nowhere but the drained node: the surge stays in flight.
	d := framework.NewDeployment(ns, "web", 2)
	d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: drained}
	framework.CreateDeployment(t, d)
	checker, err := invariants.Start(ctx, framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{Namespaces: []string{ns}}))
	if err != nil {
		t.Fatal(err)
	}
	defer checker.Stop()

	ctrl := framework.NewController(t)
	ctrl.Start()
	if out, code := plugin(t, "drain", drained, cordonedBefore, "--name", "cleanup-e2e", "--wait=false", "--reason", "cleanup e2e"); code != 0 {
		t.Fatalf("drain: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, timeout, "a surge in flight", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
		return d.Annotations[evacuation.SurgeAnnotation] != "" && ptr.Deref(d.Spec.Replicas, 0) == 3, fmt.Sprintf("replicas %d, annotations %v", ptr.Deref(d.Spec.Replicas, 0), d.Annotations), err
	})

	// A live controller would redo what cleanup undoes.
	refusal, code := plugin(t, "cleanup")
	if code != 1 {
		t.Errorf("cleanup with the controller running: exit %d, want 1", code)
	}
	if !strings.Contains(refusal, "holds the leader Lease") {
		t.Errorf("cleanup with the controller running: output %q, want the Lease named", refusal)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil || ptr.Deref(d.Spec.Replicas, 0) != 3 {
		t.Errorf("cleanup that refused changed the Deployment: replicas %d (%v)", ptr.Deref(d.Spec.Replicas, 0), err)
	}

	nm := &nodemaintv1alpha1.NodeMaintenance{}
	nm.Name = "cleanup-e2e"
	ctrl.Kill()
	if err := c.Delete(ctx, nm); err != nil {
		t.Fatal(err)
	}
	// A controller run without leader election holds no Lease: its Deployment's available
	// replicas stop cleanup all the same (here a Deployment of that name and label, which kwok runs).
	installed := framework.NewDeployment(ns, "nodemaint-controller", 1)
	installed.Labels = map[string]string{"app.kubernetes.io/name": "nodemaint-controller"}
	framework.CreateDeployment(t, installed)
	testutil.Eventually(t, timeout, "cleanup refused for the Deployment's available replica", func(context.Context) (bool, string, error) {
		out, code := plugin(t, "cleanup", "--dry-run")
		return code == 1 && strings.Contains(out, "has 1 available replicas"), fmt.Sprint("exit ", code, ": ", out), nil
	})
	if err := c.Delete(ctx, installed); err != nil {
		t.Fatal(err)
	}

	// The killed controller's Lease expires (4s in the e2e tests), its Deployment is gone.
	var out string
	testutil.Eventually(t, timeout, "cleanup --dry-run runs", func(context.Context) (bool, string, error) {
		var code int
		out, code = plugin(t, "cleanup", "--dry-run")
		return code == 0, fmt.Sprint("exit ", code), nil
	})
	for _, want := range []string{"SurgeRolledBack", "node/" + drained + ": uncordoned (nodemaint cordoned it) (dry run)",
		"removed EvacuationRequest (reason NodeMaintenance) (dry run)", "nodemaintenance.nodemaint.dev/cleanup-e2e: removed finalizer"} {
		if !strings.Contains(out, want) {
			t.Errorf("cleanup --dry-run does not say %q", want)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil || ptr.Deref(d.Spec.Replicas, 0) != 3 {
		t.Errorf("cleanup --dry-run changed the Deployment: replicas %d (%v)", ptr.Deref(d.Spec.Replicas, 0), err)
	}

	out, code = plugin(t, "cleanup")
	if code != 0 {
		t.Fatalf("cleanup: exit %d", code)
	}
	if strings.Contains(out, "(dry run)") {
		t.Fatalf("cleanup: output %q, want no dry run", out)
	}
	testutil.Eventually(t, timeout, "nothing of nodemaint's left", func(ctx context.Context) (bool, string, error) {
		err := checker.CheckClean(ctx, ns)
		return err == nil, fmt.Sprint(err), nil
	})
	var dep appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &dep); err != nil || ptr.Deref(dep.Spec.Replicas, 0) != 2 {
		t.Errorf("Deployment replicas %d, want 2 (%v)", ptr.Deref(dep.Spec.Replicas, 0), err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(nm), nm); !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenance cleanup-e2e still there (finalizers %v, %v)", nm.Finalizers, err)
	}
	if ok, err := unschedulable(ctx, cordonedBefore); err != nil || !ok {
		t.Errorf("%s, cordoned before the maintenance, was uncordoned (%v)", cordonedBefore, err)
	}
	if ok, err := unschedulable(ctx, drained); err != nil || ok {
		t.Errorf("%s still cordoned (%v)", drained, err)
	}
	out, code = plugin(t, "cleanup")
	if code != 0 {
		t.Errorf("cleanup again: exit %d, want 0", code)
	}
	if !strings.Contains(out, "Nothing of nodemaint's left to clean up.") {
		t.Errorf("cleanup again: output %q, want nothing left", out)
	}
}
