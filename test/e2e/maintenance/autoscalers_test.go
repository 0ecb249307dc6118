package maintenance_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// caScaleDownDisabled is the cluster autoscaler's annotation (its FAQ: "How can I prevent Cluster
// Autoscaler from scaling down a particular node?"); its Go module is not one this build can use.
const caScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

// TestAutoscalers: while a maintenance cordons and drains a node, Karpenter and the cluster
// autoscaler are kept from removing it, by the annotations they publish; another writer's value
// stays as it was; a node Karpenter is already removing (its taint) is reported, not held; and
// once the maintenance is gone, the node is as it was found.
func TestAutoscalers(t *testing.T) {
	startController(t)
	held, removing := node(1), node(3)
	patchNode(t, held, fmt.Sprintf(`{"metadata":{"annotations":{%q:"false"}}}`, caScaleDownDisabled))
	t.Cleanup(func() { patchNode(t, held, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, caScaleDownDisabled)) })
	taint := karpv1.DisruptedNoScheduleTaint
	patchNode(t, removing, fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"effect":%q}]}}`, taint.Key, taint.Effect))
	t.Cleanup(func() { untaint(t, removing, taint.Key) })

	createNM(t, "autoscalers", true, true, "", held, removing)
	expectAnnotations(t, held, map[string]string{karpv1.DoNotDisruptAnnotationKey: "true", caScaleDownDisabled: "false"})
	testutil.Eventually(t, timeout, "status.nodes names Karpenter removing "+removing, func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		if err := framework.Client().Get(ctx, types.NamespacedName{Name: "autoscalers"}, nm); err != nil {
			return false, "", err
		}
		return nm.Status.Nodes[removing].RemovedBy == nodemaintv1alpha1.RemovedByKarpenter, fmt.Sprintf("%+v", nm.Status.Nodes), nil
	})
	expectWarning(t, "NodeRemovedByAutoscaler", "NodeMaintenance", "autoscalers")
	expectAnnotations(t, removing, map[string]string{karpv1.DoNotDisruptAnnotationKey: "", caScaleDownDisabled: ""})

	deleteNM(t, "autoscalers")
	expectGone(t, "autoscalers")
	expectAnnotations(t, held, map[string]string{karpv1.DoNotDisruptAnnotationKey: "", caScaleDownDisabled: "false", nodemaintv1alpha1.AutoscalersHeldAnnotation: ""})
}

// patchNode merge-patches the node.
func patchNode(t *testing.T, name, patch string) {
	t.Helper()
	n := &corev1.Node{}
	n.Name = name
	if err := framework.Client().Patch(context.Background(), n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// expectAnnotations waits until the node's annotations are as want says ("": absent).
func expectAnnotations(t *testing.T, name string, want map[string]string) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("node %s annotated %v", name, want), func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		if err := framework.Client().Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
			return false, "", err
		}
		for k, v := range want {
			if n.Annotations[k] != v {
				return false, fmt.Sprintf("%v", n.Annotations), nil
			}
		}
		return true, "", nil
	})
}

// untaint removes the node's taints of the key.
func untaint(t *testing.T, name, key string) {
	t.Helper()
	n := &corev1.Node{}
	if err := framework.Client().Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	orig := n.DeepCopy()
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
	if err := framework.Client().Patch(context.Background(), n, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
}
