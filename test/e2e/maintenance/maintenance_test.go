// Package maintenance_test proves the NodeMaintenance controller end to end: on the local cluster
// with the real kube-controller-manager and scheduler, kwok kubelets, and nodemaint-controller
// running as its own ServiceAccount with exactly its ClusterRole.
package maintenance_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.Options{Nodes: 5})) }

// timeout bounds every wait for the controller: it reacts to watch events, so seconds suffice
// on a loaded machine.
const timeout = 45 * time.Second

var restored = testutil.NodeView{}

func node(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// controllerArgs turn the Deployment responder off: these tests are about the NodeMaintenance
// controller, and take the part of the pods' owners themselves (test/e2e/responder tests it).
var controllerArgs = []string{"--feature-gates=NodeMaintenanceDeployment=false"}

func startController(t *testing.T) *framework.Controller {
	t.Helper()
	c := framework.NewController(t)
	c.Start(controllerArgs...)
	return c
}

// createNM creates a signal-only NodeMaintenance: these tests are about what it asks of nodes and
// pods, so nothing is evicted (drain_test.go tests eviction).
func createNM(t *testing.T, name string, cordon, drain bool, reason string, nodes ...string) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(nodes...), Cordon: cordon, Drain: drain, Reason: reason,
			EvictionPolicy: nodemaintv1alpha1.EvictionPolicySignalOnly,
		},
	}
	if err := framework.Client().Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = framework.Client().Delete(context.Background(), nm) })
}

func setNM(t *testing.T, name string, cordon, drain bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"cordon":%t,"drain":%t}}`, cordon, drain)
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := framework.Client().Patch(t.Context(), nm, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func deleteNM(t *testing.T, name string) {
	t.Helper()
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := framework.Client().Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
}

func expectGone(t *testing.T, name string) {
	t.Helper()
	testutil.Eventually(t, timeout, "NodeMaintenance "+name+" deleted", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, &nodemaintv1alpha1.NodeMaintenance{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
}

func expectNode(t *testing.T, name string, want testutil.NodeView) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("node %s is %+v", name, want), func(ctx context.Context) (bool, string, error) {
		got, err := testutil.ViewNode(ctx, framework.Client(), name)
		return got == want, fmt.Sprintf("%+v", got), err
	})
}

func expectStatus(t *testing.T, name, node string, want testutil.StatusView) {
	t.Helper()
	want.UpToDate = true
	testutil.Eventually(t, timeout, fmt.Sprintf("status of %s is %+v", name, want), func(ctx context.Context) (bool, string, error) {
		got, err := testutil.ViewStatus(ctx, framework.Client(), name, node)
		return got == want, fmt.Sprintf("%+v", got), err
	})
}

// expectKstatus waits until kstatus, as Flux and other kstatus-based GitOps tools compute it from
// the object alone, says want of the NodeMaintenance (Current: it reached what its spec asks;
// InProgress: not yet), with the Ready condition's reason.
func expectKstatus(t *testing.T, name string, want kstatus.Status, reason string) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("kstatus of %s is %s (Ready: %s)", name, want, reason), func(ctx context.Context) (bool, string, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(nodemaintv1alpha1.GroupVersion.WithKind("NodeMaintenance"))
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return false, "", err
		}
		res, err := kstatus.Compute(u)
		if err != nil {
			return false, "", err
		}
		ready := ""
		if c, err := kstatus.GetObjectWithConditions(u.Object); err == nil {
			for _, cond := range c.Status.Conditions {
				if cond.Type == nodemaintv1alpha1.ConditionReady {
					ready = cond.Reason
				}
			}
		}
		return res.Status == want && ready == reason, fmt.Sprintf("%s (%s), Ready reason %q", res.Status, res.Message, ready), nil
	})
}

// podsOn lists the pods of the namespace on the node, by name.
func podsOn(ctx context.Context, namespace, node string) (map[string]*corev1.Pod, error) {
	var pods corev1.PodList
	if err := framework.Client().List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == node {
			out[pods.Items[i].Name] = &pods.Items[i]
		}
	}
	return out, nil
}

// expectRequests waits until the pods of the namespace on the node carry exactly the given
// EvacuationRequest renderings (testutil.Request), by pod name prefix ("" for none). Every prefix
// must name at least one pod.
func expectRequests(t *testing.T, namespace, node string, want map[string]string) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("requests on %s are %v", node, want), func(ctx context.Context) (bool, string, error) {
		pods, err := podsOn(ctx, namespace, node)
		if err != nil {
			return false, "", err
		}
		var seen []string
		ok := true
		for prefix, w := range want {
			found := false
			for name, pod := range pods {
				if strings.HasPrefix(name, prefix) {
					found = true
					ok = ok && testutil.Request(pod) == w
				}
			}
			ok = ok && found
		}
		for name, pod := range pods {
			seen = append(seen, name+"="+testutil.Request(pod))
		}
		return ok, strings.Join(seen, " "), nil
	})
}

func barePod(t *testing.T, namespace, name, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if err := framework.Client().Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, "pod "+name+" running", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, client.ObjectKeyFromObject(pod), pod)
		return pod.Status.Phase == corev1.PodRunning, "", err
	})
	return pod
}

func setPodCondition(t *testing.T, pod *corev1.Pod, cond corev1.PodCondition) {
	t.Helper()
	orig := pod.DeepCopy()
	evacuation.SetCondition(pod, cond)
	if err := framework.Client().Status().Patch(t.Context(), pod, client.StrategicMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func expectWarning(t *testing.T, reason, kind, name string) {
	t.Helper()
	expectEvent(t, corev1.EventTypeWarning, reason, kind, name)
}

// expectEvent waits for an Event of the type and reason regarding the object.
func expectEvent(t *testing.T, eventType, reason, kind, name string) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("%s %s on %s %s", eventType, reason, kind, name), func(ctx context.Context) (bool, string, error) {
		var events eventsv1.EventList
		if err := framework.Client().List(ctx, &events); err != nil {
			return false, "", err
		}
		for _, e := range events.Items {
			if e.Reason == reason && e.Type == eventType && e.Regarding.Kind == kind && e.Regarding.Name == name {
				return true, "", nil
			}
		}
		return false, "", nil
	})
}
