package install

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	testmanifests "github.com/nodemaint/nodemaint/test/manifests"
)

const (
	namespace  = framework.ControllerNamespace
	controller = "nodemaint-controller"
	release    = "nodemaint"
)

// repoRoot is the repository's root directory.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}()

func repoPath(elem ...string) string { return filepath.Join(append([]string{repoRoot}, elem...)...) }

// TestChartMatchesConfig fails when the chart's copies of the generated files differ from
// config/: run `make generate` (hack/sync-chart.sh).
func TestChartMatchesConfig(t *testing.T) {
	pairs := map[string]string{
		"config/rbac/role.yaml":                                            "charts/nodemaint/files/role.yaml",
		"config/rbac/leader_election_role.yaml":                            "charts/nodemaint/files/leader_election_role.yaml",
		"config/rbac/metrics_auth_role.yaml":                               "charts/nodemaint/files/metrics_auth_role.yaml",
		"config/rbac/metrics_reader_role.yaml":                             "charts/nodemaint/files/metrics_reader_role.yaml",
		"config/cluster-api/role.yaml":                                     "charts/nodemaint/files/cluster_api_role.yaml",
		"config/cluster-api/kubeconfig_role.yaml":                          "charts/nodemaint/files/cluster_api_kubeconfig_role.yaml",
		"config/admission/drain_timeout_delete_policy.yaml":                "charts/nodemaint/files/admission/drain_timeout_delete_policy.yaml",
		"config/admission/node-scope/node_scope_policy.yaml":               "charts/nodemaint/files/admission/node_scope_policy.yaml",
		"config/admission/controller-writes/controller_writes_policy.yaml": "charts/nodemaint/files/admission/controller_writes_policy.yaml",
		"config/pod-deletion/role.yaml":                                    "charts/nodemaint/files/pod_deletion_role.yaml",
	}
	for _, role := range userRoles {
		pairs["config/rbac/"+role+".yaml"] = "charts/nodemaint/files/user_roles/" + role + ".yaml"
	}
	crds, err := filepath.Glob(repoPath("config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	for _, crd := range crds {
		pairs[filepath.Join("config/crd/bases", filepath.Base(crd))] = filepath.Join("charts/nodemaint/files/crds", filepath.Base(crd))
	}
	chartCRDs, _ := filepath.Glob(repoPath("charts", "nodemaint", "files", "crds", "*.yaml"))
	if len(chartCRDs) != len(crds) {
		t.Errorf("charts/nodemaint/files/crds has %d files, config/crd/bases %d: run make generate", len(chartCRDs), len(crds))
	}
	for src, dst := range pairs {
		want, err := os.ReadFile(repoPath(src))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(repoPath(dst))
		if err != nil {
			t.Errorf("%v: run make generate", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s: run make generate", dst, src)
		}
	}
}

// TestHelmChart renders the chart with its default values, checks the objects and has the API
// server validate them (server-side apply, dry run).
func TestHelmChart(t *testing.T) {
	out := helmTemplate(t)
	objs := parse(t, out)
	// The CRDs are the release's, upgraded with it, and kept when it is uninstalled, by Helm and
	// by Argo CD.
	for _, crd := range []string{"drainrules.nodemaint.dev", "nodemaintenances.nodemaint.dev"} {
		o := objs["CustomResourceDefinition/"+crd]
		if o == nil {
			t.Errorf("no CRD %s", crd)
			continue
		}
		if o.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s without helm.sh/resource-policy: keep", crd)
		}
		if o.GetAnnotations()["argocd.argoproj.io/sync-options"] != "Delete=false" {
			t.Errorf("CRD %s without argocd.argoproj.io/sync-options: Delete=false", crd)
		}
	}

	wantObjects(t, objs, []string{
		"CustomResourceDefinition/drainrules.nodemaint.dev",
		"CustomResourceDefinition/nodemaintenances.nodemaint.dev",
		"ClusterRole/" + controller,
		"ClusterRoleBinding/" + controller,
		"ClusterRole/" + controller + "-metrics-auth",
		"ClusterRoleBinding/" + controller + "-metrics-auth",
		"ClusterRole/nodemaint-metrics-reader",
		"Role/" + namespace + "/nodemaint-leader-election",
		"RoleBinding/" + namespace + "/nodemaint-leader-election",
		"ServiceAccount/" + namespace + "/" + controller,
		"Deployment/" + namespace + "/" + controller,
		"Service/" + namespace + "/" + controller + "-metrics",
		"PodDisruptionBudget/" + namespace + "/" + controller,
		"ValidatingAdmissionPolicy/" + deleteGuard,
		"ValidatingAdmissionPolicyBinding/" + deleteGuard,
		"ValidatingAdmissionPolicy/" + controllerWrites,
		"ValidatingAdmissionPolicyBinding/" + controllerWrites,
		"ClusterRole/nodemaint-nodemaintenance-viewer",
		"ClusterRole/nodemaint-nodemaintenance-editor",
		"ClusterRole/nodemaint-drainrule-viewer",
		"ClusterRole/nodemaint-drainrule-editor",
	})
	checkRBAC(t, objs)
	checkPolicies(t, objs, "nodemaint", namespace)
	d := checkDeployment(t, objs)
	checkServiceAndPDB(t, objs, d)
	checkImage(t, d)
	if got := ptr.Deref(d.Spec.Replicas, 1); got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--feature-gates") }) {
		t.Errorf("default values pass feature gates: %q", args)
	}

	applyDryRun(t, out)
}

