package plugin_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// TestKubectlDrainLines runs the kubectl drain lines of published runbooks, with `kubectl drain`
// become `kubectl maintenance drain` and nothing else changed: kubeadm's and EKS's upgrade
// (--ignore-daemonsets, --delete-emptydir-data: accepted, nodemaint behaves so already) drain a
// Deployment whose pods have emptyDir volumes, a server dry run writes nothing, and GKE's line
// (--force, --grace-period) is refused with the option nodemaint offers, changing nothing.
func TestKubectlDrainLines(t *testing.T) {
	ns := framework.Namespace(t)
	framework.NewController(t).Start()
	node := "kwok-node-3"

	// The Deployment's two pods on the node: the other nodes cordoned while they are placed.
	setUnschedulable := func(name string, on bool) {
		t.Helper()
		n := &corev1.Node{}
		if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		orig := n.DeepCopy()
		n.Spec.Unschedulable = on
		if err := framework.Client().Patch(t.Context(), n, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
	others := []string{"kwok-node-0", "kwok-node-1", "kwok-node-2"}
	for _, o := range others {
		setUnschedulable(o, true)
	}
	d := framework.NewDeployment(ns, "cache", 2)
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	framework.CreateDeployment(t, d)
	framework.WaitDeploymentAvailable(t, ns, "cache")
	for _, o := range others {
		setUnschedulable(o, false)
	}
	podsOnNode := func(ctx context.Context) (int, error) {
		var pods corev1.PodList
		err := framework.Client().List(ctx, &pods, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": node})
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				n++
			}
		}
		return n, err
	}
	if n, err := podsOnNode(t.Context()); err != nil || n != 2 {
		t.Fatalf("%d of the Deployment's pods on %s (%v), want 2", n, node, err)
	}
	noMaintenance := func(what string) {
		t.Helper()
		err := framework.Client().Get(t.Context(), client.ObjectKey{Name: node}, &nodemaintv1alpha1.NodeMaintenance{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: NodeMaintenance %s: %v, want none", what, node, err)
		}
	}

	// A server dry run: the preflight, the object validated by the API server, nothing stored.
	out, code := plugin(t, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--dry-run=server")
	if code != 0 || !strings.Contains(out, "nodemaintenance.nodemaint.dev/"+node+": draining (server dry run)") || !strings.Contains(out, "EmptyDir") {
		t.Errorf("drain --dry-run=server: exit %d, want 0, the preflight (emptyDir data lost) and the NodeMaintenance as a dry run", code)
	}
	noMaintenance("after --dry-run=server")

	// GKE's line: refused in one line naming what nodemaint does instead; nothing changes.
	out, code = plugin(t, "drain", "--force", "--ignore-daemonsets", "--delete-local-data", "--grace-period=10", node)
	if code != 1 || !strings.Contains(out, "--force: nodemaint evicts pods that no controller manages") {
		t.Errorf("drain --force: exit %d, want 1 and why", code)
	}
	noMaintenance("after a refused --force")
	if ok, err := unschedulable(t.Context(), node); err != nil || ok {
		t.Errorf("node %s cordoned by a refused drain (%v)", node, err)
	}

	// kubeadm's and EKS's lines: the Deployment surges elsewhere, the node is drained.
	if out, code := plugin(t, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data"); code != 0 || !strings.Contains(out, "drained") {
		t.Errorf("drain --ignore-daemonsets --delete-emptydir-data: exit %d, want 0 and drained", code)
	}
	testutil.Eventually(t, timeout, "no pod of the Deployment left on "+node, func(ctx context.Context) (bool, string, error) {
		n, err := podsOnNode(ctx)
		return n == 0, "", err
	})
	framework.WaitDeploymentAvailable(t, ns, "cache")
	// And the runbook's last line, kubectl uncordon: the maintenance ends and goes.
	if _, code := plugin(t, "uncordon", node); code != 0 {
		t.Errorf("uncordon: exit %d", code)
	}
	noMaintenances(t)
	if ok, err := unschedulable(t.Context(), node); err != nil || ok {
		t.Errorf("node %s still cordoned after uncordon (%v)", node, err)
	}
}
