package install

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	testmanifests "github.com/nodemaint/nodemaint/test/manifests"
)

// podDeletionTimeout bounds the wait for the controller to learn a change of its permission to
// delete pods: a few of its checks (--permission-check-interval=1s) and a status write.
const podDeletionTimeout = 30 * time.Second

// TestPodDeletionOptIn: the controller runs with the RBAC the install gives it, which does not let
// it delete pods. A NodeMaintenance that asks for drainTimeoutAction: Delete says so in its status
// (PodDeletionGranted=False, PodDeletionNotGranted) and a Warning Event. Once the opt-in
// component config/pod-deletion is applied the controller learns it, without a restart, and the
// status says the deletions will happen; once it is removed, that they will not.
func TestPodDeletionOptIn(t *testing.T) {
	admin := framework.Client()
	c := framework.NewController(t)
	c.Start("--permission-check-interval=1s")
	if got := canI(t, "system:serviceaccount:"+framework.ControllerNamespace+":"+framework.ControllerServiceAccount, "delete", "pods", "-A"); got != "no" {
		t.Fatalf("the controller may delete pods without the opt-in: %s", got)
	}

	nm := deleting("pod-deletion-" + strings.TrimPrefix(framework.Namespace(t), "e2e-"))
	create(t, admin, nm)
	waitPodDeletionGranted(t, nm.Name, metav1.ConditionFalse, nodemaintv1alpha1.ReasonPodDeletionNotGranted)
	testutil.Eventually(t, podDeletionTimeout, "Warning PodDeletionNotGranted", func(ctx context.Context) (bool, string, error) {
		var events eventsv1.EventList
		if err := admin.List(ctx, &events); err != nil {
			return false, "", err
		}
		for _, e := range events.Items {
			if e.Reason == nodemaintv1alpha1.ReasonPodDeletionNotGranted && e.Type == corev1.EventTypeWarning && e.Regarding.Name == nm.Name {
				return true, "", nil
			}
		}
		return false, "", nil
	})

	objs, err := testmanifests.Read(repoPath("config", "pod-deletion"))
	if err != nil || len(objs) != 2 {
		t.Fatalf("config/pod-deletion: %d objects, %v", len(objs), err)
	}
	framework.Apply(t, "config/pod-deletion")
	t.Cleanup(func() {
		for _, obj := range objs {
			if err := admin.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	})
	waitPodDeletionGranted(t, nm.Name, metav1.ConditionTrue, nodemaintv1alpha1.ReasonPodDeletionGranted)

	for _, obj := range objs {
		if obj.GetKind() == "ClusterRoleBinding" {
			if err := admin.Delete(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitPodDeletionGranted(t, nm.Name, metav1.ConditionFalse, nodemaintv1alpha1.ReasonPodDeletionNotGranted)
}

// waitPodDeletionGranted waits until the NodeMaintenance's PodDeletionGranted condition has the
// status and reason.
func waitPodDeletionGranted(t *testing.T, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testutil.Eventually(t, podDeletionTimeout, "PodDeletionGranted "+string(status)+", "+reason, func(ctx context.Context) (bool, string, error) {
		var nm nodemaintv1alpha1.NodeMaintenance
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: name}, &nm); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionPodDeletionGranted)
		return c != nil && c.Status == status && c.Reason == reason, "", nil
	})
}