// TestHelmChartValues renders the chart with the values a cluster admin sets.
func TestHelmChartValues(t *testing.T) {
	out := helmTemplate(t,
		"--set", "replicas=3",
		"--set", "featureGates.NodeMaintenanceDeployment=false",
		"--set", "featureGates.DeclarativeNodeMaintenance=true",
		"--set", "extraArgs={--max-concurrent-evictions=50}",
		"--set", "image.tag=v9.9.9",
		"--set", "nodeSelector.node-role\\.kubernetes\\.io/control-plane=",
		"--set", "tolerations[0].key=node-role.kubernetes.io/control-plane",
		"--set", "tolerations[0].operator=Exists",
		"--set", "tolerations[0].effect=NoSchedule",
	)
	objs := parse(t, out)
	d := checkDeployment(t, objs)
	spec := d.Spec.Template.Spec
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 3 {
		t.Errorf("replicas = %d, want 3", got)
	}
	c := spec.Containers[0]
	for _, want := range []string{
		"--feature-gates=DeclarativeNodeMaintenance=true,NodeMaintenanceDeployment=false",
		"--max-concurrent-evictions=50",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	if want := "ghcr.io/nodemaint/nodemaint-controller:v9.9.9"; c.Image != want {
		t.Errorf("image = %s, want %s", c.Image, want)
	}
	if _, ok := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
		t.Errorf("nodeSelector = %v", spec.NodeSelector)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "node-role.kubernetes.io/control-plane" {
		t.Errorf("tolerations = %v", spec.Tolerations)
	}
	applyDryRun(t, out)

	// The admission policies: node scope on, with another label; the Delete guard off.
	out = helmTemplate(t,
		"--set", "admissionPolicies.nodeScope.enabled=true",
		"--set", "admissionPolicies.nodeScope.labelKey=topology.example.com/rack",
		"--set", "admissionPolicies.drainTimeoutDelete.enabled=false",
	)
	objs = parse(t, out)
	if got, want := policyObjects(objs), []string{
		"ConfigMap/" + namespace + "/" + nodeScope,
		"ValidatingAdmissionPolicy/" + controllerWrites,
		"ValidatingAdmissionPolicy/" + nodeScope,
		"ValidatingAdmissionPolicyBinding/" + controllerWrites,
		"ValidatingAdmissionPolicyBinding/" + nodeScope,
	}; !slices.Equal(got, want) {
		t.Errorf("admission objects %q, want %q", got, want)
	}
	checkPolicies(t, objs, "nodemaint", namespace)
	if key, _, _ := unstructured.NestedString(objs["ConfigMap/"+namespace+"/"+nodeScope].Object, "data", "labelKey"); key != "topology.example.com/rack" {
		t.Errorf("node-scope labelKey = %q", key)
	}
	applyDryRun(t, out)

	// One replica: no PodDisruptionBudget, which would block every drain of its node.
	objs = parse(t, helmTemplate(t, "--set", "replicas=1"))
	if _, ok := objs["PodDisruptionBudget/"+namespace+"/"+controller]; ok {
		t.Error("a PodDisruptionBudget for a single replica")
	}
}

// TestHelmChartServiceMonitor renders the chart with the ServiceMonitor. The cluster has no
// prometheus-operator or cert-manager CRDs, so their objects are only checked against the metrics
// Service and the Deployment; everything else is applied.
func TestHelmChartServiceMonitor(t *testing.T) {
	defaults := parse(t, helmTemplate(t))
	if len(kinds(defaults, "ServiceMonitor")) != 0 {
		t.Error("a ServiceMonitor by default")
	}
	if len(kinds(defaults, "Certificate")) != 0 {
		t.Error("a Certificate by default")
	}
	// Enabled alone, it would scrape a self-signed certificate nothing can verify: refused, with
	// the ways out.
	alone, aloneErr := helmTemplateError(t, "--set", "serviceMonitor.enabled=true")
	if aloneErr == nil {
		t.Errorf("serviceMonitor.enabled alone: rendered, want refused\n%s", alone)
	}
	if !strings.Contains(alone, "Prometheus must verify the metrics server's certificate") {
		t.Errorf("serviceMonitor.enabled alone: %v\n%s\nwant the reason: Prometheus must verify the metrics server's certificate", aloneErr, alone)
	}
	if !strings.Contains(alone, "metrics.certManager.enabled=true") {
		t.Errorf("serviceMonitor.enabled alone: %v\n%s\nwant the way out metrics.certManager.enabled=true", aloneErr, alone)
	}

	// cert-manager's certificate, Prometheus' own token through a scrape class.
	out := helmTemplate(t, "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prometheus",
		"--set", "serviceMonitor.scrapeClass=kubernetes-token", "--set", "metrics.certManager.enabled=true")
	objs := parse(t, out)
	sm, ep := serviceMonitorEndpoint(t, objs)
	if sm.GetNamespace() != namespace {
		t.Errorf("ServiceMonitor %s in namespace %s, want %s", sm.GetName(), sm.GetNamespace(), namespace)
	}
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor %s/%s labels %v, want release prometheus", sm.GetNamespace(), sm.GetName(), sm.GetLabels())
	}
	var svc corev1.Service
	decode(t, objs["Service/"+namespace+"/"+controller+"-metrics"], &svc)
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(selector) == 0 || !subset(selector, svc.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select the metrics Service (labels %v)", selector, svc.Labels)
	}
	if ep["port"] != svc.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor port %v, want the metrics Service's port %s", ep["port"], svc.Spec.Ports[0].Name)
	}
	if class, _, _ := unstructured.NestedString(sm.Object, "spec", "scrapeClassName"); class != "kubernetes-token" {
		t.Errorf("scrapeClassName %q, want kubernetes-token", class)
	}
	// No credentials of the ServiceMonitor's own (no long-lived token Secret, no file), the
	// certificate verified with its CA under the Service's name.
	serverName := controller + "-metrics." + namespace + ".svc"
	tlsSecret := controller + "-metrics-tls"
	checkVerified(t, ep, serverName, "secret", tlsSecret)
	scraper := controller + "-metrics-scraper"
	for _, k := range []string{"ServiceAccount/" + namespace + "/" + scraper, "Secret/" + namespace + "/" + scraper, "ClusterRoleBinding/" + scraper} {
		if objs[k] != nil {
			t.Errorf("%s without serviceMonitor.tokenSecret", k)
		}
	}
	// The Certificate names the serverName, into the Secret the controller serves.
	certs := kinds(objs, "Certificate")
	if len(certs) != 1 {
		t.Fatalf("%d Certificates, want 1", len(certs))
	}
	secretName, _, _ := unstructured.NestedString(certs[0].Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(certs[0].Object, "spec", "dnsNames")
	issuer, _, _ := unstructured.NestedStringMap(certs[0].Object, "spec", "issuerRef")
	if secretName != tlsSecret {
		t.Errorf("Certificate secretName %q, want %s", secretName, tlsSecret)
	}
	if !slices.Contains(dnsNames, serverName) {
		t.Errorf("Certificate dnsNames %q, want %s among them", dnsNames, serverName)
	}
	if issuer["name"] != controller+"-selfsigned" {
		t.Errorf("Certificate issuerRef %v, want the chart's self-signed Issuer %s", issuer, controller+"-selfsigned")
	}
	if objs["Issuer/"+namespace+"/"+controller+"-selfsigned"] == nil {
		t.Errorf("no Issuer %s, want the chart's self-signed Issuer", controller+"-selfsigned")
	}
	checkServesCert(t, objs, tlsSecret)
	var rest bytes.Buffer
	for _, obj := range objs {
		if k := obj.GetKind(); k == "ServiceMonitor" || k == "Certificate" || k == "Issuer" {
			continue
		}
		b, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		rest.Write(b)
		rest.WriteString("\n")
	}
	applyDryRun(t, rest.String())

	// The cluster's issuer instead of the chart's.
	objs = parse(t, helmTemplate(t, "--set", "serviceMonitor.enabled=true", "--set", "metrics.certManager.enabled=true",
		"--set", "metrics.certManager.issuerRef.name=cluster-ca", "--set", "metrics.certManager.issuerRef.kind=ClusterIssuer"))
	issuer, _, _ = unstructured.NestedStringMap(kinds(objs, "Certificate")[0].Object, "spec", "issuerRef")
	if issuer["name"] != "cluster-ca" {
		t.Errorf("metrics.certManager.issuerRef: Certificate issuerRef %v, want name cluster-ca", issuer)
	}
	if issuer["kind"] != "ClusterIssuer" {
		t.Errorf("metrics.certManager.issuerRef: Certificate issuerRef %v, want kind ClusterIssuer", issuer)
	}
	if n := len(kinds(objs, "Issuer")); n != 0 {
		t.Errorf("metrics.certManager.issuerRef: %d Issuers, want none", n)
	}
	// A certificate of one's own: mounted, passed, and verified with its ca.crt.
	objs = parse(t, helmTemplate(t, "--set", "serviceMonitor.enabled=true", "--set", "metrics.certSecret=metrics-tls"))
	_, ep = serviceMonitorEndpoint(t, objs)
	checkVerified(t, ep, serverName, "secret", "metrics-tls")
	checkServesCert(t, objs, "metrics-tls")
	if len(kinds(objs, "Certificate")) != 0 {
		t.Error("a Certificate with metrics.certSecret")
	}
	// A CA bundle of the cluster's.
	objs = parse(t, helmTemplate(t, "--set", "serviceMonitor.enabled=true", "--set", "metrics.certSecret=metrics-tls",
		"--set", "serviceMonitor.tlsConfig.ca.configMap.name=cluster-ca", "--set", "serviceMonitor.tlsConfig.ca.configMap.key=ca.crt"))
	_, ep = serviceMonitorEndpoint(t, objs)
	checkVerified(t, ep, serverName, "configMap", "cluster-ca")

	// Opt-ins: no verification; the long-lived token of a scraper ServiceAccount of the chart's.
	objs = parse(t, helmTemplate(t, "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.tlsConfig.insecureSkipVerify=true",
		"--set", "serviceMonitor.tokenSecret=true"))
	_, ep = serviceMonitorEndpoint(t, objs)
	secret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
	if skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); !skip {
		t.Errorf("insecureSkipVerify: endpoint %v, want insecureSkipVerify", ep)
	}
	if secret != scraper {
		t.Errorf("tokenSecret: endpoint %v, want credentials of Secret %s", ep, scraper)
	}
	for _, k := range []string{"ServiceAccount/" + namespace + "/" + scraper, "Secret/" + namespace + "/" + scraper, "ClusterRoleBinding/" + scraper} {
		if objs[k] == nil {
			t.Errorf("serviceMonitor.tokenSecret renders no %s", k)
		}
	}

	// metrics.secure=false: plain HTTP, no token reviews.
	plain := parse(t, helmTemplate(t, "--set", "serviceMonitor.enabled=true", "--set", "metrics.secure=false"))
	_, ep = serviceMonitorEndpoint(t, plain)
	if ep["scheme"] != "http" {
		t.Errorf("metrics.secure=false: endpoint %v, want scheme http", ep)
	}
	if ep["tlsConfig"] != nil {
		t.Errorf("metrics.secure=false: endpoint %v, want no tlsConfig", ep)
	}
	if ep["authorization"] != nil {
		t.Errorf("metrics.secure=false: endpoint %v, want no authorization", ep)
	}
	if plain["ClusterRole/"+controller+"-metrics-auth"] != nil {
		t.Errorf("metrics.secure=false: a metrics-auth ClusterRole, want none")
	}
	if plain["Secret/"+namespace+"/"+scraper] != nil {
		t.Errorf("metrics.secure=false: a scraper Secret, want none")
	}
}

