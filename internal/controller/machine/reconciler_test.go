package machine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/machine/machinedecide"
)

// testScheme knows the objects the Machine controller reads and writes: core, Cluster API's and
// nodemaint's.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, nodemaintv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

// TestOnlyOwnMaintenancesOfGoneMachines: a cluster that is the workload cluster of a management
// cluster and runs nodemaint with --cluster-api itself holds the NodeMaintenances the management
// cluster's nodemaint created for its Machines, which this cluster does not have. Its nodemaint
// deletes the NodeMaintenance of a Machine gone only where it is its own: created for a Machine of
// this cluster (its kube-system namespace's UID), or by a nodemaint that did not say (older).
func TestOnlyOwnMaintenancesOfGoneMachines(t *testing.T) {
	scheme := testScheme(t)
	self := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "this-cluster"}}
	maintenance := func(machine, cluster string) *nodemaintv1alpha1.NodeMaintenance {
		key := types.NamespacedName{Namespace: "capi", Name: machine}
		nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: machinedecide.MaintenanceName(key), UID: types.UID("nm-" + machine),
			Annotations: map[string]string{nodemaintv1alpha1.MachineAnnotation: key.String()}}}
		if cluster != "" {
			nm.Annotations[nodemaintv1alpha1.MachineClusterAnnotation] = cluster
		}
		return nm
	}
	for name, tc := range map[string]struct {
		nm   *nodemaintv1alpha1.NodeMaintenance
		kept bool
	}{
		"another cluster's Machine": {maintenance("theirs", "management-cluster"), true},
		"this cluster's Machine":    {maintenance("ours", "this-cluster"), false},
		"an older nodemaint's":      {maintenance("older", ""), false},
	} {
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(self, tc.nm).Build()
		r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Workloads: &Workloads{}}
		key := machineOf(t.Context(), tc.nm)
		if len(key) != 1 {
			t.Fatalf("%s: %v", name, key)
		}
		if _, err := r.Reconcile(t.Context(), key[0]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := c.Get(t.Context(), client.ObjectKeyFromObject(tc.nm), &nodemaintv1alpha1.NodeMaintenance{})
		if kept := err == nil; kept != tc.kept || err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("%s: NodeMaintenance kept %v (%v), want %v", name, kept, err, tc.kept)
		}
	}
}
