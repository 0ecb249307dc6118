package framework

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nodemaint/nodemaint/internal/controller/deployment"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

var (
	evictionResponderPolicyOnce sync.Once
	evictionResponderPolicyErr  error
)

// InstallEvictionResponderPolicy installs config/admission/eviction-responder, the
// MutatingAdmissionPolicy that registers nodemaint's Deployment responder in the
// spec.evictionResponders of Deployments' pods, once per package, and waits until it is in
// force. A cluster that asks through EvictionRequests needs it for Deployments to be surged.
func InstallEvictionResponderPolicy(t *testing.T) {
	t.Helper()
	evictionResponderPolicyOnce.Do(func() { evictionResponderPolicyErr = installEvictionResponderPolicy(t) })
	if evictionResponderPolicyErr != nil {
		t.Fatal(evictionResponderPolicyErr)
	}
}

func installEvictionResponderPolicy(t *testing.T) error {
	policy, binding, err := evictionResponderPolicy()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := adminClient.Create(ctx, policy); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := adminClient.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	waitEvictionResponderPolicy(t, true)
	return nil
}

// evictionResponderPolicy reads config/admission/eviction-responder's policy and binding.
func evictionResponderPolicy() (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	dir := filepath.Join(repoRoot, "config", "admission", "eviction-responder")
	var policy admissionregistrationv1.MutatingAdmissionPolicy
	var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
	for name, obj := range map[string]any{"eviction_responder_policy.yaml": &policy, "eviction_responder_binding.yaml": &binding} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, nil, err
		}
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			return nil, nil, err
		}
	}
	return &policy, &binding, nil
}

// waitEvictionResponderPolicy waits until a Deployment's pod created now gets the Deployment
// responder (in force) or does not: the admission plugin learns of the policy's changes through
// an informer.
func waitEvictionResponderPolicy(t *testing.T, inForce bool) {
	t.Helper()
	ns := Namespace(t)
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{"pod-template-hash": "probe"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "probe",
				UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	what := "the MutatingAdmissionPolicy in force"
	if !inForce {
		what = "the MutatingAdmissionPolicy no longer in force"
	}
	testutil.Eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, string, error) {
		p := probe.DeepCopy()
		if err := adminClient.Create(ctx, p, client.DryRunAll); err != nil {
			return false, "", err
		}
		return slices.ContainsFunc(p.Spec.EvictionResponders, func(r corev1.EvictionResponder) bool { return r.Name == deployment.EvictionResponder }) == inForce, "", nil
	})
}

// BeforeEvictionResponderPolicy runs create as before config/admission/eviction-responder was
// installed: the policy's binding is deleted while it runs and created again after, so that the
// pods create makes name no responder, as those of workloads created before nodemaint was installed
// (or installed without the policy).
func BeforeEvictionResponderPolicy(t *testing.T, create func()) {
	t.Helper()
	_, binding, err := evictionResponderPolicy()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := adminClient.Delete(ctx, binding.DeepCopy()); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	waitEvictionResponderPolicy(t, false)
	create()
	if err := adminClient.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitEvictionResponderPolicy(t, true)
}
