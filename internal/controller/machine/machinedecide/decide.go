// Package machinedecide is the Cluster API controller's decision, pure: from what one Machine's
// reconcile observed (Observation), what it does (Decision): create its node's NodeMaintenance in
// the workload cluster, release the pre-drain hook, delete the maintenance, or nothing.
package machinedecide

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Observation is what a Machine's reconcile decides from.
type Observation struct {
	// Key is the Machine's; Machine is nil when it is gone.
	Key     types.NamespacedName
	Machine *clusterv1.Machine
	// Cluster is the Machine's Cluster (spec.clusterName, in the Machine's namespace); nil when
	// there is none.
	Cluster *clusterv1.Cluster
	// Unreachable says why the Machine's workload cluster cannot be reached (no kubeconfig
	// Secret and not --cluster-api-self, an unusable kubeconfig); empty when it was reached, or
	// not looked at. Node and Maintenance are read only where it was reached.
	Unreachable string
	// Node is the Machine's node (status.nodeRef.name) in the workload cluster; nil when it does
	// not exist there (or was not looked at).
	Node *corev1.Node
	// Maintenance is the Machine's NodeMaintenance (MaintenanceName) in the workload cluster,
	// nil when there is none.
	Maintenance *nodemaintv1alpha1.NodeMaintenance
	// Self is the identity of this cluster, where the Machine is: its kube-system namespace's
	// UID (see nodemaintv1alpha1.MachineClusterAnnotation).
	Self types.UID
}

// Decision is what to write for the Machine, in this order.
type Decision struct {
	// Create is the NodeMaintenance to create in the workload cluster; nil: none. Clamped: its
	// drainTimeout is the CRD's bound, below the Machine's nodeDrainTimeoutSeconds.
	Create  *nodemaintv1alpha1.NodeMaintenance
	Clamped bool
	// ReleaseHook: remove nodemaint's pre-drain hook from the Machine, because Why.
	ReleaseHook bool
	Why         string
	// Refused is the reason of a Warning Event on the Machine (Why says what): nodemaint
	// does not drain its node, and the hook stays.
	Refused string
	// DeleteMaintenance: the Machine is gone, or the maintenance's node is not the Machine's;
	// its NodeMaintenance goes (only ever one created for a Machine of this cluster: Own).
	DeleteMaintenance bool
	// Wait: nothing to write yet; look again (a workload cluster's NodeMaintenance is read,
	// not watched).
	Wait bool
}

// Refusals, the reasons of the Warning Events that say nodemaint does not drain a Machine's node.
const (
	// RefusedWorkloadCluster: the Machine's workload cluster cannot be reached.
	RefusedWorkloadCluster = "WorkloadClusterUnknown"
	// RefusedProviderID: the node named by the Machine is not the Machine's (spec.providerID).
	RefusedProviderID = "ProviderIDMismatch"
)

