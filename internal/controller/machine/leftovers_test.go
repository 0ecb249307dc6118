package machine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/machine/machinedecide"
)

// TestLeftoversAfterARestart: a Machine that went while no nodemaint ran is remembered nowhere;
// the leftovers controller, at the Cluster's create event (every Cluster when the manager
// starts), finds its NodeMaintenance in the workload cluster and hands it to the Machine
// controller, which deletes it. Those of Machines still there, of another cluster's Machines or
// of another namespace's stay.
func TestLeftoversAfterARestart(t *testing.T) {
	scheme := testScheme(t)
	cluster := types.NamespacedName{Namespace: "capi", Name: "wl"}
	maintenance := func(ns, machine, self string) *nodemaintv1alpha1.NodeMaintenance {
		key := types.NamespacedName{Namespace: ns, Name: machine}
		return &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: machinedecide.MaintenanceName(key), UID: types.UID("nm-" + ns + "-" + machine),
			Labels:      map[string]string{nodemaintv1alpha1.MachineNamespaceLabel: ns},
			Annotations: map[string]string{nodemaintv1alpha1.MachineAnnotation: key.String(), nodemaintv1alpha1.MachineClusterAnnotation: self}}}
	}
	gone := maintenance("capi", "gone", "management")
	kept := map[string]*nodemaintv1alpha1.NodeMaintenance{
		"of a Machine still there":       maintenance("capi", "there", "management"),
		"of another cluster's Machine":   maintenance("capi", "theirs", "another-management"),
		"of another namespace's Machine": maintenance("other", "gone", "management"),
	}
	// The management cluster: the Cluster, one Machine left, its identity.
	mgmt := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "management"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "there"}, Spec: clusterv1.MachineSpec{ClusterName: cluster.Name}},
	).Build()
	workload := fake.NewClientBuilder().WithScheme(scheme).WithObjects(gone, kept["of a Machine still there"],
		kept["of another cluster's Machine"], kept["of another namespace's Machine"]).Build()
	// A Reconciler just started: it remembers no Machine gone.
	r := &Reconciler{Client: mgmt, Recorder: events.NewFakeRecorder(10), Workloads: &Workloads{Self: cluster, Local: workload}}

	// Without the leftovers controller, the NodeMaintenance's own event finds nothing to delete.
	if _, err := r.Reconcile(t.Context(), machineOf(t.Context(), gone)[0]); err != nil {
		t.Fatal(err)
	}
	if err := workload.Get(t.Context(), client.ObjectKeyFromObject(gone), &nodemaintv1alpha1.NodeMaintenance{}); err != nil {
		t.Fatalf("before the leftovers controller looked: %v", err)
	}

	found := make(chan event.GenericEvent, 10)
	if _, err := (&leftovers{r: r, found: found}).Reconcile(t.Context(), reconcile.Request{NamespacedName: cluster}); err != nil {
		t.Fatal(err)
	}
	close(found)
	var handed []string
	for e := range found {
		handed = append(handed, e.Object.GetName())
		for _, req := range machineOf(t.Context(), e.Object) {
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(handed) != 1 || handed[0] != gone.Name {
		t.Errorf("handed to the Machine controller: %v, want [%s]", handed, gone.Name)
	}
	if err := workload.Get(t.Context(), client.ObjectKeyFromObject(gone), &nodemaintv1alpha1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
		t.Errorf("the NodeMaintenance of the Machine gone while no nodemaint ran: %v, want it deleted", err)
	}
	for why, nm := range kept {
		if err := workload.Get(t.Context(), client.ObjectKeyFromObject(nm), &nodemaintv1alpha1.NodeMaintenance{}); err != nil {
			t.Errorf("the NodeMaintenance %s: %v, want it kept", why, err)
		}
	}
}
