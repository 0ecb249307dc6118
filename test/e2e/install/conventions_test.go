package install

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// leaseName is the controller's leader election Lease (cmd/nodemaint-controller).
const leaseName = "nodemaint-controller.nodemaint.dev"

// TestKustomizeNamespaceOverlay renders config/default as a user's overlay with
// `namespace: <ns>` does: the Deployment, its ServiceAccount and the leader-election Role
// and RoleBinding move to that namespace, and the controller's Lease with them (the Deployment
// names no other namespace: the controller takes its own, from the downward API). Then the
// controller runs as that overlay's ServiceAccount, with the overlay's Role, and takes its Lease
// there.
func TestKustomizeNamespaceOverlay(t *testing.T) {
	ns := framework.Namespace(t)
	overlay := t.TempDir()
	kustomization := fmt.Sprintf("namespace: %s\nresources:\n- %s\n", ns, relTo(t, overlay, repoPath("config", "default")))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := parse(t, renderKustomize(t, overlay))

	var d appsv1.Deployment
	decode(t, objs["Deployment/"+ns+"/"+controller], &d)
	c := d.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--leader-election-namespace="); ok && v != ns {
			t.Errorf("the Deployment in %s passes %s: its Lease would be forbidden there", ns, a)
		}
	}
	if i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAMESPACE" }); i < 0 ||
		c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("the Deployment's env %+v: want POD_NAMESPACE from metadata.namespace", c.Env)
	}
	var role rbacv1.Role
	decode(t, objs["Role/"+ns+"/nodemaint-leader-election"], &role)
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "leases") }) {
		t.Errorf("the leader-election Role in %s grants no leases: %+v", ns, role.Rules)
	}
	var rb rbacv1.RoleBinding
	decode(t, objs["RoleBinding/"+ns+"/nodemaint-leader-election"], &rb)
	if want := (rbacv1.Subject{Kind: "ServiceAccount", Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: ns}); !slices.Equal(rb.Subjects, []rbacv1.Subject{want}) {
		t.Errorf("the leader-election RoleBinding's subjects %+v, want %+v", rb.Subjects, want)
	}
	for k, obj := range objs {
		if obj.GetNamespace() != "" && obj.GetNamespace() != ns {
			t.Errorf("%s is not in the overlay's namespace %s", k, ns)
		}
	}

	// The overlay's ServiceAccount, Role and RoleBinding in ns; its ClusterRole as the framework
	// installed it (config/rbac), bound to that ServiceAccount by the test.
	var manifests strings.Builder
	for _, k := range []string{"ServiceAccount/" + ns + "/" + controller, "Role/" + ns + "/nodemaint-leader-election", "RoleBinding/" + ns + "/nodemaint-leader-election"} {
		b, err := objs[k].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		manifests.Write(b)
		manifests.WriteString("\n")
	}
	apply(t, manifests.String(), nil)
	create(t, framework.Client(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + controller},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: controller},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: controller, Namespace: ns}},
	})
	token, err := framework.ServiceAccountToken(t.Context(), ns, controller)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := framework.Cluster().WriteKubeconfig(kubeconfig, &clientcmdapi.AuthInfo{Token: token}); err != nil {
		t.Fatal(err)
	}

	// As the Deployment runs it: its namespace from the downward API, no namespace flag.
	binary := filepath.Join(os.Getenv("NODEMAINT_BIN_DIR"), "nodemaint-controller")
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("no nodemaint-controller binary (make build; NODEMAINT_BIN_DIR): %v", err)
	}
	logPath := filepath.Join(t.TempDir(), "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(binary, "--kubeconfig="+kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+ns)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("nodemaint-controller's log:\n%s", b)
		}
	})
	var lease coordinationv1.Lease
	testutil.Eventually(t, time.Minute, "the controller's Lease in "+ns, func(ctx context.Context) (bool, string, error) {
		select {
		case <-exited:
			return false, "", fmt.Errorf("nodemaint-controller exited: %v", cmd.ProcessState)
		default:
		}
		err := framework.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: leaseName}, &lease)
		return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "", "", client.IgnoreNotFound(err)
	})
	t.Logf("Lease %s/%s held by %s", ns, leaseName, ptr.Deref(lease.Spec.HolderIdentity, ""))
}

