package realnode

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// The release as the README installs it: in nodemaint-system, the chart's names.
const (
	releaseNamespace = framework.ControllerNamespace
	releaseName      = "nodemaint"
	controllerName   = "nodemaint-controller"
	leaseName        = "nodemaint-controller.nodemaint.dev"
	metricsService   = controllerName + "-metrics"
	metricsSecret    = "nodemaint-metrics-tls"
	// imageRepository is the image's repository in the test's registry; mirrorRepository a
	// second one, where install.yaml's image is mirrored (its own pulls).
	imageRepository  = "nodemaint/nodemaint-controller"
	mirrorRepository = "mirror/nodemaint-controller"
	// defaultImage is the image's name in the chart and in install.yaml.
	defaultImage = "ghcr.io/nodemaint/nodemaint-controller"
	// releaseTimeout bounds the waits for the release's pods: pulled, started, ready.
	releaseTimeout = 3 * time.Minute
)

// releaseFiles are make release's files for this machine ($NODEMAINT_RELEASE, made by make
// test-e2e and make test-real-node): the chart package, install.yaml and the image.
type releaseFiles struct {
	chart, installYAML, image string
	// version is the image's tag and the chart's appVersion.
	version string
}

func readRelease(t *testing.T) releaseFiles {
	t.Helper()
	dir := os.Getenv("NODEMAINT_RELEASE")
	if dir == "" {
		t.Fatal("NODEMAINT_RELEASE is not set: run with make test-real-node or make test-e2e, which make the release for this machine (hack/release.sh)")
	}
	charts, _ := filepath.Glob(filepath.Join(dir, "nodemaint-*.tgz"))
	if len(charts) != 1 {
		t.Fatalf("%s holds chart packages %q, want one", dir, charts)
	}
	r := releaseFiles{chart: charts[0], installYAML: filepath.Join(dir, "install.yaml"), image: filepath.Join(dir, "image")}
	idx, err := layout.ImageIndexFromPath(r.image)
	if err != nil {
		t.Fatalf("the release's image: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("the release's image layout: %v, %+v", err, m)
	}
	r.version = m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	return r
}

// releaseRegistry is an OCI registry (go-containerregistry's) served by the test process on
// loopback, holding the release's image, from which the real node's containerd pulls.
type releaseRegistry struct {
	host string
	// digest is the image index's digest; version its tag.
	digest, version string
	// pulls counts containerd's HEADs and GETs of manifests and blobs, by repository.
	pulls sync.Map // string → *atomic.Int64
}

// image is the release's image in the repository of the registry.
func (r *releaseRegistry) image(repository string) string {
	return r.host + "/" + repository + ":" + r.version
}

// pulled is how many requests for manifests and blobs containerd made of the repository.
func (r *releaseRegistry) pulled(repository string) int64 {
	n, _ := r.pulls.LoadOrStore(repository, new(atomic.Int64))
	return n.(*atomic.Int64).Load()
}

var (
	registryOnce sync.Once
	theRegistry  *releaseRegistry
	registryErr  error
)

// serveRelease starts the package's registry (once), pushes the release's image to it and lets
// the real node's containerd pull from it.
func serveRelease(t *testing.T, rel releaseFiles) *releaseRegistry {
	t.Helper()
	registryOnce.Do(func() { theRegistry, registryErr = startRegistry(rel) })
	if registryErr != nil {
		t.Fatal(registryErr)
	}
	if err := framework.Cluster().TrustRegistry(theRegistry.host); err != nil {
		t.Fatal(err)
	}
	return theRegistry
}

func startRegistry(rel releaseFiles) (*releaseRegistry, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &releaseRegistry{host: l.Addr().String()}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// A pull resolves the tag (HEAD of the manifest), then GETs what the node lacks.
		if (req.Method == http.MethodGet || req.Method == http.MethodHead) && strings.HasPrefix(req.UserAgent(), "containerd/") {
			for _, kind := range []string{"/manifests/", "/blobs/"} {
				if repo, _, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v2/"), kind); ok {
					n, _ := r.pulls.LoadOrStore(repo, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				}
			}
		}
		reg.ServeHTTP(w, req)
	})}
	go func() { _ = srv.Serve(l) }() // serves until the test binary exits

	outer, err := layout.ImageIndexFromPath(rel.image)
	if err != nil {
		return nil, err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	idx, err := outer.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, err
	}
	r.version = rel.version
	for _, repo := range []string{imageRepository, mirrorRepository} {
		ref, err := name.NewTag(r.image(repo), name.Insecure)
		if err != nil {
			return nil, err
		}
		if err := remote.WriteIndex(ref, idx); err != nil {
			return nil, fmt.Errorf("pushing the release's image to %s: %w", ref, err)
		}
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	r.digest = digest.String()
	return r, nil
}

