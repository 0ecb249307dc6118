package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodemaint/nodemaint/internal/controller/observe"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// The node controller's pod writes apply to the pod it observed only (promise 6). Each test
// reads a pod, lets the cluster move on, and drives the write with the pod as read, as a
// reconcile decided from a cache that had not caught up would.

// podWriter is a node reconciler used only for its pod writes.
func podWriter() *Reconciler {
	return &Reconciler{Client: k8s, Recorder: events.NewFakeRecorder(10), Observer: &observe.Observer{}}
}

// setRequest sets an EvacuationRequest with the reason on the stored pod, as a requester would.
func setRequest(t *testing.T, pod *corev1.Pod, reason string) {
	t.Helper()
	cond := corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: reason,
		Message: "asked by " + reason, LastTransitionTime: metav1.Now()}
	cur := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	orig := cur.DeepCopy()
	evacuation.SetCondition(cur, cond)
	if err := k8s.Status().Patch(context.Background(), cur, client.StrategicMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func readPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	cur := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

// TestRequestNotForPodRecreatedUnderSameName: a pod deleted and created again under the same
// name (a StatefulSet's) between nodemaint's read and its write is another pod: it does not get
// the request decided for the old one.
func TestRequestNotForPodRecreatedUnderSameName(t *testing.T) {
	ctx := context.Background()
	old := createPod(t, "sts-0", "podwrites-unselected")
	testutil.DeletePod(k8s, old)
	eventually(t, "the old pod gone", func(ctx context.Context) (bool, string, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{})
		return client.IgnoreNotFound(err) == nil && err != nil, "", client.IgnoreNotFound(err)
	})
	recreated := createPod(t, "sts-0", "podwrites-unselected")
	if recreated.UID == old.UID {
		t.Fatal("the pod was not created again")
	}

	again, err := podWriter().patchPods(ctx, []*corev1.Pod{old}, ptr.To("kernel upgrade"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if again == 0 {
		t.Error("the write to a pod created again was not reported refused (stale)")
	}
	if c := evacuation.Condition(readPod(t, recreated), evacuation.Request); c != nil {
		t.Errorf("the pod created again under the old one's name got the request: %+v", c)
	}
}

// TestRequestKeepsRequestSetAfterRead: another requester's request set after nodemaint read
// the pod is not overwritten by nodemaint's.
func TestRequestKeepsRequestSetAfterRead(t *testing.T) {
	ctx := context.Background()
	pod := createPod(t, "web-req", "podwrites-unselected")
	read := readPod(t, pod)
	setRequest(t, pod, "Descheduler")

	if _, err := podWriter().patchPods(ctx, []*corev1.Pod{read}, ptr.To("kernel upgrade"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if c := evacuation.Condition(readPod(t, pod), evacuation.Request); c == nil || c.Reason != "Descheduler" {
		t.Errorf("EvacuationRequest = %+v, want the descheduler's, set after nodemaint's read", c)
	}
}

// TestWithdrawalKeepsAnotherRequest: nodemaint withdraws its own request only. Another
// requester's request (reason Descheduler) set after nodemaint read the pod with its own
// request survives nodemaint's withdrawal; the next look, from the pod as it now is, has
// nothing to withdraw.
func TestWithdrawalKeepsAnotherRequest(t *testing.T) {
	ctx := context.Background()
	pod := createPod(t, "web-wd", "podwrites-unselected")
	setRequest(t, pod, evacuation.ReasonNodeMaintenance)
	read := readPod(t, pod)
	setRequest(t, pod, "Descheduler")

	again, err := podWriter().patchPods(ctx, []*corev1.Pod{read}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if again == 0 {
		t.Error("the withdrawal from a pod changed since the read was not reported refused (stale)")
	}
	if c := evacuation.Condition(readPod(t, pod), evacuation.Request); c == nil || c.Reason != "Descheduler" {
		t.Errorf("EvacuationRequest = %+v, want the descheduler's, set after nodemaint's read", c)
	}

	// Withdrawn from the pod as read now: only nodemaint's own, as before.
	setRequest(t, pod, evacuation.ReasonNodeMaintenance)
	if _, err := podWriter().patchPods(ctx, []*corev1.Pod{readPod(t, pod)}, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if c := evacuation.Condition(readPod(t, pod), evacuation.Request); c != nil {
		t.Errorf("nodemaint's own request was not withdrawn from the pod as read: %+v", c)
	}
}

// TestRefusedRequestNotSentAgain: a request refused because the pod changed since the read is
// not sent again while the pod observed is still the one read (a cache behind the API server):
// no patch reaches the API server, and the node is looked at again later than after the
// refusal itself. From the pod as it now is, the request is written.
func TestRefusedRequestNotSentAgain(t *testing.T) {
	ctx := context.Background()
	pod := createPod(t, "web-behind", "podwrites-unselected")
	read := readPod(t, pod)
	// Another writer changes the pod after the read (a kubelet's report, another controller).
	if err := k8s.Patch(ctx, readPod(t, pod), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"touched":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}

	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	patches := 0
	counted := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	w := podWriter()
	w.Client = counted

	again, err := w.patchPods(ctx, []*corev1.Pod{read}, ptr.To("kernel upgrade"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if patches != 1 || again != observe.StaleRequeue {
		t.Fatalf("first write: %d patches, looked at again in %v; want 1 refused, %v", patches, again, observe.StaleRequeue)
	}
	again, err = w.patchPods(ctx, []*corev1.Pod{read}, ptr.To("kernel upgrade"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if patches != 1 || again != cacheBehindRecheck {
		t.Errorf("from the read refused: %d patches in all, looked at again in %v; want none sent again, %v", patches, again, cacheBehindRecheck)
	}

	again, err = w.patchPods(ctx, []*corev1.Pod{readPod(t, pod)}, ptr.To("kernel upgrade"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if patches != 2 || again != 0 {
		t.Errorf("from the pod as it is: %d patches in all, looked at again in %v; want 2, none", patches, again)
	}
	if c := evacuation.Condition(readPod(t, pod), evacuation.Request); c == nil || c.Reason != evacuation.ReasonNodeMaintenance {
		t.Errorf("EvacuationRequest = %+v, want nodemaint's", c)
	}
}
