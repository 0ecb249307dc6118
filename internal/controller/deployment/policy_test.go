package deployment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/nodemaint/nodemaint/internal/testutil"
)

// TestEvictionResponderPolicy: on kube-apiserver with KEP-4563's API, the MutatingAdmissionPolicy
// of config/admission/eviction-responder registers the responder (EvictionResponder, priority
// 10000) on the pods a Deployment's ReplicaSet creates, after the pod's own responders; it leaves
// alone pods of no ReplicaSet and pods that already name the responder.
func TestEvictionResponderPolicy(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "admission", "eviction-responder")
	var policy admissionregistrationv1.MutatingAdmissionPolicy
	var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
	for name, obj := range map[string]any{"eviction_responder_policy.yaml": &policy, "eviction_responder_binding.yaml": &binding} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// failurePolicy Ignore would hide a policy that does not apply: fail here instead.
	policy.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)

	env := &envtest.Environment{}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("feature-gates", "EvictionRequestAPI=true")
	args.Set("runtime-config", "lifecycle.k8s.io/v1alpha1=true")
	cfg := testutil.APIServer(t, env)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	n := 0
	create := func(t *testing.T, ofReplicaSet bool, own ...corev1.EvictionResponder) []corev1.EvictionResponder {
		t.Helper()
		n++
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: "default", Labels: map[string]string{"pod-template-hash": "5d4f8c"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}, EvictionResponders: own},
		}
		if ofReplicaSet {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4f8c",
				UID: "11111111-1111-1111-1111-111111111111", Controller: ptr.To(true)}}
		}
		got, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Spec.EvictionResponders
	}
	ours := corev1.EvictionResponder{Name: EvictionResponder, Priority: ptr.To[int32](10000)}
	// The admission plugin learns of the policy through an informer.
	testutil.Eventually(t, 30*time.Second, "a Deployment's pod got its responder", func(context.Context) (bool, string, error) {
		got := create(t, true)
		return slices.ContainsFunc(got, func(r corev1.EvictionResponder) bool { return r.Name == EvictionResponder }), fmt.Sprintf("responders %+v", got), nil
	})
	third := corev1.EvictionResponder{Name: "example.nodemaint.dev/checkpoint", Priority: ptr.To[int32](20000)}
	mine := corev1.EvictionResponder{Name: EvictionResponder, Priority: ptr.To[int32](5000)}
	for name, tc := range map[string]struct {
		ofReplicaSet bool
		own          []corev1.EvictionResponder
		want         []corev1.EvictionResponder
	}{
		"a Deployment's pod":             {ofReplicaSet: true, want: []corev1.EvictionResponder{ours}},
		"after the pod's own responders": {ofReplicaSet: true, own: []corev1.EvictionResponder{third}, want: []corev1.EvictionResponder{third, ours}},
		"already named by the pod":       {ofReplicaSet: true, own: []corev1.EvictionResponder{mine}, want: []corev1.EvictionResponder{mine}},
		"not a ReplicaSet's pod":         {want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			got := create(t, tc.ofReplicaSet, tc.own...)
			if !slices.EqualFunc(got, tc.want, func(a, b corev1.EvictionResponder) bool {
				return a.Name == b.Name && ptr.Deref(a.Priority, -1) == ptr.Deref(b.Priority, -1)
			}) {
				t.Errorf("evictionResponders = %+v; want %+v", got, tc.want)
			}
		})
	}
}