// serviceMonitorEndpoint returns the one ServiceMonitor among objs and its one endpoint.
func serviceMonitorEndpoint(t *testing.T, objs map[string]*unstructured.Unstructured) (*unstructured.Unstructured, map[string]any) {
	t.Helper()
	sms := kinds(objs, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(sms))
	}
	endpoints, _, _ := unstructured.NestedSlice(sms[0].Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want 1", endpoints)
	}
	return sms[0], endpoints[0].(map[string]any)
}

// checkVerified fails unless the ServiceMonitor endpoint ep scrapes over HTTPS and verifies the
// certificate for serverName with the ca.crt of the Secret or ConfigMap (kind) name, and names no
// credentials of its own: Prometheus' scrape class gives them.
func checkVerified(t *testing.T, ep map[string]any, serverName, kind, name string) {
	t.Helper()
	tlsConfig, _, _ := unstructured.NestedMap(ep, "tlsConfig")
	ca, _, _ := unstructured.NestedStringMap(tlsConfig, "ca", kind)
	if ep["scheme"] != "https" {
		t.Errorf("ServiceMonitor endpoint %v: want https", ep)
	}
	if tlsConfig["insecureSkipVerify"] != nil {
		t.Errorf("ServiceMonitor endpoint %v: want no insecureSkipVerify", ep)
	}
	if tlsConfig["serverName"] != serverName {
		t.Errorf("ServiceMonitor endpoint %v: want verified for %s", ep, serverName)
	}
	if ca["name"] != name {
		t.Errorf("ServiceMonitor endpoint %v: want the ca of %s %s", ep, kind, name)
	}
	if ca["key"] != "ca.crt" {
		t.Errorf("ServiceMonitor endpoint %v: want the ca's key ca.crt", ep)
	}
	for _, f := range []string{"authorization", "bearerTokenFile", "bearerTokenSecret", "basicAuth", "oauth2"} {
		if ep[f] != nil {
			t.Errorf("ServiceMonitor endpoint %s %v: want the scrape class's credentials", f, ep[f])
		}
	}
}

