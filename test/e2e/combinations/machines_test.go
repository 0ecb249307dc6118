package combinations_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/machine/machinedecide"
	"github.com/nodemaint/nodemaint/test/e2e/framework"
)

// Cluster API: some lanes delete a Machine of one of their nodes while their maintenances run, in
// the batch's topology: self-hosted (the Machine in this cluster, --cluster-api-self) or in the
// package's management cluster (a kube-apiserver of its own, where a controller runs with
// --cluster-api and reaches this cluster, its workload cluster, through the Cluster's kubeconfig
// Secret). The Machine carries nodemaint's pre-drain hook; nodemaint drains its node alongside
// the lane's maintenances (its own NodeMaintenance, in this cluster: cordon, drain, Evict,
// Report, the default response timeout, the Machine's nodeDrainTimeoutSeconds) and releases the
// hook, which the invariant checker judges (test/invariants, machines.go) in both clusters; the
// test plays Cluster API and lets the Machine go once the hook is released (the node stays: the
// lanes share nothing but it is the lane's), or at the end of the batch.

// machineVariant is how a lane's Machine relates to its node.
type machineVariant string

const (
	// machineOwn: the Machine's node, of its providerID: drained, then released.
	machineOwn machineVariant = "own node"
	// machineForged: the Machine names a lane's node of another providerID (a tenant's Machine
	// naming any node): nothing may be cordoned for it; the hook stays.
	machineForged machineVariant = "another providerID's node"
	// machineNoNode: the Machine names a node that does not exist: its hook is released at once.
	machineNoNode machineVariant = "no node"
)

var machineVariants = []machineVariant{machineOwn, machineOwn, machineOwn, machineForged, machineNoNode}

// topology is where a batch's Machines live. Not both in one batch: nodemaint running with
// --cluster-api in a cluster takes the NodeMaintenances another cluster's nodemaint created there
// for its Machines as those of its own Machines gone, and deletes them.
type topology string

const (
	selfHosted topology = "self-hosted"
	management topology = "management cluster"
)

// clusterName is the Cluster of the batches' Machines: --cluster-api-self, and the management
// cluster's Cluster of this one.
const clusterName = "combinations"

// machineFinalizer is Cluster API's, which it removes once the Machine's node is gone.
const machineFinalizer = "machine.cluster.x-k8s.io"

// drawnMachine is a lane's Machine: deleted at deleteAt.
type drawnMachine struct {
	name     string
	node     string
	variant  machineVariant
	topology topology
	deleteAt time.Duration
	// drainTimeout is its nodeDrainTimeoutSeconds; 0: none.
	drainTimeout int32
}

func (m drawnMachine) String() string {
	s := fmt.Sprintf("Machine %s (%s) of %s (%s) deleted at %v", m.name, m.topology, m.node, m.variant, m.deleteAt.Round(time.Second))
	if m.drainTimeout > 0 {
		s += fmt.Sprintf(", nodeDrainTimeoutSeconds %d", m.drainTimeout)
	}
	return s
}

// drawMachines draws the batch's Machines, after everything else so that a seed draws the rest as
// before: a lane in three has one, and every batch at least one, all in the batch's topology.
func drawMachines(rng *rand.Rand, b *batch, s runSize) {
	for i := range b.lanes {
		if rng.IntN(3) == 0 {
			b.lanes[i].machine = drawMachine(rng, b.lanes[i], s)
		}
	}
	if !slices.ContainsFunc(b.lanes, func(sc scenario) bool { return sc.machine != nil }) && len(b.lanes) > 0 {
		b.lanes[0].machine = drawMachine(rng, b.lanes[0], s)
	}
	for i := range b.lanes {
		if m := b.lanes[i].machine; m != nil {
			m.topology = b.topology
		}
	}
}

func drawMachine(rng *rand.Rand, sc scenario, s runSize) *drawnMachine {
	m := &drawnMachine{
		name:     fmt.Sprintf("lane-%d-machine", sc.lane),
		node:     sc.nodes[rng.IntN(len(sc.nodes))],
		variant:  machineVariants[rng.IntN(len(machineVariants))],
		deleteAt: time.Duration(rng.Int64N(int64(s.span / 2))),
	}
	if m.variant == machineNoNode {
		m.node = fmt.Sprintf("lane-%d-gone", sc.lane)
	}
	if rng.IntN(3) == 0 {
		m.drainTimeout = int32(15 + rng.IntN(16))
	}
	return m
}

// capiScheme knows the Kubernetes, nodemaint and Cluster API types.
var capiScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(s))
	return s
}()