// TestReleaseOnRealNode installs make release's chart package with helm, as the README does, on
// a cluster that never had nodemaint. The real node's containerd pulls the controller's image from
// a registry, and the controller runs as the chart renders it: two replicas in nodemaint-system,
// which enforces the restricted Pod Security Standard, no host network, reaching the API server
// through the kubernetes Service under its own projected ServiceAccount token, its probes
// passing, its logs read with kubectl logs. One replica leads; it drains a node from under a
// single-replica Deployment behind a budget of minAvailable 1; its container is killed, the other
// takes the Lease over and drains the next node; nothing goes below by the invariant checker.
// Prometheus scrapes both replicas through the metrics Service's endpoints over TLS, verified,
// as a ServiceAccount bound to nodemaint-metrics-reader. helm upgrade to the next chart version
// keeps every NodeMaintenance, one drain held by a budget, and upgrades the CRDs; the held drain
// finishes under the upgraded controller. helm uninstall, kubectl maintenance cleanup and the
// user guide's last steps leave nothing of nodemaint's in the cluster. Last, ctr images import of
// the release's image names it as the chart does.
func TestReleaseOnRealNode(t *testing.T) {
	requireRealNode(t)
	start := time.Now()
	rel := readRelease(t)
	reg := serveRelease(t, rel)
	framework.Uninstall(t)
	ns := framework.Namespace(t)
	ctx := t.Context()

	// What the admin prepares: the namespace, restricted; Prometheus' ServiceAccount, which the
	// release binds to nodemaint-metrics-reader; the metrics endpoint's certificate.
	kubectl(t, "create", "namespace", releaseNamespace)
	kubectl(t, "label", "namespace", releaseNamespace, "pod-security.kubernetes.io/enforce=restricted")
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}})
	caFile := createMetricsCertificate(t)
	values := []string{
		"--namespace", releaseNamespace,
		"--set", "image.repository=" + reg.host + "/" + imageRepository,
		"--set-string", "nodeSelector." + strings.ReplaceAll(localcluster.RealNodeLabel, ".", `\.`) + "=true",
		"--set", "metrics.certSecret=" + metricsSecret,
		"--set", "metricsReaderServiceAccounts[0].name=prometheus",
		"--set", "metricsReaderServiceAccounts[0].namespace=" + ns,
	}
	if out, err := runHelm(t, append([]string{"install", releaseName, rel.chart}, values...)...); err != nil {
		t.Fatalf("helm install %s: %v\n%s", filepath.Base(rel.chart), err, out)
	}
	finished := false
	t.Cleanup(func() {
		if finished {
			return
		}
		// The test stopped half-way: the release gone, its namespace too, and the maintenances'
		// finalizers (no controller is left to remove them), so that the CRDs can go.
		_, _ = runHelm(t, "uninstall", releaseName, "--namespace", releaseNamespace, "--wait")
		_, _ = framework.Kubectl(t, "delete", "namespace", releaseNamespace, "--ignore-not-found", "--wait=false")
		if out, err := maintenanceCleanup("--force"); err != nil {
			t.Logf("kubectl maintenance cleanup --force: %v\n%s", err, out)
		}
	})
	waitReleasePods(t, reg, imageRepository, 2)
	t.Logf("installed %s: 2 replicas Ready on %s %v after the test started; containerd's requests of manifests and blobs to %s: %d",
		filepath.Base(rel.chart), localcluster.RealNodeName, time.Since(start).Round(100*time.Millisecond), reg.image(imageRepository), reg.pulled(imageRepository))
	if reg.pulled(imageRepository) == 0 {
		t.Error("containerd pulled nothing from the registry")
	}
	leader := waitLeader(t, "")
	expectLogs(t, leader, "Successfully acquired lease")

	// A single-replica Deployment behind a strict budget, on the kwok nodes, drained twice.
	webLabels := map[string]string{"app": "web"}
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: webLabels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: webLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{localcluster.NodeTypeLabel: "kwok"},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	create(t, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: webLabels}},
	})
	framework.CreateDeployment(t, web)
	checker, err := invariants.Start(context.Background(), framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{Namespaces: []string{ns}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = checker.Stop() }()
	if budgets, deployments := checker.Watched(); budgets != 1 || deployments != 1 {
		t.Fatalf("the invariant checker watches %d budgets and %d Deployments, want web's", budgets, deployments)
	}
	first := drainNodeOf(t, ns, "web", "release-first")

	// The leader's container killed: the other replica (or the restarted one) takes the Lease.
	killed := time.Now()
	if err := framework.Cluster().KillRealNodeContainer(containerID(t, leader.pod)); err != nil {
		t.Fatal(err)
	}
	next := waitLeader(t, leader.identity)
	t.Logf("the leader %s's container killed; %s leads %v later", leader.identity, next.identity, time.Since(killed).Round(100*time.Millisecond))
	expectLogs(t, next, "Successfully acquired lease")
	second := drainNodeOf(t, ns, "web", "release-second")
	testutil.Eventually(t, releaseTimeout, "the killed container restarted and Ready", func(ctx context.Context) (bool, string, error) {
		var pod corev1.Pod
		if err := framework.Client().Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: leader.pod}, &pod); err != nil {
			return false, "", err
		}
		cs := pod.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].Ready, fmt.Sprintf("%+v", cs), nil
	})

	scrapeRelease(t, ns, caFile)

	// helm upgrade to the next chart version with a drain held by a budget: the first
	// maintenance ends (its node uncordoned), and a bare pod there, Running and Ready (a pending
	// pod may be evicted whatever its budget says), is kept from eviction by its budget.
	if err := framework.Client().Delete(ctx, &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: first.name}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, releaseTimeout, first.name+" gone, its node uncordoned", func(ctx context.Context) (bool, string, error) {
		var node corev1.Node
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: first.node}, &node); err != nil {
			return false, "", err
		}
		err := framework.Client().Get(ctx, client.ObjectKey{Name: first.name}, &nodemaintv1alpha1.NodeMaintenance{})
		return apierrors.IsNotFound(err) && !node.Spec.Unschedulable, fmt.Sprintf("unschedulable %v", node.Spec.Unschedulable), client.IgnoreNotFound(err)
	})
	held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Labels: map[string]string{"app": "held"}},
		Spec: corev1.PodSpec{NodeName: first.node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	heldPDB := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: held.Labels}}}
	create(t, heldPDB, held)
	testutil.Eventually(t, releaseTimeout, "the held pod Ready, its budget allowing no disruption", func(ctx context.Context) (bool, string, error) {
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(held), held); err != nil {
			return false, "", err
		}
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(heldPDB), heldPDB); err != nil {
			return false, "", err
		}
		s := heldPDB.Status
		return isReady(held) && s.ObservedGeneration == heldPDB.Generation && s.CurrentHealthy == 1 && s.DisruptionsAllowed == 0, fmt.Sprintf("%+v", s), nil
	})
	third := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "release-held"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: testutil.NodeSelectorFor(first.node), Cordon: true, Drain: true, Reason: "e2e release upgrade",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Second}}}
	create(t, third)
	isHeld := func(ctx context.Context) (bool, string, error) {
		var nm nodemaintv1alpha1.NodeMaintenance
		if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(third), &nm); err != nil {
			return false, "", err
		}
		blocked := nm.Status.Nodes[first.node].Blocked
		return len(blocked) > 0 && blocked[0].Reason == nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, fmt.Sprintf("%+v", nm.Status.Nodes[first.node]), nil
	}
	testutil.Eventually(t, releaseTimeout, "the drain held by the budget", isHeld)
	before := maintenances(t)
	for _, crd := range releaseCRDs {
		var got apiextensionsv1.CustomResourceDefinition
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: crd}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Annotations["helm.sh/resource-policy"] != "keep" || got.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("CRD %s: annotations %v, labels %v: want installed by Helm and kept", crd, got.Annotations, got.Labels)
		}
	}

	nextChart := packageNextChart(t, rel)
	upgraded := time.Now()
	if out, err := runHelm(t, append([]string{"upgrade", releaseName, nextChart.path}, values...)...); err != nil {
		t.Fatalf("helm upgrade to %s: %v\n%s", filepath.Base(nextChart.path), err, out)
	}
	kubectl(t, "rollout", "status", "deployment/"+controllerName, "--namespace", releaseNamespace, "--timeout=3m")
	t.Logf("upgraded to chart %s, rolled out in %v", nextChart.version, time.Since(upgraded).Round(100*time.Millisecond))
	waitReleasePods(t, reg, imageRepository, 2)
	for _, crd := range releaseCRDs {
		var got apiextensionsv1.CustomResourceDefinition
		if err := framework.Client().Get(ctx, client.ObjectKey{Name: crd}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s after the upgrade: annotations %v, want helm.sh/resource-policy: keep", crd, got.Annotations)
		}
		for _, v := range got.Spec.Versions {
			if !slices.ContainsFunc(v.AdditionalPrinterColumns, func(c apiextensionsv1.CustomResourceColumnDefinition) bool { return c.Name == nextColumn }) {
				t.Errorf("CRD %s %s after the upgrade has no column %s, which chart %s added: not upgraded with the release", crd, v.Name, nextColumn, nextChart.version)
			}
		}
	}
	after := maintenances(t)
	for name, nm := range before {
		if got, ok := after[name]; !ok || got.UID != nm.UID || got.Generation != nm.Generation {
			t.Errorf("NodeMaintenance %s (uid %s, generation %d) after the upgrade: %v", name, nm.UID, nm.Generation, got)
		}
	}
	if len(after) != 2 {
		t.Errorf("%d NodeMaintenances after the upgrade, want release-second and release-held", len(after))
	}
	if ok, msg, err := isHeld(ctx); !ok || err != nil {
		t.Errorf("after the upgrade, the drain is no longer reported held: %s %v", msg, err)
	}
	if err := framework.Client().Delete(ctx, heldPDB); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, releaseTimeout, "the held drain finished under the upgraded controller", func(ctx context.Context) (bool, string, error) {
		v, err := testutil.ViewStatus(ctx, framework.Client(), third.Name, "")
		return v.Drained == "True" && v.Phase == nodemaintv1alpha1.PhaseDrainComplete, fmt.Sprintf("%+v", v), err
	})
	// Stopped before the CRDs go, which it watches.
	if err := checker.Stop(); err != nil {
		t.Errorf("stopping the invariant checker: %v", err)
	}
	if v := checker.Violations(); len(v) > 0 {
		t.Errorf("invariant violations: %v", v)
	}

	// Uninstall as the user guide says.
	if out, err := runHelm(t, "uninstall", releaseName, "--namespace", releaseNamespace, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	testutil.Eventually(t, releaseTimeout, "the controller's pods gone", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		err := framework.Client().List(ctx, &pods, client.InNamespace(releaseNamespace))
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), err
	})
	out, err := maintenanceCleanup()
	if err != nil {
		t.Fatalf("kubectl maintenance cleanup: %v\n%s", err, out)
	}
	t.Logf("kubectl maintenance cleanup:\n%s", out)
	kubectl(t, "delete", "crd", "nodemaintenances.nodemaint.dev", "drainrules.nodemaint.dev")
	kubectl(t, "delete", "namespace", releaseNamespace)
	expectNothingLeft(t, ns, []string{first.node, second.node})
	// Last, so that the pulls above found none of the image's layers on the node.
	finished = true
	checkImportName(t, rel)
	t.Logf("the release's test took %v", time.Since(start).Round(100*time.Millisecond))
}