// checkServesCert fails unless the controller serves the certificate of Secret secret.
func checkServesCert(t *testing.T, objs map[string]*unstructured.Unstructured, secret string) {
	t.Helper()
	var d appsv1.Deployment
	decode(t, objs["Deployment/"+namespace+"/"+controller], &d)
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--metrics-cert-path=/tmp/k8s-metrics-server/metrics-certs") {
		t.Errorf("the controller does not serve Secret %s: args %q, want --metrics-cert-path=/tmp/k8s-metrics-server/metrics-certs", secret, c.Args)
	}
	if len(c.VolumeMounts) != 1 {
		t.Errorf("the controller does not serve Secret %s: mounts %+v, want one", secret, c.VolumeMounts)
	}
	if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != secret {
		t.Errorf("the controller does not serve Secret %s: volumes %+v, want one of Secret %s", secret, v, secret)
	}
}

// helmTemplateError renders the chart, expecting helm to fail; it returns helm's output.
func helmTemplateError(t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"template", release, repoPath("charts", "nodemaint"), "--namespace", namespace}, args...)
	out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
	return string(out), err
}

// TestKustomize renders config/default, checks the objects as the chart's and applies them
// (dry run); and renders it with the optional prometheus component.
func TestKustomize(t *testing.T) {
	out, err := framework.Kubectl(t, "kustomize", repoPath("config", "default"))
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, out)
	}
	objs := parse(t, out)
	wantObjects(t, objs, []string{
		"Namespace/" + namespace,
		"CustomResourceDefinition/drainrules.nodemaint.dev",
		"CustomResourceDefinition/nodemaintenances.nodemaint.dev",
		"ClusterRole/" + controller,
		"ClusterRoleBinding/" + controller,
		"ClusterRole/" + controller + "-metrics-auth",
		"ClusterRoleBinding/" + controller + "-metrics-auth",
		"ClusterRole/nodemaint-metrics-reader",
		"Role/" + namespace + "/nodemaint-leader-election",
		"RoleBinding/" + namespace + "/nodemaint-leader-election",
		"ServiceAccount/" + namespace + "/" + controller,
		"Deployment/" + namespace + "/" + controller,
		"Service/" + namespace + "/" + controller + "-metrics",
		"PodDisruptionBudget/" + namespace + "/" + controller,
		"ValidatingAdmissionPolicy/" + deleteGuard,
		"ValidatingAdmissionPolicyBinding/" + deleteGuard,
		"ValidatingAdmissionPolicy/" + controllerWrites,
		"ValidatingAdmissionPolicyBinding/" + controllerWrites,
		"ClusterRole/nodemaint-nodemaintenance-viewer",
		"ClusterRole/nodemaint-nodemaintenance-editor",
		"ClusterRole/nodemaint-drainrule-viewer",
		"ClusterRole/nodemaint-drainrule-editor",
	})
	checkRBAC(t, objs)
	checkPolicies(t, objs, "nodemaint", namespace)
	d := checkDeployment(t, objs)
	checkServiceAndPDB(t, objs, d)
	checkImage(t, d)
	for _, crd := range kinds(objs, "CustomResourceDefinition") {
		if crd.GetAnnotations()["argocd.argoproj.io/sync-options"] != "Delete=false" {
			t.Errorf("CRD %s without argocd.argoproj.io/sync-options: Delete=false", crd.GetName())
		}
	}
	applyDryRun(t, out)

	// The prometheus component, as a user's overlay enables it.
	overlay := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(overlay, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kustomization := fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n", rel(repoPath("config", "default")), rel(repoPath("config", "default", "prometheus")))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = framework.Kubectl(t, "kustomize", overlay)
	if err != nil {
		t.Fatalf("kubectl kustomize with the prometheus component: %v\n%s", err, out)
	}
	monitoring := parse(t, out)
	sms := kinds(monitoring, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("the prometheus component gives %d ServiceMonitors, want 1", len(sms))
	}
	if sms[0].GetNamespace() != namespace {
		t.Fatalf("the prometheus component's ServiceMonitor in %s, want in %s", sms[0].GetNamespace(), namespace)
	}
	// Verified against the certificate the controller serves, Prometheus' own token (a scrape
	// class's), its ServiceAccount bound to nodemaint-metrics-reader.
	_, ep := serviceMonitorEndpoint(t, monitoring)
	checkVerified(t, ep, "nodemaint-controller-metrics", "secret", "nodemaint-metrics-tls")
	checkServesCert(t, monitoring, "nodemaint-metrics-tls")
	var binding rbacv1.ClusterRoleBinding
	decode(t, monitoring["ClusterRoleBinding/nodemaint-metrics-reader"], &binding)
	if binding.RoleRef.Name != "nodemaint-metrics-reader" {
		t.Errorf("the prometheus component's reader binding roleRef %+v, want nodemaint-metrics-reader", binding.RoleRef)
	}
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" {
		t.Errorf("the prometheus component's reader binding subjects %+v, want one ServiceAccount", binding.Subjects)
	}
	if sms[0].Object["spec"].(map[string]any)["namespaceSelector"] != nil {
		t.Error("the ServiceMonitor's namespaceSelector would not follow a namespace overlay")
	}

	// With the metrics-cert component, cert-manager issues that Secret for the serverName.
	kustomization = fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n- %s\n", rel(repoPath("config", "default")),
		rel(repoPath("config", "default", "prometheus")), rel(repoPath("config", "default", "metrics-cert")))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err = framework.Kubectl(t, "kustomize", overlay); err != nil {
		t.Fatalf("kubectl kustomize with the metrics-cert component: %v\n%s", err, out)
	}
	certs := kinds(parse(t, out), "Certificate")
	if len(certs) != 1 {
		t.Fatalf("the metrics-cert component gives %d Certificates, want 1", len(certs))
	}
	secretName, _, _ := unstructured.NestedString(certs[0].Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(certs[0].Object, "spec", "dnsNames")
	if secretName != "nodemaint-metrics-tls" {
		t.Errorf("the metrics-cert Certificate: secretName %q, want nodemaint-metrics-tls", secretName)
	}
	if !slices.Contains(dnsNames, "nodemaint-controller-metrics") {
		t.Errorf("the metrics-cert Certificate: dnsNames %q, want nodemaint-controller-metrics among them", dnsNames)
	}

	// The node-scope component, as config/default's comment enables it.
	kustomization = fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n", rel(repoPath("config", "default")), rel(repoPath("config", "admission", "node-scope")))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = framework.Kubectl(t, "kustomize", overlay)
	if err != nil {
		t.Fatalf("kubectl kustomize with the node-scope component: %v\n%s", err, out)
	}
	objs = parse(t, out)
	if got, want := policyObjects(objs), []string{
		"ConfigMap/" + namespace + "/" + nodeScope,
		"ValidatingAdmissionPolicy/" + controllerWrites,
		"ValidatingAdmissionPolicy/" + deleteGuard,
		"ValidatingAdmissionPolicy/" + nodeScope,
		"ValidatingAdmissionPolicyBinding/" + controllerWrites,
		"ValidatingAdmissionPolicyBinding/" + deleteGuard,
		"ValidatingAdmissionPolicyBinding/" + nodeScope,
	}; !slices.Equal(got, want) {
		t.Errorf("admission objects with the node-scope component %q, want %q", got, want)
	}
	checkPolicies(t, objs, "nodemaint", namespace)
	applyDryRun(t, out)
}