// installClusterAPI installs Cluster API's Machine and Cluster CRDs and nodemaint's rights on them,
// and gives every node its providerID (kwok://<name>; it can be set once).
func installClusterAPI(t *testing.T) {
	t.Helper()
	framework.Apply(t, "test/e2e/testdata/cluster-api", "config/cluster-api")
	var nodes corev1.NodeList
	if err := framework.Client().List(t.Context(), &nodes); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Spec.ProviderID != "" {
			continue
		}
		orig := n.DeepCopy()
		n.Spec.ProviderID = "kwok://" + n.Name
		if err := framework.Client().Patch(t.Context(), n, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
}

// managementCluster is the package's Cluster API management cluster, started in the background
// before the first batch that draws one of its Machines, and its nodemaint-controller
// (--cluster-api), started once the cluster is ready.
type managementCluster struct {
	wait func(testing.TB) *framework.Management
	*framework.Management
	ctrl *framework.Controller
	// kubeconfig is this cluster's, the value of each Cluster's kubeconfig Secret.
	kubeconfig []byte
	started    time.Time
	// top is the package's test, which the controller is tied to.
	top *testing.T
}

// startManagement starts the management cluster in the background, stopped when t ends.
func startManagement(t *testing.T) *managementCluster {
	t.Helper()
	return &managementCluster{wait: framework.StartManagementClusterInBackground(t), kubeconfig: framework.WorkloadKubeconfig(t), started: time.Now(), top: t}
}

// ready waits for the management cluster and, the first time, starts its controller.
func (m *managementCluster) ready(t *testing.T) {
	t.Helper()
	if m == nil || m.Management != nil {
		return
	}
	waited := time.Now()
	m.Management = m.wait(t)
	t.Logf("management cluster ready %v after it was started in the background (waited %v)",
		time.Since(m.started).Round(100*time.Millisecond), time.Since(waited).Round(100*time.Millisecond))
	m.ctrl = framework.NewControllerFor(m.top, m.ControllerKubeconfig)
	m.ctrl.Start("--cluster-api")
}

// keepAlive starts the management cluster's controller again when it exited by itself (a lease
// not renewed in time on a loaded machine).
func (m *managementCluster) keepAlive(t *testing.T) {
	if m == nil || m.ctrl == nil || !m.ctrl.Running() || m.ctrl.Healthy() {
		return
	}
	t.Logf("the management cluster's controller exited by itself; starting it again")
	m.ctrl.Kill()
	m.ctrl.Start("--cluster-api")
}

// machines plays Cluster API for a batch: it creates the batch's Cluster (self-hosted, the
// cluster itself, --cluster-api-self; else in the management cluster, the Cluster of this one
// with its kubeconfig Secret), deletes each Machine as its MachineSet does, and lets it go once
// nodemaint released its hook.
type machines struct {
	t *testing.T
	// c is this cluster's, mgmt the management cluster's (nil: none); ns is the batch's namespace
	// of Machines in both.
	c, mgmt client.Client
	ns      string
	deleted []deletedMachine
	// released counts the Machines seen released, by topology.
	released map[topology]int
}

type deletedMachine struct {
	*clusterv1.Machine
	topology topology
}

// newMachines creates the batch's namespace of Machines and its Cluster, in the cluster of the
// topology.
func newMachines(t *testing.T, tp topology, mgmt *managementCluster) *machines {
	t.Helper()
	c, err := client.New(framework.Cluster().RESTConfig(), client.Options{Scheme: capiScheme})
	if err != nil {
		t.Fatal(err)
	}
	m := &machines{t: t, c: c, ns: framework.Namespace(t), released: map[topology]int{}}
	if tp == management {
		m.mgmt = mgmt.Client
		mgmt.Namespace(t, m.ns)
		mgmt.Cluster(t, m.ns, clusterName, mgmt.kubeconfig)
	} else {
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: clusterName}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}}
		if err := c.Create(t.Context(), cluster); err != nil {
			t.Fatal(err)
		}
	}
	// Whatever happens, no Machine of the batch holds its namespace.
	t.Cleanup(func() { m.letAllGo(context.Background()) })
	return m
}

// self is the --cluster-api-self of the batch.
func (m *machines) self() string { return m.ns + "/" + clusterName }

// clientOf returns the client of the cluster of the Machine's topology.
func (m *machines) clientOf(tp topology) client.Client {
	if tp == management {
		return m.mgmt
	}
	return m.c
}

