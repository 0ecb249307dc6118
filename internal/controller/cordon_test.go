package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testutil"
)

// denyCordon makes the API server refuse to cordon the node, to anyone (as a narrowed role or
// another admission policy would refuse nodemaint), until the returned function lifts it.
func denyCordon(t *testing.T, node string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	name := "deny-cordon-" + node
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "this-node", Expression: fmt.Sprintf("object.metadata.name == %q", node)}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.spec.unschedulable) || !object.spec.unschedulable || (has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable)",
				Message:    "cordoning this node is not allowed",
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	lift = func() {
		_ = k8s.Delete(context.Background(), binding)
		_ = k8s.Delete(context.Background(), policy)
	}
	t.Cleanup(lift)
	// The policy takes effect once the API server has compiled it: try a cordon until refused.
	eventually(t, "cordoning "+node+" refused", func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
			return false, "", err
		}
		orig := n.DeepCopy()
		n.Spec.Unschedulable = true
		err := k8s.Patch(ctx, n, client.MergeFrom(orig), client.DryRunAll)
		return apierrors.IsForbidden(err), fmt.Sprint(err), nil
	})
	return lift
}

// TestNoEvacuationBeforeCordon: a complete cordon is a prerequisite of the drain (KEP-4212).
// While the node cannot be cordoned, none of its pods is asked to move (a replacement could land
// right back on it) and none is evicted; the maintenance says why. Once the cordon goes through,
// the drain starts.
func TestNoEvacuationBeforeCordon(t *testing.T) {
	createNode(t, "nocordon-node", nil, false)
	lift := denyCordon(t, "nocordon-node")
	createPod(t, "nocordon-app", "nocordon-node", ownedByReplicaSet)
	createPod(t, "nocordon-bare", "nocordon-node")
	createDrainNM(t, "nocordon", time.Second, "nocordon-node")
	created := time.Now()

	// The node reconciler tried to cordon and was refused: it says so on the maintenance.
	expectWarning(t, "NodeMaintenance", "nocordon", "Forbidden")
	// It has had every chance to request evacuation and to evict, with a response timeout of 1s:
	// a reconcile of the node that started past twice that tried to cordon it again and was
	// refused.
	expectReconciled(t, "node", "nocordon-node", created.Add(2*time.Second), "error")
	for _, pod := range []string{"nocordon-app", "nocordon-bare"} {
		if got, err := requestOf(context.Background(), pod); err != nil || got != "" {
			t.Errorf("pod %s asked to move from a node that is not cordoned: %q %v", pod, got, err)
		}
		notEvicted(t, pod)
	}
	expectNode(t, "nocordon-node", testutil.NodeView{})

	lift()
	expectNode(t, "nocordon-node", testutil.NodeView{Unschedulable: true, CordonedByUs: true, Condition: "True/Drain", Maintenances: "nocordon=Drain"})
	expectRequest(t, "nocordon-app", "True/NodeMaintenance/drain test")
	expectEvicted(t, "nocordon-app")
}
