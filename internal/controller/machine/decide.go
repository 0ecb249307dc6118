// Package machine holds the Cluster API controller (opt-in, --cluster-api): nodemaint takes over
// the drain of a Machine that Cluster API deletes, through the Machine's pre-drain hook. For a
// Machine being deleted that carries nodemaint's hook (nodemaintv1alpha1.ClusterAPIPreDrainHook),
// it creates a NodeMaintenance of the Machine's node, removes the hook once that maintenance
// reports the node Drained (or its drainTimeout ran out), and deletes the maintenance once the
// Machine is gone. Cluster API's own drain then finds the node empty. Observe (Reconciler),
// decide (Decide, pure), apply (Reconciler): the controller's shape.
package machine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Observation is what a Machine's reconcile decides from.
type Observation struct {
	// Key is the Machine's; Machine is nil when it is gone.
	Key     types.NamespacedName
	Machine *clusterv1.Machine
	// Maintenance is the Machine's NodeMaintenance (MaintenanceName), nil when there is none.
	Maintenance *nodemaintv1alpha1.NodeMaintenance
}

// Decision is what to write for the Machine, in this order.
type Decision struct {
	// Create is the NodeMaintenance to create; nil: none.
	Create *nodemaintv1alpha1.NodeMaintenance
	// ReleaseHook: remove nodemaint's pre-drain hook from the Machine, because Why.
	ReleaseHook bool
	Why         string
	// DeleteMaintenance: the Machine is gone; its NodeMaintenance goes too.
	DeleteMaintenance bool
}

// Decide decides what to do for the Machine.
func Decide(obs Observation) Decision {
	m := obs.Machine
	switch {
	case m == nil:
		return Decision{DeleteMaintenance: obs.Maintenance != nil}
	case m.DeletionTimestamp == nil || !Hooked(m):
		// Not being deleted, or the hook is released: the maintenance, if any, stays until the
		// Machine is gone, so the node stays cordoned while Cluster API deletes it.
		return Decision{}
	case m.Status.NodeRef.Name == "":
		return Decision{ReleaseHook: true, Why: "the Machine has no node"}
	case obs.Maintenance == nil:
		return Decision{Create: Maintenance(m)}
	}
	nm := obs.Maintenance
	switch {
	case nm.DeletionTimestamp != nil:
		return Decision{ReleaseHook: true, Why: "its NodeMaintenance is being deleted"}
	case meta.IsStatusConditionTrue(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrained):
		return Decision{ReleaseHook: true, Why: "NodeMaintenance " + nm.Name + " drained node " + m.Status.NodeRef.Name}
	case meta.IsStatusConditionTrue(nm.Status.Conditions, nodemaintv1alpha1.ConditionDrainTimedOut):
		return Decision{ReleaseHook: true, Why: "NodeMaintenance " + nm.Name + " did not drain node " + m.Status.NodeRef.Name + " within its drainTimeout"}
	}
	return Decision{}
}

// Hooked reports whether the Machine carries nodemaint's pre-drain hook.
func Hooked(m *clusterv1.Machine) bool {
	_, ok := m.Annotations[nodemaintv1alpha1.ClusterAPIPreDrainHook]
	return ok
}

// MaintenanceName is the name of the NodeMaintenance nodemaint creates for the Machine:
// machine-<namespace>-<name>, or a hash of the two where that is too long for a name.
func MaintenanceName(key types.NamespacedName) string {
	name := "machine-" + key.Namespace + "-" + key.Name
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(key.Namespace + "/" + key.Name))
	return "machine-" + hex.EncodeToString(sum[:10])
}

// Maintenance is the NodeMaintenance that drains the Machine's node: cordon and drain, the
// Machine's nodeDrainTimeoutSeconds as drainTimeout (reported, never deleting), labelled with the
// Machine so that it is found again.
func Maintenance(m *clusterv1.Machine) *nodemaintv1alpha1.NodeMaintenance {
	node := m.Status.NodeRef.Name
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{
			Name: MaintenanceName(types.NamespacedName{Namespace: m.Namespace, Name: m.Name}),
			Labels: map[string]string{
				nodemaintv1alpha1.MachineNamespaceLabel: m.Namespace,
				nodemaintv1alpha1.MachineNameLabel:      labelValue(m.Name),
			},
			Annotations: map[string]string{nodemaintv1alpha1.MachineAnnotation: m.Namespace + "/" + m.Name},
		},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: nodeSelector(node),
			Cordon:       true,
			Drain:        true,
			Reason:       fmt.Sprintf("Cluster API deletes Machine %s/%s", m.Namespace, m.Name),
		},
	}
	if s := m.Spec.Deletion.NodeDrainTimeoutSeconds; s != nil && *s > 0 {
		nm.Spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: time.Duration(*s) * time.Second}
	}
	return nm
}

// labelValue is the value as a label value: itself when it fits (63 characters), else a hash.
func labelValue(v string) string {
	if len(v) <= 63 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:16])
}

// nodeSelector selects the node by name.
func nodeSelector(node string) corev1.NodeSelector {
	return corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
}