// TestHelmChartAffinity: the replicas' anti-affinity is preferred by default, required or none on
// request, and an affinity of the user's with its own podAntiAffinity is kept as given.
func TestHelmChartAffinity(t *testing.T) {
	deployment := func(args ...string) corev1.PodSpec {
		var d appsv1.Deployment
		decode(t, parse(t, helmTemplate(t, args...))["Deployment/"+namespace+"/"+controller], &d)
		return d.Spec.Template.Spec
	}
	spec := deployment("--set", "podAntiAffinity=required")
	if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil {
		t.Errorf("podAntiAffinity=required: affinity %+v, want a pod anti-affinity", a)
	} else {
		required, preferred := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		if len(required) != 1 {
			t.Errorf("podAntiAffinity=required: required terms %+v, want one", required)
		} else if !antiAffine(required[0], map[string]string{"app.kubernetes.io/name": controller, "app.kubernetes.io/instance": release}) {
			t.Errorf("podAntiAffinity=required: required term %+v, want the release's pods one per node", required[0])
		}
		if len(preferred) != 0 {
			t.Errorf("podAntiAffinity=required: preferred terms %+v, want none", preferred)
		}
	}
	if spec := deployment("--set", "podAntiAffinity=none"); spec.Affinity != nil {
		t.Errorf("podAntiAffinity=none: affinity %+v", spec.Affinity)
	}
	spec = deployment("--set", "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
		"--set", "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey=topology.kubernetes.io/zone",
		"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
		"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists")
	if a := spec.Affinity; a == nil || a.NodeAffinity == nil {
		t.Errorf("an affinity of the user's: %+v, want its node affinity", a)
	}
	if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("an affinity of the user's: %+v, want its pod anti-affinity by zone", a)
	}
	// The user's nodeSelector adds to kubernetes.io/os: linux.
	spec = deployment("--set", "nodeSelector.pool=infra")
	if spec.NodeSelector[corev1.LabelOSStable] != "linux" {
		t.Errorf("nodeSelector %v, want %s: linux", spec.NodeSelector, corev1.LabelOSStable)
	}
	if spec.NodeSelector["pool"] != "infra" {
		t.Errorf("nodeSelector %v, want pool: infra", spec.NodeSelector)
	}
}

// TestPriorityClassScoped: no tenant's pod can run at the controller's priority. By default
// there is no PriorityClass to name; with priorityClass.create the chart's class comes with a
// policy that refuses it to pods outside the release namespace; the release's own pods, and the
// tenant's without it, are admitted.
func TestPriorityClassScoped(t *testing.T) {
	ctx := t.Context()
	tenant, own := framework.Namespace(t), framework.Namespace(t)
	name := own + "-controller"
	pod := func(ns, class string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "priority-"},
			Spec:       corev1.PodSpec{PriorityClassName: class, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
		}
	}
	// As installed by default: the class does not exist.
	if err := framework.Client().Create(ctx, pod(tenant, controller), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "no PriorityClass with name "+controller) {
		t.Errorf("a tenant's pod naming PriorityClass %s on a default install: %v; want refused, no such class", controller, err)
	}

	// The chart's class and policy, rendered for release namespace own.
	objs := parse(t, helmTemplateIn(t, own, "--set", "priorityClass.create=true", "--set", "fullnameOverride="+name))
	var manifests strings.Builder
	for _, k := range []string{"PriorityClass/" + name, "ValidatingAdmissionPolicy/" + own + "-priority-class", "ValidatingAdmissionPolicyBinding/" + own + "-priority-class"} {
		if objs[k] == nil {
			t.Fatalf("priorityClass.create renders no %s", k)
		}
		b, err := objs[k].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		manifests.Write(b)
		manifests.WriteString("\n")
	}
	var d appsv1.Deployment
	decode(t, objs["Deployment/"+own+"/"+name], &d)
	if d.Spec.Template.Spec.PriorityClassName != name {
		t.Errorf("priorityClass.create: the Deployment's priorityClassName %q, want %s", d.Spec.Template.Spec.PriorityClassName, name)
	}
	apply(t, manifests.String(), nil)
	expectTypeChecked(t, own+"-priority-class")

	// Refused in the tenant's namespace, whoever creates the pod (here a cluster admin, as the
	// ReplicaSet controller would for a tenant's Deployment).
	want := "the PriorityClass " + name + " is nodemaint-controller's: only pods in namespace " + own + " may use it"
	testutil.Eventually(t, policyTimeout, "the policy refusing the class in "+tenant, func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Create(ctx, pod(tenant, name), client.DryRunAll)
		if err != nil && !strings.Contains(err.Error(), want) {
			return false, "", err
		}
		return err != nil, "", nil
	})
	expectRefused(t, framework.Client().Create(ctx, pod(tenant, name)), want)
	for what, p := range map[string]*corev1.Pod{
		"the release namespace's pod": pod(own, name),
		"a tenant's pod of no class":  pod(tenant, ""),
	} {
		if err := framework.Client().Create(ctx, p, client.DryRunAll); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}