// delete creates the drawn Machine in the cluster of its topology, sets its node as Cluster API's
// Machine controller does, and deletes it.
func (m *machines) delete(d *drawnMachine) {
	t := m.t
	providerID := "kwok://" + d.node
	if d.variant != machineNoNode {
		node := &corev1.Node{}
		if err := m.c.Get(t.Context(), client.ObjectKey{Name: d.node}, node); err != nil {
			t.Fatalf("reading node %s of Machine %s: %v", d.node, d.name, err)
		}
		providerID = node.Spec.ProviderID
		if d.variant == machineForged {
			providerID += "-elsewhere"
		}
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: d.name,
			Annotations: map[string]string{nodemaintv1alpha1.ClusterAPIPreDrainHook: "nodemaint"},
			Labels:      map[string]string{clusterv1.ClusterNameLabel: clusterName},
			Finalizers:  []string{machineFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       clusterName,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(d.name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KwokMachine", Name: d.name},
			ProviderID:        providerID,
		},
	}
	if d.drainTimeout > 0 {
		machine.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To(d.drainTimeout)
	}
	c := m.clientOf(d.topology)
	if c == nil {
		t.Fatalf("Machine %s of the management cluster: the batch has none", d.name)
	}
	if err := c.Create(t.Context(), machine); err != nil {
		t.Fatalf("creating Machine %s: %v", d.name, err)
	}
	machine.Status.NodeRef = clusterv1.MachineNodeReference{Name: d.node}
	if err := c.Status().Update(t.Context(), machine); err != nil {
		t.Fatalf("setting the node of Machine %s: %v", d.name, err)
	}
	if err := c.Delete(t.Context(), machine); err != nil {
		t.Fatalf("deleting Machine %s: %v", d.name, err)
	}
	m.deleted = append(m.deleted, deletedMachine{Machine: machine, topology: d.topology})
}

// letReleasedGo lets the deleted Machines whose hook nodemaint released go, as Cluster API does
// once it drained and deleted the node (the node stays here: it is the lane's).
func (m *machines) letReleasedGo(ctx context.Context) {
	n := 0
	for _, d := range m.deleted {
		if m.releasedGo(ctx, d) {
			continue
		}
		m.deleted[n] = d
		n++
	}
	m.deleted = m.deleted[:n]
}

// releasedGo lets the Machine go when nodemaint released its hook, and reports whether it is gone
// or let go.
func (m *machines) releasedGo(ctx context.Context, d deletedMachine) bool {
	c := m.clientOf(d.topology)
	cur := &clusterv1.Machine{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(d.Machine), cur); {
	case apierrors.IsNotFound(err):
		return true
	case err == nil && !hooked(cur):
		m.t.Logf("Machine %s (%s): pre-drain hook released; Cluster API lets it go", d.Name, d.topology)
		m.released[d.topology]++
		letGo(ctx, c, d.Machine)
		return true
	}
	return false
}

// letAllGo lets every Machine of the batch go, released or not (the batch is over), and says
// where each one still held stood.
func (m *machines) letAllGo(ctx context.Context) {
	for _, d := range m.deleted {
		if m.releasedGo(ctx, d) {
			continue
		}
		m.t.Logf("Machine %s (%s): pre-drain hook held at the end of the batch; %s; Events: %s", d.Name, d.topology, m.maintenanceOf(ctx, d.Machine), m.eventsOf(ctx, d))
		letGo(ctx, m.clientOf(d.topology), d.Machine)
	}
	m.deleted = nil
}

// eventsOf says the Events about the Machine in its cluster.
func (m *machines) eventsOf(ctx context.Context, d deletedMachine) string {
	var list corev1.EventList
	if err := m.clientOf(d.topology).List(ctx, &list, client.InNamespace(d.Namespace)); err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Machine" && e.InvolvedObject.Name == d.Name {
			out = append(out, fmt.Sprintf("%s %s: %.200s", e.Type, e.Reason, e.Message))
		}
	}
	return cmp.Or(strings.Join(out, "; "), "none")
}

// maintenanceOf says where the NodeMaintenance of the Machine stands.
func (m *machines) maintenanceOf(ctx context.Context, machine *clusterv1.Machine) string {
	name := machinedecide.MaintenanceName(client.ObjectKeyFromObject(machine))
	nm := &nodemaintv1alpha1.NodeMaintenance{}
	switch err := m.c.Get(ctx, client.ObjectKey{Name: name}, nm); {
	case apierrors.IsNotFound(err):
		return "no NodeMaintenance of it"
	case err != nil:
		return fmt.Sprintf("its NodeMaintenance %s: %v", name, err)
	}
	var conds []string
	for _, c := range nm.Status.Conditions {
		if c.Type == nodemaintv1alpha1.ConditionDrained || c.Type == nodemaintv1alpha1.ConditionDrainTimedOut {
			conds = append(conds, fmt.Sprintf("%s=%s (%s: %.200s)", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	return fmt.Sprintf("its NodeMaintenance %s: %s", name, strings.Join(conds, ", "))
}

func letGo(ctx context.Context, c client.Client, machine *clusterv1.Machine) {
	cur := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: machine.Namespace, Name: machine.Name}}
	_ = c.Patch(ctx, cur, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
}

func hooked(m *clusterv1.Machine) bool {
	_, ok := m.Annotations[nodemaintv1alpha1.ClusterAPIPreDrainHook]
	return ok
}
