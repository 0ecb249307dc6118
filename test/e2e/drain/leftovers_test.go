package drain_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/requester"
	"github.com/nodemaint/nodemaint/internal/testutil"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// leftovers are nodemaint's EvictionRequests of the node and the Evictions naming nodemaint in
// the namespace, by name.
func leftovers(ctx context.Context, ns, node string) ([]string, error) {
	var reqs lifecyclev1alpha1.EvictionRequestList
	if err := framework.Client().List(ctx, &reqs, client.InNamespace(ns), client.MatchingLabels{requester.NodeLabel: node}); err != nil {
		return nil, err
	}
	var evs lifecyclev1alpha1.EvictionList
	if err := framework.Client().List(ctx, &evs, client.InNamespace(ns), client.HasLabels{names.Requester}); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range reqs.Items {
		out = append(out, "evictionrequest/"+r.Name)
	}
	for _, e := range evs.Items {
		out = append(out, "eviction/"+e.Name)
	}
	return out, nil
}

// TestNothingLeftWhenNodeDeleted: under the EvictionRequest protocol, a node deleted under a
// draining maintenance (an autoscaler's scale-down) leaves nothing of nodemaint's once its pods
// are gone, even with nodemaint down: its pods' EvictionRequests are owned by the pods, so that
// kube-controller-manager's garbage collector deletes them (and their Evictions, owned by the
// requests) once the pod garbage collector deleted the pods of the node gone. The pods are
// behind a budget that allows nothing, so the requests are still there when the node goes.
func TestNothingLeftWhenNodeDeleted(t *testing.T) {
	framework.RequireProtocols(t, framework.EvictionRequests)
	ns := framework.Namespace(t)
	ctl := framework.NewController(t)
	ctl.Start()
	added, err := framework.Cluster().AddNodes(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	doomed := added[0]
	t.Cleanup(func() { _ = framework.Cluster().DeleteNode(context.Background(), doomed) })

	// The pods go to the new node only: the others are cordoned meanwhile.
	var others []string
	for i := range 5 {
		others = append(others, node(i))
	}
	kubectl(t, append([]string{"cordon"}, others...)...)
	// Each pod names a responder of its own (which never answers), so that nodemaint asks it
	// through an EvictionRequest: a pod that names none is asked through its pod condition.
	held := []*corev1.Pod{barePod(ns, "held-1", map[string]string{"app": "held"}), barePod(ns, "held-2", map[string]string{"app": "held"})}
	for _, p := range held {
		p.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: "silent.example.com/operator", Priority: ptr.To[int32](10000)}}
	}
	create(t, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "never"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "held"}}},
	}, held[0], held[1])
	waitRunning(t, ns, 2)
	kubectl(t, append([]string{"uncordon"}, others...)...)

	createDrainNM(t, "node-deleted", doomed)
	testutil.Eventually(t, timeout, "nodemaint's EvictionRequests of both pods, owned by them", func(ctx context.Context) (bool, string, error) {
		var reqs lifecyclev1alpha1.EvictionRequestList
		if err := framework.Client().List(ctx, &reqs, client.InNamespace(ns), client.MatchingLabels{requester.NodeLabel: doomed}); err != nil {
			return false, "", err
		}
		owned := 0
		for _, r := range reqs.Items {
			for _, o := range r.OwnerReferences {
				if o.Kind == "Pod" && o.UID == r.Spec.Target.Pod.UID && o.BlockOwnerDeletion == nil {
					owned++
				}
			}
		}
		return len(reqs.Items) == 2 && owned == 2, fmt.Sprintf("%d requests, %d owned by their pods", len(reqs.Items), owned), nil
	})

	// nodemaint down: whatever is collected now is the garbage collector's doing.
	ctl.Stop()
	if err := framework.Cluster().DeleteNode(t.Context(), doomed); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The pod garbage collector waits 40s before it deletes the pods of a node gone.
	testutil.Eventually(t, 3*time.Minute, "the pods gone, and nothing of nodemaint's left", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := framework.Client().List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		left, err := leftovers(ctx, ns, doomed)
		return len(pods.Items) == 0 && len(left) == 0, fmt.Sprintf("%d pods, left %v", len(pods.Items), left), err
	})
	t.Logf("the node's pods and nodemaint's requests gone %s after the node's deletion", time.Since(start).Round(time.Second))
	// Again for the maintenance's cleanup (its finalizer).
	ctl.Start()
}
