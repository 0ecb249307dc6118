package responder_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/machine"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// machineFinalizer is the finalizer Cluster API's Machine controller puts on every Machine, and
// removes once the Machine's node and infrastructure are gone; the test holds it in its place.
const machineFinalizer = "machine.cluster.x-k8s.io"

// TestClusterAPIPreDrainHook: Cluster API deletes a Machine that carries nodemaint's pre-drain
// hook; its node holds the only replica of a Deployment whose budget allows no eviction. The
// test plays Cluster API's Machine controller on Cluster API's own Machine CRD (from its Go
// module). nodemaint creates a NodeMaintenance for the node, the Deployment surges elsewhere
// with a Ready pod at every moment, the hook is released only once the node is drained, and
// the NodeMaintenance goes with the Machine.
func TestClusterAPIPreDrainHook(t *testing.T) {
	framework.Apply(t, "test/e2e/testdata/cluster-api", "config/cluster-api")
	if os.Getenv("EVICTION_REQUEST_API") == "true" {
		// Under the EvictionRequest protocol the Deployment's pods are registered with the
		// Deployment responder at creation (config/admission/eviction-responder).
		framework.InstallEvictionResponderPolicy(t)
	}
	c := framework.NewController(t)
	c.Start("--deployment-surge-timeout=2m", "--cluster-api")
	ns := framework.Namespace(t)
	createDeployment(t, ns, "web", 1, intstr.FromString("25%"), "3s", 0)
	createStrictPDB(t, ns, "web")
	s := watchApp(t, ns, "web")
	old := s.view().live()[0]

	m := newMachine(ns, "md-0-abcde")
	if err := framework.Client().Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseMachine(context.Background(), m) })
	// Cluster API's Machine controller sets the node it found for the Machine.
	if err := unstructured.SetNestedField(m.Object, old.Spec.NodeName, "status", "nodeRef", "name"); err != nil {
		t.Fatal(err)
	}
	if err := framework.Client().Status().Update(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if err := framework.Client().Delete(t.Context(), m); err != nil {
		t.Fatal(err)
	}

	key := types.NamespacedName{Namespace: ns, Name: m.GetName()}
	hookReleased := func(ctx context.Context) (bool, error) {
		cur := newMachine(ns, m.GetName())
		if err := framework.Client().Get(ctx, key, cur); err != nil {
			return false, err
		}
		_, hooked := cur.GetAnnotations()[nodemaintv1alpha1.ClusterAPIPreDrainHook]
		return !hooked, nil
	}
	framework.Eventually(t, waitTimeout, "the pre-drain hook released", hookReleased)
	// The hook held the deletion until the node was drained: the old pod is gone by then.
	if err := framework.Client().Get(t.Context(), types.NamespacedName{Namespace: ns, Name: old.Name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pre-drain hook released while pod %s is still there (%v)", old.Name, err)
	}
	s.waitFor(t, waitTimeout, "the pod replaced on another node", func(v view) bool {
		return v.settled(1) && v.pod(old.Name) == nil && v.live()[0].Spec.NodeName != old.Spec.NodeName
	})
	if minReady, _, _ := s.stats(); minReady < 1 {
		t.Errorf("Ready pods went down to %d while Cluster API deleted the Machine", minReady)
	}

	// Cluster API deletes the node and the infrastructure, then lets the Machine go.
	releaseMachine(t.Context(), m)
	framework.Eventually(t, waitTimeout, "the NodeMaintenance gone with the Machine", func(ctx context.Context) (bool, error) {
		err := framework.Client().Get(ctx, types.NamespacedName{Name: machine.MaintenanceName(key)}, &nodemaintv1alpha1.NodeMaintenance{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// newMachine is a Cluster API Machine of the cluster "e2e" that carries nodemaint's pre-drain
// hook and Cluster API's finalizer, as its MachineSet creates it.
func newMachine(ns, name string) *unstructured.Unstructured {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(schema.GroupVersionKind{Group: clusterv1.GroupVersion.Group, Version: clusterv1.GroupVersion.Version, Kind: "Machine"})
	m.SetNamespace(ns)
	m.SetName(name)
	m.SetAnnotations(map[string]string{nodemaintv1alpha1.ClusterAPIPreDrainHook: "nodemaint"})
	m.SetFinalizers([]string{machineFinalizer})
	m.Object["spec"] = map[string]any{
		"clusterName":       "e2e",
		"bootstrap":         map[string]any{"dataSecretName": name + "-bootstrap"},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": name},
		"deletion":          map[string]any{"nodeDrainTimeoutSeconds": int64(600)},
	}
	return m
}

// releaseMachine removes Cluster API's finalizer, so the deleted Machine goes.
func releaseMachine(ctx context.Context, m *unstructured.Unstructured) {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	cur := newMachine(m.GetNamespace(), m.GetName())
	_ = framework.Client().Patch(ctx, cur, client.RawPatch(types.MergePatchType, patch))
}
