//go:build minkube

// Package minkube installs nodemaint's CRDs and admission policies into the kube-apiserver of the
// oldest Kubernetes the README names (`make verify-min-kube`: KUBEBUILDER_ASSETS from
// hack/min-kube.sh, MIN_KUBE_VERSION): every CEL rule must compile there, every policy type-check,
// and objects must be accepted and refused by those rules as on the current version. Built only
// with the minkube tag: building that kube-apiserver takes minutes, so make test leaves it out.
//
// A policy's type-checking (its status.typeChecking) is kube-controller-manager's: the test runs
// that version's, from KUBEBUILDER_ASSETS beside its kube-apiserver, with only that controller.
package minkube

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testenv"
	testmanifests "github.com/nodemaint/nodemaint/test/manifests"
)

func TestMinimumKubernetes(t *testing.T) {
	want := os.Getenv("MIN_KUBE_VERSION")
	if want == "" {
		t.Fatal("MIN_KUBE_VERSION is not set: run make verify-min-kube")
	}
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	minor := want[:strings.LastIndex(want, ".")] // v1.32
	if !strings.Contains(string(readme), "Kubernetes "+strings.TrimPrefix(minor, "v")+" or later") {
		t.Errorf("README.md does not say Kubernetes %s or later", strings.TrimPrefix(minor, "v"))
	}

	// The CRDs of config/crd/bases, installed by testenv: their rules compiled.
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != want {
		t.Fatalf("kube-apiserver %s, want %s: KUBEBUILDER_ASSETS must be hack/min-kube.sh's", v.GitVersion, want)
	}
	t.Logf("kube-apiserver %s", v.GitVersion)
	ctx := t.Context()
	c := env.Client
	startControllerManager(t, env.Config)

	// The CRDs' rules run: a valid maintenance is accepted, an invalid one refused by its rules
	// (format.qualifiedName, of Kubernetes 1.31's CEL library, is what needs 1.32: an API server
	// compiles new rules with its previous version's libraries).
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "valid"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "nodemaint.dev/pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}},
			Cordon: true, Drain: true,
			DrainTimeout:       &nodemaintv1alpha1.Duration{Duration: 30 * time.Minute},
			DrainTimeoutAction: nodemaintv1alpha1.DrainTimeoutActionDelete,
			PodSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if err := c.Create(ctx, nm); err != nil {
		t.Fatalf("a valid NodeMaintenance: %v", err)
	}
	bad := nm.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "invalid"}
	bad.Spec.Cordon = false
	bad.Spec.PodSelector.MatchLabels = map[string]string{"not a label!": "x"}
	err = c.Create(ctx, bad)
	for _, want := range []string{"drain: true requires cordon: true", "every key must be a valid label key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an invalid NodeMaintenance: %v; want refused with %q", err, want)
		}
	}

	// The admission policies of config/admission (and their bindings and params), and the Helm
	// chart's with every opt-in policy (their copies, and the chart's own priority-class): each
	// type-checks against the CRD, with no warning. The eviction-responder component needs 1.37
	// (its MutatingAdmissionPolicy and the EvictionRequest API), as the README says.
	sources := map[string][]*unstructured.Unstructured{}
	for _, dir := range []string{"", "controller-writes", "node-scope"} {
		path := filepath.Join("config", "admission", dir)
		objs, err := testmanifests.Read(filepath.Join(testenv.RepoRoot(), path))
		if err != nil {
			t.Fatal(err)
		}
		sources[path] = objs
	}
	chart, err := helmTemplate(chartRelease, chartNamespace, "--set", "fullnameOverride="+chartRelease+"-controller",
		"--set", "priorityClass.create=true", "--set", "admissionPolicies.nodeScope.enabled=true",
		"--set", "admissionPolicies.evictionResponder.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range chart {
		if obj.GetKind() != "CustomResourceDefinition" { // those of config/crd/bases, installed
			sources["charts/nodemaint"] = append(sources["charts/nodemaint"], obj)
		}
	}
	var policies int
	for _, source := range slices.Sorted(maps.Keys(sources)) {
		for _, obj := range sources[source] {
			if obj.GetNamespace() != "" {
				ensureNamespace(t, c, obj.GetNamespace())
			}
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("%s: %s %s: %v", source, obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetKind() == "ValidatingAdmissionPolicy" {
				typeChecked(t, c, obj)
				policies++
			}
		}
	}
	if policies < 7 {
		t.Errorf("%d policies type-checked, want config/admission's 3 and the chart's 4", policies)
	}
	// The chart's PriorityClass is refused to a pod outside its release's namespace.
	ensureNamespace(t, c, "tenant")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "priority"},
		Spec:       corev1.PodSpec{PriorityClassName: chartRelease + "-controller", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	var refused error
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		refused = c.Create(ctx, pod.DeepCopy(), client.DryRunAll)
		return refused != nil && strings.Contains(refused.Error(), "only pods in namespace "+chartNamespace), nil
	})
	if refused == nil || !strings.Contains(refused.Error(), "only pods in namespace "+chartNamespace) {
		t.Errorf("a tenant's pod of the chart's PriorityClass: %v; want refused by %s-priority-class", refused, chartRelease)
	}
	// The Delete policy is enforced: a user who may not delete pods may not widen a Delete
	// maintenance (nm), whose podSelector it removes; the node-scope policies let it maintain
	// nm's pool.
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	grantNodeMaintenances(t, c, "alice")
	alice, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"podSelector":null}}`))
	var last error
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = alice.Patch(ctx, nm.DeepCopy(), patch, client.DryRunAll)
		return last != nil && strings.Contains(last.Error(), "not change its podSelector"), nil
	})
	if last == nil || !strings.Contains(last.Error(), "not change its podSelector") {
		t.Errorf("alice removing the podSelector of a Delete maintenance: %v; want refused by nodemaint-drain-timeout-delete", last)
	}
}

// typeChecked waits until the API server type-checked the policy obj and fails on any warning.
func typeChecked(t *testing.T, c client.Client, obj *unstructured.Unstructured) {
	t.Helper()
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: obj.GetName()}, &policy)
		return err == nil && policy.Status.ObservedGeneration == policy.Generation && policy.Status.TypeChecking != nil, nil
	})
	if err != nil {
		t.Fatalf("policy %s not type-checked: %v", obj.GetName(), err)
	}
	for _, w := range policy.Status.TypeChecking.ExpressionWarnings {
		t.Errorf("policy %s: %s: %s", obj.GetName(), w.FieldRef, w.Warning)
	}
	t.Logf("policy %s type-checked", obj.GetName())
}

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// grantNodeMaintenances lets user change NodeMaintenances of the pool a (the node-scope
// policies'), and nothing else.
func grantNodeMaintenances(t *testing.T, c client.Client, user string) {
	t.Helper()
	for _, manifest := range []string{`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: nodemaintenances-editor}
