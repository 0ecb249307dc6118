package responder_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/machine/machinedecide"
	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
	"github.com/nodemaint/nodemaint/test/invariants"
	"github.com/nodemaint/nodemaint/test/localcluster"
)

// machineFinalizer is the finalizer Cluster API's Machine controller puts on every Machine, and
// removes once the Machine's node and infrastructure are gone; the tests hold it in its place.
const machineFinalizer = "machine.cluster.x-k8s.io"

// capiScheme knows the Kubernetes, nodemaint and Cluster API types.
var capiScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	return s
}()

// capiClient is a cluster-admin client of the package's cluster that knows Cluster API's types.
func capiClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(framework.Cluster().RESTConfig(), client.Options{Scheme: capiScheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClusterAPIPreDrainHook: self-hosted Cluster API (the Machines in the cluster of their
// nodes, --cluster-api-self naming their Cluster, no kubeconfig Secret) deletes a Machine that
// carries nodemaint's pre-drain hook; its node holds the only replica of a Deployment whose
// budget allows no eviction. The test plays Cluster API's Machine controller on Cluster API's own
// CRDs (from its Go module). nodemaint creates a NodeMaintenance for the node, the Deployment
// surges elsewhere with a Ready pod at every moment, the hook is released only once the node is
// drained, and the NodeMaintenance goes with the Machine.
func TestClusterAPIPreDrainHook(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions, framework.EvictionRequests)
	framework.Apply(t, "test/e2e/testdata/cluster-api", "config/cluster-api")
	if os.Getenv("EVICTION_REQUEST_API") == "true" {
		// Under the EvictionRequest protocol the Deployment's pods are registered with the
		// Deployment responder at creation (config/admission/eviction-responder).
		framework.InstallEvictionResponderPolicy(t)
	}
	cc := capiClient(t)
	ns := framework.Namespace(t)
	checker := startMachineChecker(t, ns, &invariants.ClusterAPI{})
	c := framework.NewController(t)
	c.Start("--deployment-surge-timeout=2m", "--cluster-api", "--cluster-api-self="+ns+"/e2e")
	createDeployment(t, ns, "web", 1, intstr.FromString("25%"), "3s", 0)
	createStrictPDB(t, ns, "web")
	s := watchApp(t, ns, "web")
	old := s.view().live()[0]
	createCluster(t, cc, ns, "e2e")

	m := newMachine(ns, "md-0-abcde", "e2e", providerID(t, cc, old.Spec.NodeName))
	createDeletedMachine(t, cc, m, old.Spec.NodeName)

	hookReleased(t, cc, m)
	// The hook held the deletion until the node was drained: the old pod is gone by then.
	if err := framework.Client().Get(t.Context(), types.NamespacedName{Namespace: ns, Name: old.Name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pre-drain hook released while pod %s is still there (%v)", old.Name, err)
	}
	s.waitFor(t, waitTimeout, "the pod replaced on another node", func(v view) bool {
		return v.settled(1) && v.pod(old.Name) == nil && v.live()[0].Spec.NodeName != old.Spec.NodeName
	})
	if minReady, _, _ := s.stats(); minReady < 1 {
		t.Errorf("Ready pods went down to %d while Cluster API deleted the Machine", minReady)
	}

	// Cluster API deletes the node and the infrastructure, then lets the Machine go. (The node
	// stays here: the other tests use it.)
	releaseMachine(context.Background(), cc, m)
	key := client.ObjectKeyFromObject(m)
	testutil.Eventually(t, waitTimeout, "the NodeMaintenance gone with the Machine", func(ctx context.Context) (bool, string, error) {
		err := framework.Client().Get(ctx, types.NamespacedName{Name: machinedecide.MaintenanceName(key)}, &nodemaintv1alpha1.NodeMaintenance{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	testutil.Eventually(t, waitTimeout, "nothing of nodemaint's left", func(ctx context.Context) (bool, string, error) {
		err := checker.CheckClean(ctx, ns)
		return err == nil, "", err
	})
	expectMachineChecks(t, checker, 1)
}

// startMachineChecker starts an invariant checker of the namespace's workloads and of the
// Machines of capi's cluster (test/invariants: the pre-drain hook released only once the
// Machine's own node is drained; no node of another providerID cordoned), stopped when the test
// ends.
func startMachineChecker(t *testing.T, ns string, capi *invariants.ClusterAPI) *invariants.Checker {
	t.Helper()
	checker, err := invariants.Start(context.Background(), framework.Cluster().RESTConfig(), framework.CheckerOptions(invariants.Options{
		Namespaces:  []string{ns},
		OnViolation: func(v invariants.Violation) { t.Logf("VIOLATION %s", v) },
		ClusterAPI:  capi,
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = checker.Stop() })
	return checker
}

// expectMachineChecks stops the checker and fails the test on every violation it found, or when
// it judged fewer releases of the hook than released.
func expectMachineChecks(t *testing.T, checker *invariants.Checker, released int) {
	t.Helper()
	if err := checker.Stop(); err != nil {
		t.Error(err)
	}
	for _, v := range checker.Violations() {
		t.Errorf("invariant violated: %s", v)
	}
	if n := checker.MachineReleases(); n < released {
		t.Errorf("the checker judged %d releases of the pre-drain hook, want %d", n, released)
	}
	t.Logf("the invariant checker judged %d releases of the pre-drain hook: %d violations", checker.MachineReleases(), len(checker.Violations()))
}

// TestClusterAPIManagementCluster: Cluster API in its usual topology. The management cluster is
// a kube-apiserver and etcd of its own (Cluster API's CRDs, the Machines, the Clusters and their
// kubeconfig Secrets; nodemaint-controller with --cluster-api); the workload cluster is the
// package's (the nodes, nodemaint-controller draining them). The kubeconfig Secret's user has
// only the rights nodemaint uses there. It shows, in order:
//   - without Cluster API's v1beta2 API the controller says so and runs on;
//   - a Machine deleted in the management cluster has its node drained in the workload cluster,
//     the Deployment surging with a Ready pod at every moment, the hook released once drained,
//     the NodeMaintenance gone with the node, the Machine gone;
//   - a Machine that names a node of another providerID: a Warning, nothing cordoned;
//   - a Machine that names a node the workload cluster does not have (here, one of the
//     management cluster's): its hook released at once, nothing cordoned in either cluster;
//   - a nodeDrainTimeoutSeconds beyond 168h: clamped, and said in an Event;
//   - Machines a/b-c and a-b/c: two NodeMaintenances, both drained;
//   - kubectl maintenance cleanup removes the hook from the Machines left.
func TestClusterAPIManagementCluster(t *testing.T) {
	framework.RequireProtocols(t, framework.PodConditions)
	ctx := t.Context()
	mgmt := framework.StartManagementCluster(t)

	// Cluster API older than 1.11, or not installed: the controller says so, and runs on.
	old := framework.NewControllerFor(t, mgmt.ControllerKubeconfig)
	old.Start("--cluster-api")
	logSays(t, old, "NOT draining the nodes of Cluster API Machines")
	probe := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "mgmt-probe"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{NodeSelector: nodeNamed("none"), Reason: "the controller runs"}}
	if err := mgmt.Client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the management cluster's NodeMaintenance reconciled", func(ctx context.Context) (bool, string, error) {
		err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(probe), probe)
		return err == nil && probe.Status.ObservedGeneration == probe.Generation, "", err
	})
	if !old.Healthy() {
		t.Error("the controller without Cluster API's v1beta2 API is not healthy")
	}
	old.Stop()

	// Cluster API installed in the management cluster; nodemaint in both.
	mgmt.InstallClusterAPI(t)
	framework.Apply(t, "test/e2e/testdata/cluster-api-workload")
	if os.Getenv("EVICTION_REQUEST_API") == "true" {
		framework.InstallEvictionResponderPolicy(t)
	}
	// The workload cluster runs Cluster API too (it manages Machines of its own, or of other
	// clusters): its nodemaint, with --cluster-api, watches the NodeMaintenances the management
	// cluster's creates there, of Machines it does not have, and must leave them be.
	framework.Apply(t, "test/e2e/testdata/cluster-api", "config/cluster-api")
	wc := capiClient(t)
	// The workload cluster's nodes: a pool of two for the Deployment, one empty.
	pool, empty := addNodes(t, 2, "web"), addNodes(t, 1, "empty")[0]
	workload := framework.NewController(t)
	workload.Start("--deployment-surge-timeout=2m", "--cluster-api")
	mc := framework.NewControllerFor(t, mgmt.ControllerKubeconfig)
	mc.Start("--cluster-api")
	t.Cleanup(func() { deleteMaintenances(t, wc) }) // while the workload's controller runs

	// A tenant's namespace of the management cluster, with its Cluster and kubeconfig Secret.
	prefix := "capi-" + utilrand.String(5)
	tenant := mgmt.Namespace(t, prefix+"-tenant")
	kubeconfig := framework.WorkloadKubeconfig(t)
	mgmt.Cluster(t, tenant, "wl", kubeconfig)

	// The management cluster's own node, which no Machine may get drained.
	mgmtNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mgmt-node-0"}, Spec: corev1.NodeSpec{ProviderID: "mgmt://node-0"}}
	if err := mgmt.Client.Create(ctx, mgmtNode); err != nil {
		t.Fatal(err)
	}

	ns := framework.Namespace(t)
	// The invariant checker watches the Machines in the management cluster (with its audit log),
	// the drain in the workload cluster.
	checker := startMachineChecker(t, ns, &invariants.ClusterAPI{Config: mgmt.Config, AuditLog: mgmt.AuditLog})
	d := framework.NewDeployment(ns, "web", 1)
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}
	d.Spec.Template.Spec.NodeSelector = map[string]string{poolLabel: "web"}
	d.Spec.Template.Annotations = map[string]string{localcluster.PodReadyDelayAnnotation: "3s"}
	framework.CreateDeployment(t, d)
	createStrictPDB(t, ns, "web")
	s := watchApp(t, ns, "web")
	pod := s.view().live()[0]
	drained := pod.Spec.NodeName
	other := pool[0]
	if other == drained {
		other = pool[1]
	}

	// The Machines, each deleted as Cluster API deletes it.
	machines := map[string]*clusterv1.Machine{
		"drain":  newMachine(tenant, "md-0-drain", "wl", "kwok://"+drained),
		"forged": newMachine(tenant, "md-0-forged", "wl", "kwok://elsewhere"),
		"mgmt":   newMachine(tenant, "md-0-mgmt", "wl", mgmtNode.Spec.ProviderID),
		"long":   newMachine(tenant, "md-0-long", "wl", "kwok://"+empty),
	}
	machines["long"].Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To[int32](700000)
	nodeOf := map[string]string{"drain": drained, "forged": other, "mgmt": mgmtNode.Name, "long": empty}
	// <prefix>-a/b-c and <prefix>-a-b/c: machine-<namespace>-<name> was one name for both.
	nsA, nsAB := mgmt.Namespace(t, prefix+"-a"), mgmt.Namespace(t, prefix+"-a-b")
	for _, n := range []string{nsA, nsAB} {
		mgmt.Cluster(t, n, "wl", kubeconfig)
	}
	machines["a/b-c"] = newMachine(nsA, "b-c", "wl", "kwok://"+empty)
	machines["a-b/c"] = newMachine(nsAB, "c", "wl", "kwok://"+empty)
	nodeOf["a/b-c"], nodeOf["a-b/c"] = empty, empty
	for name, m := range machines {
		createDeletedMachine(t, mgmt.Client, m, nodeOf[name])
	}
	// One Machine stays, for cleanup.
	kept := newMachine(tenant, "md-0-kept", "wl", "kwok://"+other)
	if err := mgmt.Client.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseMachine(context.Background(), mgmt.Client, kept) })

	// A node that is not the Machine's: a Warning, and nothing cordoned.
	machineEvent(t, mgmt.Client, machines["forged"], machinedecide.RefusedProviderID)
	// Nothing of the management cluster drained: the Machine's node does not exist in its
	// workload cluster, so its hook goes at once.
	hookReleased(t, mgmt.Client, machines["mgmt"])
	for cl, node := range map[client.Client]string{wc: other, mgmt.Client: mgmtNode.Name} {
		n := &corev1.Node{}
		if err := cl.Get(ctx, types.NamespacedName{Name: node}, n); err != nil || n.Spec.Unschedulable {
			t.Errorf("node %s cordoned (%v)", node, err)
		}
	}
	for _, name := range []string{"forged", "mgmt"} {
		key := types.NamespacedName{Name: machinedecide.MaintenanceName(client.ObjectKeyFromObject(machines[name]))}
		for _, cl := range []client.Client{wc, mgmt.Client} {
			if err := cl.Get(ctx, key, &nodemaintv1alpha1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
				t.Errorf("NodeMaintenance %s of the Machine %s: %v", key.Name, name, err)
			}
		}
	}
	if !hooked(t, mgmt.Client, machines["forged"]) {
		t.Error("the Machine whose node is not its own lost the hook")
	}

	// The clamped drain timeout, said; the names apart; all drained.
	machineEvent(t, mgmt.Client, machines["long"], "DrainTimeoutClamped")
	for _, name := range []string{"long", "a/b-c", "a-b/c"} {
		hookReleased(t, mgmt.Client, machines[name])
	}
	long := &nodemaintv1alpha1.NodeMaintenance{}
	if err := wc.Get(ctx, types.NamespacedName{Name: machinedecide.MaintenanceName(client.ObjectKeyFromObject(machines["long"]))}, long); err != nil ||
		long.Spec.DrainTimeout == nil || long.Spec.DrainTimeout.Duration != nodemaintv1alpha1.MaxDrainTimeout {
		t.Errorf("NodeMaintenance of the Machine with nodeDrainTimeoutSeconds 700000: drainTimeout %v (%v)", long.Spec.DrainTimeout, err)
	}
	for _, name := range []string{"a/b-c", "a-b/c"} {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		key := client.ObjectKeyFromObject(machines[name])
		if err := wc.Get(ctx, types.NamespacedName{Name: machinedecide.MaintenanceName(key)}, nm); err != nil || nm.Annotations[nodemaintv1alpha1.MachineAnnotation] != key.String() {
			t.Errorf("NodeMaintenance of Machine %s: %v %v", key, nm.Annotations, err)
		}
	}

	// The drain in the workload cluster: the hook released once the node is drained, the
	// Deployment surged with a Ready pod at every moment.
	hookReleased(t, mgmt.Client, machines["drain"])
	if err := framework.Client().Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pre-drain hook released while pod %s is still there (%v)", pod.Name, err)
	}
	s.waitFor(t, waitTimeout, "the pod replaced on the pool's other node", func(v view) bool {
		return v.settled(1) && v.pod(pod.Name) == nil && v.live()[0].Spec.NodeName == other
	})
	if minReady, _, _ := s.stats(); minReady < 1 {
		t.Errorf("Ready pods went down to %d while Cluster API deleted the Machine", minReady)
	}
	// Cluster API deletes the drained node, then lets the Machine go: the NodeMaintenance
	// goes with the node (its owner).
	if err := framework.Cluster().DeleteNode(ctx, drained); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the NodeMaintenance gone with the node", func(ctx context.Context) (bool, string, error) {
		key := types.NamespacedName{Name: machinedecide.MaintenanceName(client.ObjectKeyFromObject(machines["drain"]))}
		err := wc.Get(ctx, key, &nodemaintv1alpha1.NodeMaintenance{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	releaseMachine(ctx, mgmt.Client, machines["drain"])
	testutil.Eventually(t, waitTimeout, "the Machine gone", func(ctx context.Context) (bool, string, error) {
		err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(machines["drain"]), &clusterv1.Machine{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	// Released: the Machines whose node the workload cluster does not have, or has empty, and the
	// drained one.
	expectMachineChecks(t, checker, 5)

	// Machines that go while their nodes stay (a finalizer removed by hand): the NodeMaintenance of
	// one gone while nodemaint runs is deleted at once; of one gone while it did not run, when it
	// starts again (nothing but the workload cluster remembers that Machine).
	maintenanceGone := func(name string) {
		t.Helper()
		key := types.NamespacedName{Name: machinedecide.MaintenanceName(client.ObjectKeyFromObject(machines[name]))}
		testutil.Eventually(t, waitTimeout, "the NodeMaintenance of the Machine "+name+" gone", func(ctx context.Context) (bool, string, error) {
			err := wc.Get(ctx, key, &nodemaintv1alpha1.NodeMaintenance{})
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		})
	}
	releaseMachine(ctx, mgmt.Client, machines["long"])
	maintenanceGone("long")
	mc.Stop()
	releaseMachine(ctx, mgmt.Client, machines["a/b-c"])
	testutil.Eventually(t, waitTimeout, "the Machine a/b-c gone", func(ctx context.Context) (bool, string, error) {
		err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(machines["a/b-c"]), &clusterv1.Machine{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	mc.Start("--cluster-api")
	maintenanceGone("a/b-c")
	if n := (&corev1.Node{}); wc.Get(ctx, types.NamespacedName{Name: empty}, n) != nil || !n.Spec.Unschedulable {
		t.Errorf("node %s, the Machine a-b/c's (still there, its hook released), not cordoned any more", empty)
	}

	// Uninstall: the controller stopped, cleanup removes the hooks left (the refused Machine's,
	// the Machine not deleted).
	mc.Stop()
	if out, err := runPlugin(t, mgmt.AdminKubeconfig, "cleanup"); err != nil {
		t.Fatalf("kubectl maintenance cleanup: %v\n%s", err, out)
	}
	for _, m := range []*clusterv1.Machine{machines["forged"], kept} {
		if hooked(t, mgmt.Client, m) {
			t.Errorf("Machine %s/%s keeps the hook after cleanup", m.Namespace, m.Name)
		}
	}
}

// poolLabel groups the nodes a test adds.
const poolLabel = "nodemaint.dev/e2e-capi-pool"

// addNodes adds n nodes of the pool to the package's cluster, each with its providerID
// (kwok://<name>), deleted when the test ends.
func addNodes(t *testing.T, n int, pool string) []string {
	t.Helper()
	names, err := framework.Cluster().AddNodes(t.Context(), n, localcluster.WithLabels(map[string]string{poolLabel: pool}),
		func(node *corev1.Node) { node.Spec.ProviderID = "kwok://" + node.Name })
	t.Cleanup(func() {
		for _, name := range names {
			_ = framework.Cluster().DeleteNode(context.Background(), name)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// providerID returns the node's spec.providerID, set to kwok://<name> first where it has none
// (it can be set once).
func providerID(t *testing.T, c client.Client, node string) string {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(t.Context(), types.NamespacedName{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.ProviderID == "" {
		orig := n.DeepCopy()
		n.Spec.ProviderID = "kwok://" + node
		if err := c.Patch(t.Context(), n, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
	return n.Spec.ProviderID
}

// createCluster creates a Cluster API Cluster.
func createCluster(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}}
	if err := c.Create(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
}

// newMachine is a Cluster API Machine of the cluster that carries nodemaint's pre-drain hook
// and Cluster API's finalizer, as its MachineSet creates it.
func newMachine(ns, name, cluster, providerID string) *clusterv1.Machine {
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{nodemaintv1alpha1.ClusterAPIPreDrainHook: "nodemaint"},
			Labels:      map[string]string{clusterv1.ClusterNameLabel: cluster},
			Finalizers:  []string{machineFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: name},
			ProviderID:        providerID,
			Deletion:          clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](600)},
		},
	}
}

// createDeletedMachine creates the Machine, sets its node as Cluster API's Machine controller
// does, and deletes it; its finalizer goes when the test ends.
func createDeletedMachine(t *testing.T, c client.Client, m *clusterv1.Machine, node string) {
	t.Helper()
	if err := c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseMachine(context.Background(), c, m) })
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	if err := c.Status().Update(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// releaseMachine removes Cluster API's finalizer, so the deleted Machine goes.
func releaseMachine(ctx context.Context, c client.Client, m *clusterv1.Machine) {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	cur := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
	_ = c.Patch(ctx, cur, client.RawPatch(types.MergePatchType, patch))
}

// hooked reports whether the Machine carries nodemaint's pre-drain hook.
func hooked(t *testing.T, c client.Client, m *clusterv1.Machine) bool {
	t.Helper()
	cur := &clusterv1.Machine{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	return machinedecide.Hooked(cur)
}

// hookReleased waits until nodemaint released the Machine's pre-drain hook.
func hookReleased(t *testing.T, c client.Client, m *clusterv1.Machine) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, fmt.Sprintf("the pre-drain hook of Machine %s/%s released", m.Namespace, m.Name), func(ctx context.Context) (bool, string, error) {
		cur := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
			return false, "", err
		}
		return !machinedecide.Hooked(cur), "hooked", nil
	})
}

// machineEvent waits for an Event of the reason about the Machine.
func machineEvent(t *testing.T, c client.Client, m *clusterv1.Machine, reason string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, fmt.Sprintf("Event %s about Machine %s/%s", reason, m.Namespace, m.Name), func(ctx context.Context) (bool, string, error) {
		var list corev1.EventList
		if err := c.List(ctx, &list, client.InNamespace(m.Namespace)); err != nil {
			return false, "", err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Machine" && e.InvolvedObject.Name == m.Name && e.Reason == reason {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d Events in the namespace", len(list.Items)), nil
	})
}

// logSays waits until the controller's log says what.
func logSays(t *testing.T, c *framework.Controller, what string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "the controller's log to say "+what, func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(c.LogPath())
		return strings.Contains(string(b), what), c.LogPath(), err
	})
}

// deleteMaintenances deletes the NodeMaintenances created for Machines and waits until they are
// gone, their nodes restored for the next test.
func deleteMaintenances(t *testing.T, c client.Client) {
	ctx := context.Background()
	var list nodemaintv1alpha1.NodeMaintenanceList
	if err := c.List(ctx, &list, client.HasLabels{nodemaintv1alpha1.MachineNamespaceLabel}); err != nil {
		t.Error(err)
		return
	}
	for i := range list.Items {
		_ = c.Delete(ctx, &list.Items[i])
	}
	for i := range list.Items {
		testutil.Eventually(t, waitTimeout, "NodeMaintenance "+list.Items[i].Name+" gone", func(ctx context.Context) (bool, string, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(&list.Items[i]), &nodemaintv1alpha1.NodeMaintenance{})
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		})
	}
}

// runPlugin runs kubectl-maintenance of $NODEMAINT_BIN_DIR with the kubeconfig.
func runPlugin(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(os.Getenv("NODEMAINT_BIN_DIR"), "kubectl-maintenance")
	out, err := exec.CommandContext(t.Context(), bin, append(args, "--kubeconfig", kubeconfig)...).CombinedOutput()
	return string(out), err
}

// nodeNamed selects the node of the name.
func nodeNamed(name string) corev1.NodeSelector {
	return corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{name}}},
	}}}
}
