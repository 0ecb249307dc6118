package framework

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testutil"
)

const (
	// DeploymentTimeout bounds the wait for a Deployment to become available.
	DeploymentTimeout = time.Minute
	// NamespaceDeleteTimeout bounds the wait for the pods of a test's namespace to be deleted.
	NamespaceDeleteTimeout = 5 * time.Minute
)

// Namespace creates a namespace for the test and returns its name once pods can be created
// in it. When the test ends, the namespace is deleted, and its pods waited for.
func Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	if err := adminClient.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := adminClient.Delete(ctx, ns); err != nil {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
			return
		}
		// Tests share the nodes: the next test starts once this one's pods are gone. Deleting
		// them is faster than waiting for the namespace controller to do it, and the
		// terminating namespace takes no new ones.
		// Thousands of pods may take longer than one request may: the API server goes on
		// deleting them after it answers with a time-out, or resets the HTTP/2 stream. Either
		// way the namespace controller deletes what is left; the wait below is what counts.
		if err := adminClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name)); err != nil {
			t.Logf("deleting the pods of namespace %s: %v; waiting for the namespace controller", ns.Name, err)
		}
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, NamespaceDeleteTimeout, true, func(ctx context.Context) (bool, error) {
			var pods corev1.PodList
			err := adminClient.List(ctx, &pods, client.InNamespace(ns.Name))
			return len(pods.Items) == 0, err
		})
		if err != nil {
			t.Errorf("pods of namespace %s not deleted: %v", ns.Name, err)
		}
	})
	// The ServiceAccount admission plugin rejects pods until the default ServiceAccount exists.
	testutil.Eventually(t, 30*time.Second, "ServiceAccount default in "+ns.Name, func(ctx context.Context) (bool, string, error) {
		return true, "", adminClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns.Name
}

// NewDeployment returns a Deployment of replicas pods labelled app=name, for CreateDeployment
// to create after the test adjusted it.
func NewDeployment(namespace, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
}

// CreateDeployment creates d and waits until it is available.
func CreateDeployment(t testing.TB, d *appsv1.Deployment) {
	t.Helper()
	if err := adminClient.Create(t.Context(), d); err != nil {
		t.Fatalf("creating Deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	WaitDeploymentAvailable(t, d.Namespace, d.Name)
}

// WaitDeploymentAvailable waits until the Deployment's rollout is complete: every replica
// is updated and available, and no other pod is left.
func WaitDeploymentAvailable(t testing.TB, namespace, name string) {
	t.Helper()
	testutil.Eventually(t, DeploymentTimeout, "Deployment "+namespace+"/"+name+" available", func(ctx context.Context) (bool, string, error) {
		var d appsv1.Deployment
		if err := adminClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil {
			return false, "", err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.Replicas == want &&
			s.UpdatedReplicas == want && s.AvailableReplicas == want, "", nil
	})
}

// Kubectl runs the cluster's kubectl as cluster admin and returns its combined output.
func Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	t.Logf("kubectl %s", strings.Join(args, " "))
	cmd := exec.Command(filepath.Join(cluster.BinDir(), "kubectl"), args...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+cluster.Kubeconfig())
	out, err := cmd.CombinedOutput()
	return string(out), err
}