// TestHelmInstall really installs the chart with helm (without its CRDs, which the cluster has)
// under another name in a namespace that enforces the restricted Pod Security Standard: the
// controller's pods must be admitted and become available (kwok runs them), and its
// ServiceAccount must have the permissions the controller needs, and no more.
func TestHelmInstall(t *testing.T) {
	ns := framework.Namespace(t)
	if out, err := framework.Kubectl(t, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	name := ns + "-nodemaint"
	install := []string{"install", ns, repoPath("charts", "nodemaint"), "--namespace", ns, "--set", "crds.install=false", "--set", "fullnameOverride=" + name,
		"--set", "admissionPolicies.nodeScope.enabled=true", "--set", "admissionPolicies.nodeScope.labelKey=topology.example.com/rack"}
	if out, err := runHelm(t, install...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The namespace goes with the test; the cluster-scoped objects go with the release.
		if out, err := runHelm(t, "uninstall", ns, "--namespace", ns); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	framework.WaitDeploymentAvailable(t, ns, name)

	// The admission policies are installed and enforced: a user who may create NodeMaintenances
	// and maintain rack 7 may neither ask for drainTimeoutAction: Delete there, nor select nodes
	// but by the node label the release set. (Each request breaks one policy only: which refusal
	// the API server reports when several refuse is not defined.)
	for _, policy := range []string{name + "-drain-timeout-delete", name + "-node-scope"} {
		expectTypeChecked(t, policy)
	}
	user := "helm-user-" + ns
	grant(t, user,
		rbacv1.PolicyRule{APIGroups: []string{"nodemaint.dev"}, Resources: []string{"nodemaintenances"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"nodemaint.dev"}, Resources: []string{"nodepools"}, ResourceNames: []string{"7"}, Verbs: []string{"maintain"}})
	restricted := impersonate(t, user)
	rack7 := deleting(ns + "-delete")
	rack7.Spec.NodeSelector.NodeSelectorTerms = byLabel("topology.example.com/rack", "7")
	waitRefused(t, restricted, rack7, deleteRefused)
	waitRefused(t, restricted, maintenance(ns+"-all", everyNode()), "every nodeSelectorTerm must require the node label topology.example.com/rack with operator In")
	rack7.Spec.DrainTimeoutAction = nodemaintv1alpha1.DrainTimeoutActionReport
	if err := restricted.Create(t.Context(), rack7, client.DryRunAll); err != nil {
		t.Errorf("a user granted rack 7 maintaining rack 7: %v", err)
	}

	sa := "system:serviceaccount:" + ns + ":" + name
	for _, check := range [][]string{
		{"patch", "nodes"},
		{"create", "pods", "--subresource=eviction", "-A"},
		{"patch", "pods", "--subresource=status", "-A"},
		{"patch", "nodemaintenances.nodemaint.dev", "--subresource=status"},
		{"list", "drainrules.nodemaint.dev"},
		{"patch", "deployments.apps", "-A"},
		{"list", "volumeattachments.storage.k8s.io"},
		{"update", "leases.coordination.k8s.io", "-n", ns},
		// The secure metrics endpoint's reviews of scrapers.
		{"create", "tokenreviews.authentication.k8s.io"},
		{"create", "subjectaccessreviews.authorization.k8s.io"},
	} {
		if got := canI(t, sa, check...); got != "yes" {
			t.Errorf("%s cannot %s: %s", sa, strings.Join(check, " "), got)
		}
	}
	// Least privilege: no secrets, no changing what is not its own.
	for _, check := range [][]string{
		{"get", "secrets", "-A"},
		{"update", "nodes"},
		{"delete", "nodes"},
		{"create", "nodemaintenances.nodemaint.dev"},
		{"update", "leases.coordination.k8s.io", "-n", "kube-system"},
		// Deleting pods is the opt-in podDeletion.enabled's; scaling through the scale
		// subresource, which the policy does not see, is not granted.
		{"delete", "pods", "-A"},
		{"patch", "deployments.apps", "--subresource=scale", "-A"},
		{"update", "deployments.apps", "-A"},
	} {
		if got := canI(t, sa, check...); got != "no" {
			t.Errorf("%s can %s: %s", sa, strings.Join(check, " "), got)
		}
	}
	// The release's policy holds its own ServiceAccount, by its name and namespace, to the fields
	// nodemaint owns: it may scale the release's Deployment, not change its pod template.
	var own appsv1.Deployment
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &own); err != nil {
		t.Fatal(err)
	}
	as := impersonate(t, sa, "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	template := mergePatch(`{"spec":{"template":{"spec":{"containers":[{"name":"manager","image":"registry.example.com/anything:latest"}]}}}}`)
	waitPolicyRefuses(t, as, &own, template, name+"-controller-writes")
	expectWrite(t, as, write{obj: &own, patch: mergePatch(`{"spec":{"replicas":3}}`)}, name+"-controller-writes")
}

// userRoles are the users' ClusterRoles of config/rbac, by file name (without .yaml) and name
// (with the prefix nodemaint-).
var userRoles = []string{"nodemaintenance_viewer_role", "nodemaintenance_editor_role", "drainrule_viewer_role", "drainrule_editor_role"}

// canI returns kubectl auth can-i's answer for user: "yes" or "no" (it exits 1 on "no"), with
// kubectl's warnings dropped.
func canI(t *testing.T, user string, args ...string) string {
	t.Helper()
	out, _ := framework.Kubectl(t, append([]string{"auth", "can-i", "--as", user}, args...)...)
	lines := strings.Fields(out)
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// helmTemplate renders the chart as release "nodemaint" in nodemaint-system, with args.
func helmTemplate(t *testing.T, args ...string) string {
	t.Helper()
	return helmTemplateIn(t, namespace, args...)
}

// helmTemplateIn renders the chart as release "nodemaint" in namespace ns, with args.
func helmTemplateIn(t *testing.T, ns string, args ...string) string {
	t.Helper()
	args = append([]string{"template", release, repoPath("charts", "nodemaint"), "--namespace", ns}, args...)
	t.Logf("helm %s", strings.Join(args, " "))
	cmd := exec.Command(helmBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// runHelm runs helm against the cluster, with its configuration, cache and data in a directory of
// the test's, and returns its combined output.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Logf("helm %s", strings.Join(args, " "))
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(cmd.Environ(),
		"KUBECONFIG="+framework.Cluster().Kubeconfig(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var helm struct {
	once sync.Once
	path string
	err  error
}

// helmBinary returns $HELM, else the helm hack/tools.sh builds (once per machine).
func helmBinary(t *testing.T) string {
	t.Helper()
	helm.once.Do(func() {
		if helm.path = os.Getenv("HELM"); helm.path != "" {
			return
		}
		cmd := exec.Command(repoPath("hack", "tools.sh"), "helm")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helm.err = fmt.Errorf("hack/tools.sh helm: %w\n%s", err, stderr.String())
			return
		}
		helm.path = strings.TrimSpace(string(out))
	})
	if helm.err != nil {
		t.Fatal(helm.err)
	}
	return helm.path
}

// applyDryRun has the API server validate the manifests: server-side apply, dry run.
func applyDryRun(t *testing.T, manifests string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(file, []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	// --force-conflicts: the framework installed some of the objects (the controller-writes
	// policy) under its own field manager; a dry run changes nothing.
	out, err := framework.Kubectl(t, "apply", "--server-side", "--dry-run=server", "--force-conflicts", "--field-manager=install-test", "-f", file)
	if err != nil {
		t.Fatalf("kubectl apply --server-side --dry-run=server: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// parse returns the objects of a multi-document YAML stream by "Kind/namespace/name" (or
// "Kind/name" for cluster-scoped objects).
func parse(t *testing.T, manifests string) map[string]*unstructured.Unstructured {
	t.Helper()
	decoded, err := testmanifests.Decode(strings.NewReader(manifests))
	if err != nil {
		t.Fatalf("parsing the manifests: %v", err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, obj := range decoded {
		key := key(obj)
		if _, dup := objs[key]; dup {
			t.Errorf("%s twice", key)
		}
		objs[key] = obj
	}
	return objs
}

func key(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetKind() + "/" + obj.GetName()
	}
	return obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

func kinds(objs map[string]*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == kind {
			out = append(out, obj)
		}
	}
	return out
}

// wantObjects fails unless objs are exactly want.
func wantObjects(t *testing.T, objs map[string]*unstructured.Unstructured, want []string) {
	t.Helper()
	var got []string
	for k := range objs {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("objects:\n  got  %q\n  want %q", got, want)
	}
}

func decode(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if obj == nil {
		t.Fatalf("no object to decode into %T", into)
	}
	if err := apiruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		t.Fatalf("decoding %s: %v", key(obj), err)
	}
}

// readRules returns the rules of the (Cluster)Role in a file of config/rbac.
func readRules(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(repoPath("config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatalf("config/rbac/%s: %v", file, err)
	}
	if len(role.Rules) == 0 {
		t.Fatalf("config/rbac/%s has no rules", file)
	}
	return role.Rules
}

// checkRBAC checks that the ClusterRole and the leader-election Role have exactly the rules of
// config/rbac, and that the bindings grant them to the controller's ServiceAccount.
func checkRBAC(t *testing.T, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	var cr rbacv1.ClusterRole
	decode(t, objs["ClusterRole/"+controller], &cr)
	if want := readRules(t, "role.yaml"); !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("ClusterRole rules differ from config/rbac/role.yaml:\n  got  %+v\n  want %+v", cr.Rules, want)
	}
	var le rbacv1.Role
	decode(t, objs["Role/"+namespace+"/nodemaint-leader-election"], &le)
	if want := readRules(t, "leader_election_role.yaml"); !reflect.DeepEqual(le.Rules, want) {
		t.Errorf("leader-election Role rules differ from config/rbac/leader_election_role.yaml:\n  got  %+v\n  want %+v", le.Rules, want)
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: controller, Namespace: namespace}
	var crb rbacv1.ClusterRoleBinding
	decode(t, objs["ClusterRoleBinding/"+controller], &crb)
	if want := (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: controller}); crb.RoleRef != want {
		t.Errorf("ClusterRoleBinding roleRef %+v, want %+v", crb.RoleRef, want)
	}
	if !slices.Equal(crb.Subjects, []rbacv1.Subject{subject}) {
		t.Errorf("ClusterRoleBinding subjects %+v, want [%+v]", crb.Subjects, subject)
	}
	for name, file := range map[string]string{controller + "-metrics-auth": "metrics_auth_role.yaml", "nodemaint-metrics-reader": "metrics_reader_role.yaml"} {
		var r rbacv1.ClusterRole
		decode(t, objs["ClusterRole/"+name], &r)
		if want := readRules(t, file); !reflect.DeepEqual(r.Rules, want) {
			t.Errorf("ClusterRole %s rules differ from config/rbac/%s:\n  got  %+v\n  want %+v", name, file, r.Rules, want)
		}
	}
	var mab rbacv1.ClusterRoleBinding
	decode(t, objs["ClusterRoleBinding/"+controller+"-metrics-auth"], &mab)
	if want := (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: controller + "-metrics-auth"}); mab.RoleRef != want {
		t.Errorf("metrics-auth ClusterRoleBinding roleRef %+v, want %+v", mab.RoleRef, want)
	}
	if !slices.Equal(mab.Subjects, []rbacv1.Subject{subject}) {
		t.Errorf("metrics-auth ClusterRoleBinding subjects %+v, want [%+v]", mab.Subjects, subject)
	}
	var rb rbacv1.RoleBinding
	decode(t, objs["RoleBinding/"+namespace+"/nodemaint-leader-election"], &rb)
	if want := (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "nodemaint-leader-election"}); rb.RoleRef != want {
		t.Errorf("leader-election RoleBinding roleRef %+v, want %+v", rb.RoleRef, want)
	}
	if !slices.Equal(rb.Subjects, []rbacv1.Subject{subject}) {
		t.Errorf("leader-election RoleBinding subjects %+v, want [%+v]", rb.Subjects, subject)
	}
}

// checkDeployment checks the manager Deployment: replicas, leader election, endpoints, probes,
// resources and the security context of the restricted Pod Security Standard.
// checkImage: the chart and kustomize deploy the same image, the one make image and make release
// tag with the version: the chart's appVersion.
func checkImage(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	b, err := os.ReadFile(repoPath("charts", "nodemaint", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	want := "ghcr.io/nodemaint/nodemaint-controller:" + chart.AppVersion
	if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("image %s, want %s (a release tag, v0.2.0, as make image writes)", got, want)
	}
	if !strings.HasPrefix(chart.AppVersion, "v") {
		t.Errorf("appVersion %s, want a release tag (v0.2.0)", chart.AppVersion)
	}
}

func checkDeployment(t *testing.T, objs map[string]*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	decode(t, objs["Deployment/"+namespace+"/"+controller], &d)
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != controller {
		t.Errorf("serviceAccountName = %q", spec.ServiceAccountName)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	// No PriorityClass unless asked for: a class of its own any tenant could name (see
	// TestPriorityClassScoped).
	if spec.PriorityClassName != "" {
		t.Errorf("priorityClassName %q: want none by default", spec.PriorityClassName)
	}
	if n := len(kinds(objs, "PriorityClass")); n != 0 {
		t.Errorf("%d PriorityClasses: want none by default", n)
	}
	// On Linux nodes; the replicas on different nodes where the scheduler can.
	if spec.NodeSelector[corev1.LabelOSStable] != "linux" {
		t.Errorf("nodeSelector %v: want %s: linux", spec.NodeSelector, corev1.LabelOSStable)
	}
	if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		!antiAffine(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm, d.Spec.Template.Labels) {
		t.Errorf("affinity %+v: want a preferred pod anti-affinity of the replicas by %s", a, corev1.LabelHostname)
	}
	c := spec.Containers[0]
	if !slices.ContainsFunc(c.Args, func(a string) bool { return a == "--leader-elect" || a == "--leader-elect=true" }) {
		t.Errorf("args %q: no --leader-elect", c.Args)
	}
	for _, want := range []string{"--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8443 {
		t.Errorf("ports = %v, want metrics 8443", ports)
	}
	if ports["probes"] != 8081 {
		t.Errorf("ports = %v, want probes 8081", ports)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("no HTTP probe on probes%s: %+v", path, probe)
			continue
		}
		if probe.HTTPGet.Path != path {
			t.Errorf("HTTP probe on path %s, want %s", probe.HTTPGet.Path, path)
		}
		if probe.HTTPGet.Port != intstr.FromString("probes") {
			t.Errorf("HTTP probe of %s on port %s, want probes", path, probe.HTTPGet.Port.String())
		}
	}
	if c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resource requests %v: no CPU", c.Resources.Requests)
	}
	if c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests %v: no memory", c.Resources.Requests)
	}

	psc := spec.SecurityContext
	if psc == nil || !ptr.Deref(psc.RunAsNonRoot, false) {
		t.Errorf("pod securityContext %+v: want runAsNonRoot", psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want seccomp RuntimeDefault", psc)
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("no container securityContext: want no privilege escalation, a read-only root filesystem, every capability dropped")
	} else {
		if ptr.Deref(sc.AllowPrivilegeEscalation, true) {
			t.Errorf("container securityContext %+v: want no privilege escalation", sc)
		}
		if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
			t.Errorf("container securityContext %+v: want a read-only root filesystem", sc)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext capabilities %+v: want every capability dropped", sc.Capabilities)
		}
		if sc.Capabilities != nil && len(sc.Capabilities.Add) != 0 {
			t.Errorf("container securityContext adds capabilities %v, want none", sc.Capabilities.Add)
		}
	}
	return &d
}

// checkServiceAndPDB checks that the metrics Service and the PodDisruptionBudget select the
// Deployment's pods.
func checkServiceAndPDB(t *testing.T, objs map[string]*unstructured.Unstructured, d *appsv1.Deployment) {
	t.Helper()
	podLabels := d.Spec.Template.Labels
	if !subset(d.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, podLabels)
	}
	var svc corev1.Service
	decode(t, objs["Service/"+namespace+"/"+controller+"-metrics"], &svc)
	if len(svc.Spec.Selector) == 0 || !subset(svc.Spec.Selector, podLabels) {
		t.Errorf("the metrics Service selects %v, not the pods %v", svc.Spec.Selector, podLabels)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("metrics Service ports %+v, want one", svc.Spec.Ports)
	}
	if p := svc.Spec.Ports[0]; p.Name != "metrics" {
		t.Errorf("metrics Service port name %q, want metrics", p.Name)
	}
	if p := svc.Spec.Ports[0]; p.Port != 8443 {
		t.Errorf("metrics Service port %d, want 8443", p.Port)
	}
	if p := svc.Spec.Ports[0]; p.TargetPort != intstr.FromString("metrics") {
		t.Errorf("metrics Service targetPort %v, want the container's port metrics", p.TargetPort)
	}
	var pdb policyv1.PodDisruptionBudget
	decode(t, objs["PodDisruptionBudget/"+namespace+"/"+controller], &pdb)
	if pdb.Spec.Selector == nil || len(pdb.Spec.Selector.MatchLabels) == 0 || !subset(pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("the PodDisruptionBudget selects %v, not the pods %v", pdb.Spec.Selector, podLabels)
	}
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("PodDisruptionBudget maxUnavailable = %v, want 1", pdb.Spec.MaxUnavailable)
	}
}

// antiAffine: term keeps apart, one per node, the pods labelled podLabels.
func antiAffine(term corev1.PodAffinityTerm, podLabels map[string]string) bool {
	return term.TopologyKey == corev1.LabelHostname && term.LabelSelector != nil && len(term.LabelSelector.MatchExpressions) == 0 &&
		len(term.LabelSelector.MatchLabels) > 0 && subset(term.LabelSelector.MatchLabels, podLabels) && len(term.Namespaces) == 0
}

func subset(sub, of map[string]string) bool {
	for k, v := range sub {
		if w, ok := of[k]; !ok || w != v {
			return false
		}
	}
	return true
}