// Decide decides what to do for the Machine.
func Decide(obs Observation) Decision {
	if obs.Maintenance != nil && !Own(obs.Maintenance, obs.Self) {
		// Another cluster's nodemaint created it, for a Machine of that cluster of the same
		// namespace and name: not this Machine's, and not this nodemaint's to delete.
		obs.Maintenance = nil
	}
	m := obs.Machine
	switch {
	case m == nil:
		return Decision{DeleteMaintenance: obs.Maintenance != nil}
	case m.DeletionTimestamp == nil || !Hooked(m):
		// Not being deleted, or the hook is released: the maintenance, if any, stays until the
		// node or the Machine is gone, so the node stays cordoned while Cluster API deletes it.
		return Decision{}
	case !Applies(m, obs.Cluster):
		// Cluster API waits on no pre-drain hook of a Machine whose Cluster is gone or being
		// deleted, and does nothing while it is paused: neither does nodemaint.
		return Decision{}
	case m.Status.NodeRef.Name == "":
		return Decision{ReleaseHook: true, Why: "the Machine has no node"}
	case obs.Unreachable != "":
		return Decision{Refused: RefusedWorkloadCluster, Why: obs.Unreachable, Wait: true}
	case obs.Node == nil:
		// Cluster API skips the drain of a node that does not exist.
		return Decision{ReleaseHook: true, Why: "node " + m.Status.NodeRef.Name + " does not exist in the Machine's workload cluster"}
	case !sameProvider(m, obs.Node):
		return Decision{Refused: RefusedProviderID, Wait: true, DeleteMaintenance: obs.Maintenance != nil,
			Why: fmt.Sprintf("node %s has spec.providerID %q, the Machine %q: it is not the Machine's node, and nodemaint does not drain it",
				obs.Node.Name, obs.Node.Spec.ProviderID, m.Spec.ProviderID)}
	case obs.Maintenance == nil:
		nm, clamped := Maintenance(m, obs.Node, obs.Self)
		return Decision{Create: nm, Clamped: clamped, Wait: true}
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
	return Decision{Wait: true}
}

// Applies reports whether Cluster API waits on the Machine's pre-drain hooks: its Cluster exists,
// is not being deleted, and neither is paused.
func Applies(m *clusterv1.Machine, c *clusterv1.Cluster) bool {
	if c == nil || c.DeletionTimestamp != nil || ptr.Deref(c.Spec.Paused, false) {
		return false
	}
	_, machinePaused := m.Annotations[clusterv1.PausedAnnotation]
	_, clusterPaused := c.Annotations[clusterv1.PausedAnnotation]
	return !machinePaused && !clusterPaused
}

// sameProvider reports whether the node is the Machine's: the same non-empty spec.providerID.
func sameProvider(m *clusterv1.Machine, node *corev1.Node) bool {
	return m.Spec.ProviderID != "" && node.Spec.ProviderID == m.Spec.ProviderID
}

// Own reports whether the NodeMaintenance was created for a Machine of the cluster self: it names
// self (nodemaintv1alpha1.MachineClusterAnnotation), or no cluster (an older nodemaint created
// it, and it is taken for this cluster's, as that nodemaint took it).
func Own(nm *nodemaintv1alpha1.NodeMaintenance, self types.UID) bool {
	v, ok := nm.Annotations[nodemaintv1alpha1.MachineClusterAnnotation]
	return !ok || v == string(self)
}

// Hooked reports whether the Machine carries nodemaint's pre-drain hook.
func Hooked(m *clusterv1.Machine) bool {
	_, ok := m.Annotations[nodemaintv1alpha1.ClusterAPIPreDrainHook]
	return ok
}

// nameLen is how much of a Machine's name its NodeMaintenance's name keeps.
const nameLen = 40

// MaintenanceName is the name of the NodeMaintenance nodemaint creates for the Machine:
// machine-<name>-<hash>, the name cut to 40 characters and the hash of the namespace and the
// name, so that no two Machines share one, whatever their namespaces (a workload cluster may
// hold the maintenances of Machines of several namespaces of its management cluster), and it
// stays short (59 characters at most).
func MaintenanceName(key types.NamespacedName) string {
	sum := sha256.Sum256([]byte(key.Namespace + "/" + key.Name))
	name := key.Name
	if len(name) > nameLen {
		// A cut name may end in '.' or '-', which may not precede the '-' that follows it.
		name = strings.TrimRight(name[:nameLen], ".-")
	}
	return "machine-" + name + "-" + hex.EncodeToString(sum[:5])
}

// Maintenance is the NodeMaintenance that drains the Machine's node: cordon and drain, the
// Machine's nodeDrainTimeoutSeconds as drainTimeout (reported, never deleting; clamped to the
// CRD's bound, which clamped says), labelled with the Machine so that it is found again,
// annotated with the cluster self the Machine is in, owned by the node so that it goes with it.
func Maintenance(m *clusterv1.Machine, node *corev1.Node, self types.UID) (nm *nodemaintv1alpha1.NodeMaintenance, clamped bool) {
	nm = &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{
			Name: MaintenanceName(types.NamespacedName{Namespace: m.Namespace, Name: m.Name}),
			Labels: map[string]string{
				nodemaintv1alpha1.MachineNamespaceLabel: m.Namespace,
				nodemaintv1alpha1.MachineNameLabel:      labelValue(m.Name),
			},
			Annotations: map[string]string{
				nodemaintv1alpha1.MachineAnnotation:        m.Namespace + "/" + m.Name,
				nodemaintv1alpha1.MachineClusterAnnotation: string(self),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: nodeSelector(node.Name),
			Cordon:       true,
			Drain:        true,
			Reason:       fmt.Sprintf("Cluster API deletes Machine %s/%s", m.Namespace, m.Name),
		},
	}
	if s := m.Spec.Deletion.NodeDrainTimeoutSeconds; s != nil && *s > 0 {
		d := time.Duration(*s) * time.Second
		if d > nodemaintv1alpha1.MaxDrainTimeout {
			d, clamped = nodemaintv1alpha1.MaxDrainTimeout, true
		}
		nm.Spec.DrainTimeout = &nodemaintv1alpha1.Duration{Duration: d}
	}
	return nm, clamped
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

// Leftovers returns the NodeMaintenances of nms that this cluster (self) created for Machines of
// namespace ns that are gone (not in exists).
func Leftovers(nms []nodemaintv1alpha1.NodeMaintenance, ns string, self types.UID, exists map[types.NamespacedName]bool) []*nodemaintv1alpha1.NodeMaintenance {
	var out []*nodemaintv1alpha1.NodeMaintenance
	for i := range nms {
		nm := &nms[i]
		key, ok := MachineOf(nm)
		if !ok || key.Namespace != ns || exists[key] || !Own(nm, self) {
			continue
		}
		out = append(out, nm)
	}
	return out
}

// MachineOf is the Machine a NodeMaintenance was created for (its MachineAnnotation).
func MachineOf(nm metav1.Object) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(nm.GetAnnotations()[nodemaintv1alpha1.MachineAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}