// TestInstallYAMLOnRealNode applies make release's install.yaml, its image pointed at the test's
// registry and its pods at the real node by a kustomize overlay, as an admin who mirrors the image
// does: the apply succeeds, containerd pulls the image, and both replicas become Ready as
// config/default renders them. Then the release is deleted as it was applied.
func TestInstallYAMLOnRealNode(t *testing.T) {
	requireRealNode(t)
	start := time.Now()
	rel := readRelease(t)
	reg := serveRelease(t, rel)
	framework.Uninstall(t)

	overlay := t.TempDir()
	b, err := os.ReadFile(rel.installYAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "install.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`resources:
- install.yaml
images:
- name: %s
  newName: %s
patches:
- target: {kind: Deployment, name: %s}
  patch: |
    - op: add
      path: /spec/template/spec/nodeSelector
      value: {%s: "true"}
`, defaultImage, reg.host+"/"+mirrorRepository, controllerName, localcluster.RealNodeLabel)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered := filepath.Join(t.TempDir(), "install.yaml")
	if err := os.WriteFile(rendered, []byte(kubectl(t, "kustomize", overlay)), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "--server-side", "-f", rendered)
	t.Cleanup(func() {
		if out, err := framework.Kubectl(t, "delete", "--ignore-not-found", "-f", rendered); err != nil {
			t.Errorf("deleting install.yaml: %v\n%s", err, out)
		}
	})
	var ns corev1.Namespace
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Name: releaseNamespace}, &ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("install.yaml's namespace %s labels %v: want Pod Security restricted enforced", releaseNamespace, ns.Labels)
	}
	waitReleasePods(t, reg, mirrorRepository, 2)
	if reg.pulled(mirrorRepository) == 0 {
		t.Errorf("containerd pulled nothing from %s", reg.image(mirrorRepository))
	}
	leader := waitLeader(t, "")
	t.Logf("install.yaml applied: 2 replicas Ready, %s leads, %v after the test started; containerd's requests to %s: %d (the layers are on the node already)",
		leader.identity, time.Since(start).Round(100*time.Millisecond), reg.image(mirrorRepository), reg.pulled(mirrorRepository))
}

// checkImportName imports the release's image layout into the real node's containerd as
// `ctr images import` does with a tar of it, and checks that containerd names it as the chart and
// install.yaml do, not import-<date>:<tag>.
func checkImportName(t *testing.T, rel releaseFiles) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.tar")
	if err := tarDir(rel.image, archive); err != nil {
		t.Fatal(err)
	}
	if err := framework.Cluster().ImportRealNodeImages(archive); err != nil {
		t.Fatal(err)
	}
	images, err := framework.Cluster().RealNodeImages()
	if err != nil {
		t.Fatal(err)
	}
	if want := defaultImage + ":" + rel.version; !slices.Contains(images, want) {
		t.Errorf("ctr images import of the release's image: containerd has %q, not %s", images, want)
	}
}

// tarDir writes the files under dir into a tar archive at out, named relative to dir.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// waitReleasePods waits until the controller's Deployment has n available replicas, all updated,
// and checks its pods: on the real node, the image pulled from the registry's repository, no host
// network, the ServiceAccount's token projected, Ready (the readiness probe passes) and never
// restarted (nor the liveness probe failed).
func waitReleasePods(t *testing.T, reg *releaseRegistry, repository string, n int32) {
	t.Helper()
	testutil.Eventually(t, releaseTimeout, "the controller's pods Ready", func(ctx context.Context) (bool, string, error) {
		var d appsv1.Deployment
		if err := framework.Client().Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: controllerName}, &d); err != nil {
			return false, "", err
		}
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.AvailableReplicas == n && s.UpdatedReplicas == n && s.Replicas == n,
			fmt.Sprintf("%+v", s), nil
	})
	for _, pod := range controllerPods(t) {
		spec := pod.Spec
		if spec.NodeName != localcluster.RealNodeName || spec.HostNetwork || spec.ServiceAccountName != controllerName {
			t.Errorf("pod %s: node %s, host network %v, ServiceAccount %s", pod.Name, spec.NodeName, spec.HostNetwork, spec.ServiceAccountName)
		}
		projected := slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
			return v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil })
		})
		cs := pod.Status.ContainerStatuses
		if !projected || len(cs) != 1 || !cs[0].Ready || cs[0].RestartCount != 0 {
			t.Errorf("pod %s: a projected ServiceAccount token %v, containers %+v", pod.Name, projected, cs)
			continue
		}
		if cs[0].Image != reg.image(repository) || !strings.HasSuffix(cs[0].ImageID, "@"+reg.digest) {
			t.Errorf("pod %s runs image %s (%s), want %s@%s from the registry", pod.Name, cs[0].Image, cs[0].ImageID, reg.image(repository), reg.digest)
		}
		t.Logf("pod %s on %s, IP %s: image %s, restarts %d", pod.Name, spec.NodeName, pod.Status.PodIP, cs[0].ImageID, cs[0].RestartCount)
	}
}

// controllerPods are the controller's pods that are not terminating.
func controllerPods(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(releaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": controllerName}); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// leaderPod is who holds the Lease: its identity (pod name _ a UUID) and its pod.
type leaderPod struct{ identity, pod string }

// waitLeader waits until a replica other than was holds the leader Lease, and returns it.
func waitLeader(t *testing.T, was string) leaderPod {
	t.Helper()
	var l leaderPod
	testutil.Eventually(t, releaseTimeout, "a leader other than "+strconv.Quote(was), func(ctx context.Context) (bool, string, error) {
		var lease coordinationv1.Lease
		if err := framework.Client().Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: leaseName}, &lease); err != nil {
			return false, "", client.IgnoreNotFound(err)
		}
		l.identity = ptr.Deref(lease.Spec.HolderIdentity, "")
		l.pod, _, _ = strings.Cut(l.identity, "_")
		return l.identity != "" && l.identity != was, l.identity, nil
	})
	return l
}

// expectLogs reads the leader's logs with kubectl logs (the API server through the kubelet) and
// checks they say want.
func expectLogs(t *testing.T, l leaderPod, want string) {
	t.Helper()
	logs := kubectl(t, "logs", "--namespace", releaseNamespace, l.pod)
	if !strings.Contains(logs, want) {
		t.Errorf("kubectl logs %s: no %q in\n%s", l.pod, want, logs)
		return
	}
	for line := range strings.Lines(logs) {
		if strings.Contains(line, want) {
			t.Logf("kubectl logs %s: %s", l.pod, strings.TrimSpace(line))
		}
	}
}

// containerID is the containerd ID of the pod's container.
func containerID(t *testing.T, podName string) string {
	t.Helper()
	var pod corev1.Pod
	if err := framework.Client().Get(t.Context(), client.ObjectKey{Namespace: releaseNamespace, Name: podName}, &pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s: containers %+v", podName, pod.Status.ContainerStatuses)
	}
	id, ok := strings.CutPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if !ok {
		t.Fatalf("pod %s: container ID %q", podName, pod.Status.ContainerStatuses[0].ContainerID)
	}
	return id
}

// drained is a NodeMaintenance that drained a node.
type drained struct{ name, node string }

// drainNodeOf drains the node of the Deployment's pod with a NodeMaintenance called name and
// waits until the pod has moved and the node is drained.
func drainNodeOf(t *testing.T, ns, deployment, name string) drained {
	t.Helper()
	var pods corev1.PodList
	if err := framework.Client().List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": deployment}); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	if len(nodes) != 1 {
		t.Fatalf("Deployment %s's pods are on %q, want one", deployment, nodes)
	}
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: testutil.NodeSelectorFor(nodes[0]), Cordon: true, Drain: true, Reason: "e2e release",
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: 5 * time.Second},
		},
	}
	start := time.Now()
	create(t, nm)
	testutil.Eventually(t, releaseTimeout, name+" drained", func(ctx context.Context) (bool, string, error) {
		v, err := testutil.ViewStatus(ctx, framework.Client(), nm.Name, "")
		return v.Drained == "True" && v.Phase == nodemaintv1alpha1.PhaseDrainComplete, fmt.Sprintf("%+v", v), err
	})
	framework.WaitDeploymentAvailable(t, ns, deployment)
	t.Logf("%s drained %s in %v", name, nodes[0], time.Since(start).Round(100*time.Millisecond))
	return drained{name: name, node: nodes[0]}
}

// maintenances are the cluster's NodeMaintenances by name.
func maintenances(t *testing.T) map[string]nodemaintv1alpha1.NodeMaintenance {
	t.Helper()
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := framework.Client().List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]nodemaintv1alpha1.NodeMaintenance{}
	for _, nm := range list.Items {
		out[nm.Name] = nm
	}
	return out
}

// createMetricsCertificate makes the metrics endpoint's serving certificate, issued by the
// cluster's CA for the metrics Service's name, in the Secret the release mounts
// (metrics.certSecret), and returns the CA's file, with which Prometheus verifies it.
func createMetricsCertificate(t *testing.T) string {
	t.Helper()
	pki := filepath.Join(framework.Cluster().Dir(), "pki")
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caKeyPEM, err := os.ReadFile(filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	cb, kb := pemBlock(t, caPEM), pemBlock(t, caKeyPEM)
	ca, err := x509.ParseCertificate(cb)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := x509.ParseECPrivateKey(kb)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	svc := metricsService + "." + releaseNamespace + ".svc"
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: svc},
		DNSNames:     []string{svc, svc + ".cluster.local"},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: metricsSecret},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
			"ca.crt":                caPEM,
		},
	})
	return filepath.Join(pki, "ca.crt")
}

func pemBlock(t *testing.T, b []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

// scrapeRelease has Prometheus scrape both replicas through the metrics Service's endpoints, as
// a cluster's Prometheus does (Debian's prometheus has no Kubernetes discovery: the test reads
// the Service's EndpointSlices for it), over HTTPS, verifying the certificate for the Service's
// name, with the token of the ServiceAccount the release bound to nodemaint-metrics-reader; then
// reads the leader's reconciles from it.
func scrapeRelease(t *testing.T, ns, caFile string) {
	t.Helper()
	var eps discoveryv1.EndpointSliceList
	if err := framework.Client().List(t.Context(), &eps, client.InNamespace(releaseNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: metricsService}); err != nil {
		t.Fatal(err)
	}
	var targets []any
	for _, es := range eps.Items {
		var port int32
		for _, p := range es.Ports {
			if ptr.Deref(p.Name, "") == "metrics" {
				port = ptr.Deref(p.Port, 0)
			}
		}
		for _, ep := range es.Endpoints {
			if ptr.Deref(ep.Conditions.Ready, false) && ep.TargetRef != nil {
				targets = append(targets, map[string]any{
					"targets": []string{net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))},
					"labels":  map[string]string{"pod": ep.TargetRef.Name},
				})
			}
		}
	}
	if len(targets) != 2 {
		t.Fatalf("the metrics Service's endpoints: %v, want both replicas", targets)
	}
	token, err := framework.ServiceAccountToken(t.Context(), ns, "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	const job = "nodemaint"
	p := framework.StartPrometheusConfig(t, job, len(targets), map[string]any{
		"job_name":        job,
		"scheme":          "https",
		"scrape_interval": "1s",
		"scrape_timeout":  "1s",
		"static_configs":  targets,
		"tls_config":      map[string]any{"ca_file": caFile, "server_name": metricsService + "." + releaseNamespace + ".svc"},
		"authorization":   map[string]any{"credentials_file": tokenFile},
	})
	testutil.Eventually(t, time.Minute, "Prometheus reads the leader's reconciles", func(ctx context.Context) (bool, string, error) {
		series, err := p.QueryRange(ctx, `sum by (pod) (controller_runtime_reconcile_total{job="nodemaint"}) > 0`, time.Now().Add(-time.Second), time.Now(), time.Second)
		return err == nil && len(series) > 0, fmt.Sprint(series), err
	})
	series, err := p.QueryRange(t.Context(), `up{job="nodemaint"} == 1 or sum by (pod) (controller_runtime_reconcile_total{job="nodemaint"})`, time.Now().Add(-time.Second), time.Now(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range series {
		t.Logf("Prometheus: %v %v", s.Metric, s.Values)
	}
}

// chartPackage is a chart package and its version.
type chartPackage struct{ path, version string }

// releaseCRDs are the CRDs the release installs.
var releaseCRDs = []string{"nodemaintenances.nodemaint.dev", "drainrules.nodemaint.dev"}

// nextColumn is the printer column the next chart version adds to each CRD version.
const nextColumn = "E2ENext"

// packageNextChart packages the release's chart as the next patch version, the same image, whose
// CRDs have one more printer column, nextColumn, as a new version's CRDs change.
func packageNextChart(t *testing.T, rel releaseFiles) chartPackage {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", rel.chart, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v\n%s", rel.chart, err, out)
	}
	crds, _ := filepath.Glob(filepath.Join(dir, "nodemaint", "files", "crds", "*.yaml"))
	if len(crds) != len(releaseCRDs) {
		t.Fatalf("the chart's CRDs: %q, want %d", crds, len(releaseCRDs))
	}
	for _, f := range crds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		spec, _ := crd["spec"].(map[string]any)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			v := v.(map[string]any)
			columns, _ := v["additionalPrinterColumns"].([]any)
			v["additionalPrinterColumns"] = append(columns, map[string]any{"name": nextColumn, "type": "string", "jsonPath": ".metadata.uid", "priority": 1})
		}
		if b, err = yaml.Marshal(crd); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := regexp.MustCompile(`^nodemaint-(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(filepath.Base(rel.chart))
	if m == nil {
		t.Fatalf("chart package %s: no version", rel.chart)
	}
	patch, _ := strconv.Atoi(m[3])
	next := fmt.Sprintf("%s.%s.%d", m[1], m[2], patch+1)
	if out, err := runHelm(t, "package", filepath.Join(dir, "nodemaint"), "--version", next, "--app-version", rel.version, "--destination", dir); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	return chartPackage{path: filepath.Join(dir, "nodemaint-"+next+".tgz"), version: next}
}

// expectNothingLeft checks that nothing of nodemaint's is left in the cluster: no CRD of its
// group, no cluster-wide object or namespace named after it, no mark of it on the nodes (the
// drained ones uncordoned) nor on the workloads of the test's namespace.
func expectNothingLeft(t *testing.T, ns string, drainedNodes []string) {
	t.Helper()
	ctx := t.Context()
	c := framework.Client()
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		if crd.Spec.Group == nodemaintv1alpha1.GroupVersion.Group {
			t.Errorf("CRD %s left", crd.Name)
		}
	}
	testutil.Eventually(t, framework.NamespaceDeleteTimeout, "no cluster-wide object named nodemaint", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, gvk := range []schema.GroupVersionKind{
			{Version: "v1", Kind: "NamespaceList"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleList"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBindingList"},
			{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClassList"},
			{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyList"},
			{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBindingList"},
			{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfigurationList"},
			{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfigurationList"},
		} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk)
			if err := c.List(ctx, list); err != nil {
				return false, "", err
			}
			for _, o := range list.Items {
				if strings.Contains(o.GetName(), "nodemaint") {
					left = append(left, strings.TrimSuffix(gvk.Kind, "List")+"/"+o.GetName())
				}
			}
		}
		return len(left) == 0, fmt.Sprint(left), nil
	})
	nodemaintKey := func(k string) bool {
		return strings.Contains(k, nodemaintv1alpha1.GroupVersion.Group) && k != localcluster.RealNodeLabel
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		var marks []string
		for k := range n.Labels {
			if nodemaintKey(k) {
				marks = append(marks, "label "+k)
			}
		}
		for k := range n.Annotations {
			if nodemaintKey(k) {
				marks = append(marks, "annotation "+k)
			}
		}
		for _, taint := range n.Spec.Taints {
			if nodemaintKey(taint.Key) || taint.Key == corev1.TaintNodeUnschedulable {
				marks = append(marks, "taint "+taint.Key)
			}
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == "UnderMaintenance" || cond.Reason == "NodeMaintenance" {
				marks = append(marks, "condition "+string(cond.Type))
			}
		}
		if n.Spec.Unschedulable {
			marks = append(marks, "cordoned")
		}
		if len(marks) > 0 {
			t.Errorf("node %s: %v left", n.Name, marks)
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if strings.HasPrefix(string(cond.Type), "Evacuation") {
				t.Errorf("pod %s: condition %s left", p.Name, cond.Type)
			}
		}
		for k := range p.Annotations {
			if nodemaintKey(k) {
				t.Errorf("pod %s: annotation %s left", p.Name, k)
			}
		}
	}
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.ReplicaSetList{}} {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var objs []client.Object
		switch l := list.(type) {
		case *appsv1.DeploymentList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *appsv1.ReplicaSetList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		for _, o := range objs {
			for k := range o.GetAnnotations() {
				if nodemaintKey(k) {
					t.Errorf("%T %s: annotation %s left", o, o.GetName(), k)
				}
			}
		}
	}
	t.Logf("nothing of nodemaint's left; the drained nodes %v uncordoned", drainedNodes)
}

// maintenanceCleanup runs kubectl maintenance cleanup (NODEMAINT_BIN_DIR's) with args.
func maintenanceCleanup(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(os.Getenv("NODEMAINT_BIN_DIR"), "kubectl-maintenance"),
		append([]string{"cleanup", "--kubeconfig", framework.Cluster().Kubeconfig()}, args...)...)
	return cmd.CombinedOutput()
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

// helmBinary returns $HELM, else the helm hack/tools.sh builds (once per machine).
var helmBinary = func() func(t *testing.T) string {
	get := sync.OnceValues(func() (string, error) {
		if h := os.Getenv("HELM"); h != "" {
			return h, nil
		}
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command(filepath.Join(filepath.Dir(file), "..", "..", "..", "hack", "tools.sh"), "helm")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("hack/tools.sh helm: %w\n%s", err, stderr.String())
		}
		return strings.TrimSpace(string(out)), nil
	})
	return func(t *testing.T) string {
		t.Helper()
		h, err := get()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
}()