rules:
- apiGroups: [nodemaint.dev]
  resources: [nodemaintenances]
  verbs: [get, patch, update]
- apiGroups: [nodemaint.dev]
  resources: [nodepools]
  resourceNames: [a]
  verbs: [maintain]`, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nodemaintenances-editor}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nodemaintenances-editor}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: ` + user + `}`} {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(t.Context(), &obj); err != nil {
			t.Fatal(err)
		}
	}
}

// The release the chart is rendered as: its policies are <chartRelease>-*, beside config/'s
// nodemaint-*.
const chartRelease, chartNamespace = "chart", "chart-system"

// helmTemplate renders charts/nodemaint as release in namespace with HELM (make verify-min-kube
// sets it, as make test-e2e does).
func helmTemplate(release, namespace string, args ...string) ([]*unstructured.Unstructured, error) {
	helm := os.Getenv("HELM")
	if helm == "" {
		return nil, fmt.Errorf("HELM is not set: run make verify-min-kube")
	}
	args = append([]string{"template", release, filepath.Join(testenv.RepoRoot(), "charts", "nodemaint"), "--namespace", namespace}, args...)
	cmd := exec.Command(helm, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return testmanifests.Decode(bytes.NewReader(out))
}

// startControllerManager runs the kube-controller-manager of KUBEBUILDER_ASSETS against the API
// server of cfg (envtest's admin) with only the controller that type-checks admission policies,
// until the test ends.
func startControllerManager(t *testing.T, cfg *rest.Config) {
	t.Helper()
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kube-controller-manager (hack/min-kube.sh builds it): %v", err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"envtest": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"admin": {
			ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"envtest": {Cluster: "envtest", AuthInfo: "admin"}},
		CurrentContext: "envtest",
	}, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Its secure port, which cannot be turned off: a free one on loopback.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--controllers=validatingadmissionpolicy-status-controller",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+dir,
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := testenv.StartTied(cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			if b, err := os.ReadFile(log.Name()); err == nil {
				t.Logf("kube-controller-manager's log:\n%s", b)
			}
		}
		_ = log.Close()
	})
}
