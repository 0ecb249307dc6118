package install

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// write is one write of the controller's ServiceAccount to another controller's object.
type write struct {
	name  string
	obj   client.Object
	patch client.Patch
	// status: a patch of the status subresource.
	status bool
	// refused: the words of the refusal; "": allowed.
	refused string
}

// TestControllerWrites: under the policy nodemaint-controller-writes (config/admission, which the
// framework installs for every e2e test, as the installs do), the controller's ServiceAccount may
// still write what nodemaint writes (the responder's surge, markers and autoscaler bounds, the
// pods' deletion cost and evacuation conditions, each as the code writes it), and nothing else:
// not a Deployment's pod template, nor any other field, label or annotation. The same holds for a
// ServiceAccount of that name in another namespace (a kustomize namespace overlay), and for the
// chart's policy (TestHelmInstall). Every write is a dry run: admission runs, nothing changes.
func TestControllerWrites(t *testing.T) {
	ctx := t.Context()
	admin := framework.Client()
	ns := framework.Namespace(t)
	d := framework.NewDeployment(ns, "web", 1)
	framework.CreateDeployment(t, d)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
		},
	}
	create(t, admin, hpa)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	var rss appsv1.ReplicaSetList
	var pods corev1.PodList
	if err := admin.List(ctx, &rss, client.InNamespace(ns)); err != nil || len(rss.Items) != 1 {
		t.Fatalf("ReplicaSets of web: %d, %v", len(rss.Items), err)
	}
	if err := admin.List(ctx, &pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of web: %d, %v", len(pods.Items), err)
	}
	rs, pod := &rss.Items[0], &pods.Items[0]

	sa := "system:serviceaccount:" + framework.ControllerNamespace + ":" + framework.ControllerServiceAccount
	controller := impersonate(t, sa, "system:serviceaccounts", "system:serviceaccounts:"+framework.ControllerNamespace, "system:authenticated")
	template := mergePatch(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example.com/anything:latest"}]}}}}`)
	waitPolicyRefuses(t, controller, d, template, controllerWrites)

	// What nodemaint writes, as it writes it.
	surge := client.RawPatch(types.JSONPatchType, fmt.Appendf(nil, `[{"op":"test","path":"/metadata/generation","value":%d},`+
		`{"op":"replace","path":"/spec/replicas","value":2},`+
		`{"op":"add","path":"/metadata/annotations/nodemaint.dev~1evacuation-surge","value":"{\"originalReplicas\":1,\"surge\":1}"}]`, d.Generation))
	accept := evacuation.ConditionPatch(pod, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "DeploymentSurge"})
	request := evacuation.ConditionPatch(pod, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance})
	cost := evacuation.AnnotationsPatch(pod.UID, map[string]*string{
		corev1.PodDeletionCost: ptr.To("-2147483648"), evacuation.OriginalDeletionCostAnnotation: ptr.To("")})
	statusWithCost := client.RawPatch(types.StrategicMergePatchType, fmt.Appendf(nil,
		`{"metadata":{"uid":%q,"annotations":{%q:"-2147483648"}},"status":{"conditions":[{"type":%q,"status":"True","reason":"DeploymentSurge"}]}}`,
		pod.UID, corev1.PodDeletionCost, evacuation.Initiated))
	allowed := []write{
		{name: "Deployment: surge, replicas and record in one JSON patch", obj: d, patch: surge},
		{name: "Deployment: a marker", obj: d, patch: mergePatch(`{"metadata":{"annotations":{"nodemaint.dev/deployment-replicas-to-evacuate":"1"}}}`)},
		{name: "ReplicaSet: markers", obj: rs, patch: mergePatch(`{"metadata":{"annotations":{"nodemaint.dev/evacuation-ready":"true","nodemaint.dev/replicas-to-evacuate":"1"}}}`)},
		{name: "HorizontalPodAutoscaler: bounds and record", obj: hpa, patch: mergePatch(`{"metadata":{"annotations":{"nodemaint.dev/surge-bounds":"{}"}},"spec":{"minReplicas":2,"maxReplicas":4}}`)},
		{name: "pod: deletion cost", obj: pod, patch: cost},
		{name: "pod status: evacuation request", obj: pod, patch: request, status: true},
		{name: "pod status: acceptance with the deletion cost", obj: pod, patch: statusWithCost, status: true},
		{name: "pod status: acceptance", obj: pod, patch: accept, status: true},
	}
	refused := []write{
		{name: "Deployment: pod template", obj: d, patch: template, refused: "not spec.template"},
		{name: "Deployment: pod template beside replicas", obj: d,
			patch: mergePatch(`{"spec":{"replicas":2,"template":{"metadata":{"labels":{"app":"web","extra":"x"}}}}}`), refused: "not spec.template"},
		{name: "Deployment: minReadySeconds", obj: d, patch: mergePatch(`{"spec":{"minReadySeconds":5}}`), refused: "not spec.minReadySeconds"},
		{name: "Deployment: paused", obj: d, patch: mergePatch(`{"spec":{"paused":true}}`), refused: "not spec.paused"},
		{name: "Deployment: a label", obj: d, patch: mergePatch(`{"metadata":{"labels":{"team":"x"}}}`), refused: "not metadata.labels"},
		{name: "Deployment: another annotation", obj: d, patch: mergePatch(`{"metadata":{"annotations":{"example.com/x":"y"}}}`), refused: "not the annotations example.com/x"},
		{name: "Deployment: a finalizer", obj: d, patch: mergePatch(`{"metadata":{"finalizers":["example.com/x"]}}`), refused: "not metadata.finalizers"},
		{name: "ReplicaSet: replicas", obj: rs, patch: mergePatch(`{"spec":{"replicas":3}}`), refused: "not spec.replicas"},
		{name: "ReplicaSet: pod template", obj: rs, patch: mergePatch(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example.com/anything:latest"}]}}}}`), refused: "not spec.template"},
		{name: "ReplicaSet: owner", obj: rs, patch: mergePatch(`{"metadata":{"ownerReferences":null}}`), refused: "not metadata.ownerReferences"},
		{name: "HorizontalPodAutoscaler: target", obj: hpa, patch: mergePatch(`{"spec":{"scaleTargetRef":{"name":"other"}}}`), refused: "not spec.scaleTargetRef"},
		{name: "pod: image", obj: pod, patch: client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"containers":[{"name":"app","image":"registry.example.com/anything:latest"}]}}`)),
			refused: "not spec.containers"},
		{name: "pod: a label", obj: pod, patch: mergePatch(`{"metadata":{"labels":{"app":"other"}}}`), refused: "not metadata.labels"},
		{name: "pod: another annotation", obj: pod, patch: mergePatch(`{"metadata":{"annotations":{"example.com/x":"y"}}}`), refused: "not the annotations example.com/x"},
		{name: "pod status: a label", obj: pod, patch: mergePatch(`{"metadata":{"labels":{"app":"other"}}}`), status: true, refused: "not metadata.labels"},
		{name: "pod status: Ready", obj: pod, patch: client.RawPatch(types.StrategicMergePatchType, []byte(`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`)),
			status: true, refused: "not status.conditions"},
		{name: "pod status: phase", obj: pod, patch: mergePatch(`{"status":{"phase":"Failed"}}`), status: true, refused: "not status.phase"},
	}
	for _, w := range append(allowed, refused...) {
		t.Run(w.name, func(t *testing.T) { expectWrite(t, controller, w, controllerWrites) })
	}

	// A ServiceAccount nodemaint-controller of another namespace, as a kustomize overlay with its
	// own namespace: installs it, is held to the same writes.
	other := "system:serviceaccount:" + ns + ":" + framework.ControllerServiceAccount
	grantIn(t, ns, other, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}})
	moved := impersonate(t, other, "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	t.Run("another namespace's nodemaint-controller", func(t *testing.T) {
		expectWrite(t, moved, write{obj: d, patch: template, refused: "not spec.template"}, controllerWrites)
		expectWrite(t, moved, write{obj: d, patch: surge}, controllerWrites)
	})
	// Anyone else is not the policy's.
	if err := admin.Patch(ctx, d.DeepCopy(), template, client.DryRunAll); err != nil {
		t.Errorf("cluster admin changing the pod template: %v", err)
	}
}

// expectWrite makes the write as c (a dry run) and fails unless policy refuses it with
// w.refused, or, when w.refused is empty, it is allowed.
func expectWrite(t *testing.T, c client.Client, w write, policy string) {
	t.Helper()
	obj := w.obj.DeepCopyObject().(client.Object)
	var err error
	if w.status {
		err = c.Status().Patch(t.Context(), obj, w.patch, client.DryRunAll)
	} else {
		err = c.Patch(t.Context(), obj, w.patch, client.DryRunAll)
	}
	switch {
	case w.refused == "" && err != nil:
		t.Errorf("refused: %v", err)
	case w.refused == "":
	case err == nil:
		t.Errorf("allowed; want refused by %s with %q", policy, w.refused)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") || !strings.Contains(err.Error(), w.refused):
		t.Errorf("error %v; want Forbidden by %s with %q", err, policy, w.refused)
	default:
		t.Logf("refused: %v", err)
	}
}

// waitPolicyRefuses waits until c's dry-run patch of obj is refused by policy: the admission
// plugin learns of a policy through an informer.
func waitPolicyRefuses(t *testing.T, c client.Client, obj client.Object, patch client.Patch, policy string) {
	t.Helper()
	testutil.Eventually(t, policyTimeout, "policy "+policy+" in force", func(ctx context.Context) (bool, string, error) {
		err := c.Patch(ctx, obj.DeepCopyObject().(client.Object), patch, client.DryRunAll)
		switch {
		case err == nil:
			return false, "", nil
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), policy):
			return true, "", nil
		}
		return false, "", err
	})
	expectTypeChecked(t, policy)
}
