package machinedecide

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

func TestDecide(t *testing.T) {
	key := types.NamespacedName{Namespace: "capi", Name: "md-0-abc"}
	machine := func(deleting, hooked bool, node string) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if deleting {
			m.DeletionTimestamp = ptr.To(metav1.Now())
		}
		if hooked {
			m.Annotations = map[string]string{nodemaintv1alpha1.ClusterAPIPreDrainHook: "nodemaint"}
		}
		m.Spec.ClusterName = "c"
		m.Spec.ProviderID = "test://" + node
		m.Status.NodeRef.Name = node
		m.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To[int32](600)
		return m
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "c"}}
	deletingCluster := cluster.DeepCopy()
	deletingCluster.DeletionTimestamp = ptr.To(metav1.Now())
	pausedCluster := cluster.DeepCopy()
	pausedCluster.Spec.Paused = ptr.To(true)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}, Spec: corev1.NodeSpec{ProviderID: "test://n1"}}
	otherNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "test://elsewhere"}}
	maintenance := func(cond string) *nodemaintv1alpha1.NodeMaintenance {
		nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: MaintenanceName(key)}}
		if cond != "" {
			nm.Status.Conditions = []metav1.Condition{{Type: cond, Status: metav1.ConditionTrue}}
		}
		return nm
	}
	ofCluster := func(nm *nodemaintv1alpha1.NodeMaintenance, self types.UID) *nodemaintv1alpha1.NodeMaintenance {
		nm.Annotations = map[string]string{nodemaintv1alpha1.MachineClusterAnnotation: string(self)}
		return nm
	}
	deleting := machine(true, true, "n1")
	for name, tc := range map[string]struct {
		obs  Observation
		want string
	}{
		"running machine":              {Observation{Key: key, Machine: machine(false, true, "n1"), Cluster: cluster, Node: node}, "nothing"},
		"deleted without the hook":     {Observation{Key: key, Machine: machine(true, false, "n1"), Cluster: cluster, Node: node}, "nothing"},
		"deleted with the hook":        {Observation{Key: key, Machine: deleting, Cluster: cluster, Node: node}, "create"},
		"no cluster":                   {Observation{Key: key, Machine: deleting, Node: node}, "nothing"},
		"cluster being deleted":        {Observation{Key: key, Machine: deleting, Cluster: deletingCluster, Node: node}, "nothing"},
		"cluster paused":               {Observation{Key: key, Machine: deleting, Cluster: pausedCluster, Node: node}, "nothing"},
		"no node":                      {Observation{Key: key, Machine: machine(true, true, ""), Cluster: cluster}, "release"},
		"workload cluster unknown":     {Observation{Key: key, Machine: deleting, Cluster: cluster, Unreachable: "no Secret"}, "refuse"},
		"node gone":                    {Observation{Key: key, Machine: deleting, Cluster: cluster}, "release"},
		"node gone while draining":     {Observation{Key: key, Machine: deleting, Cluster: cluster, Maintenance: maintenance("")}, "release"},
		"another provider's node":      {Observation{Key: key, Machine: deleting, Cluster: cluster, Node: otherNode}, "refuse"},
		"no providerID on either side": {Observation{Key: key, Machine: func() *clusterv1.Machine { m := machine(true, true, "n1"); m.Spec.ProviderID = ""; return m }(), Cluster: cluster, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, "refuse"},
		"draining":                     {Observation{Key: key, Machine: deleting, Cluster: cluster, Node: node, Maintenance: maintenance("")}, "wait"},
		"drained":                      {Observation{Key: key, Machine: deleting, Cluster: cluster, Node: node, Maintenance: maintenance(nodemaintv1alpha1.ConditionDrained)}, "release"},
		"timed out":                    {Observation{Key: key, Machine: deleting, Cluster: cluster, Node: node, Maintenance: maintenance(nodemaintv1alpha1.ConditionDrainTimedOut)}, "release"},
		"hook released, machine going": {Observation{Key: key, Machine: machine(true, false, "n1"), Cluster: cluster, Node: node, Maintenance: maintenance(nodemaintv1alpha1.ConditionDrained)}, "nothing"},
		"machine gone":                 {Observation{Key: key, Maintenance: maintenance(nodemaintv1alpha1.ConditionDrained)}, "delete"},
		"machine gone, no maintenance": {Observation{Key: key}, "nothing"},
		// A cluster that is another's workload cluster holds its maintenances, of Machines it
		// does not have, or has of the same name: not its own.
		"machine gone, this cluster's":           {Observation{Key: key, Self: "self", Maintenance: ofCluster(maintenance(""), "self")}, "delete"},
		"machine gone, another cluster's":        {Observation{Key: key, Self: "self", Maintenance: ofCluster(maintenance(""), "other")}, "nothing"},
		"another cluster's maintenance, drained": {Observation{Key: key, Self: "self", Machine: deleting, Cluster: cluster, Node: node, Maintenance: ofCluster(maintenance(nodemaintv1alpha1.ConditionDrained), "other")}, "create"},
		"another provider's node, another's":     {Observation{Key: key, Self: "self", Machine: deleting, Cluster: cluster, Node: otherNode, Maintenance: ofCluster(maintenance(""), "other")}, "refuse"},
		"this cluster's maintenance, drained":    {Observation{Key: key, Self: "self", Machine: deleting, Cluster: cluster, Node: node, Maintenance: ofCluster(maintenance(nodemaintv1alpha1.ConditionDrained), "self")}, "release"},
	} {
		d := Decide(tc.obs)
		got := "nothing"
		switch {
		case d.Create != nil:
			got = "create"
		case d.ReleaseHook:
			got = "release"
		case d.Refused != "":
			got = "refuse"
		case d.DeleteMaintenance:
			got = "delete"
		case d.Wait:
			got = "wait"
		}
		if got != tc.want {
			t.Errorf("%s: %s (%+v), want %s", name, got, d, tc.want)
		}
	}
	// A maintenance of a node that is not the Machine's goes.
	d := Decide(Observation{Key: key, Machine: deleting, Cluster: cluster, Node: otherNode, Maintenance: maintenance("")})
	if !d.DeleteMaintenance {
		t.Errorf("another provider's node under the Machine's maintenance: not deleted (%+v); want it deleted", d)
	}
	if d.Refused != RefusedProviderID {
		t.Errorf("another provider's node under the Machine's maintenance: refused %q; want %q", d.Refused, RefusedProviderID)
	}
	if d := Decide(Observation{Key: key, Self: "self", Machine: deleting, Cluster: cluster, Node: otherNode, Maintenance: ofCluster(maintenance(""), "other")}); d.DeleteMaintenance {
		t.Errorf("another provider's node under another cluster's maintenance: %+v", d)
	}

	checkMaintenance(t, deleting, node)
	if v := labelValue(strings.Repeat("m", 253)); len(v) > 63 {
		t.Errorf("label value %q", v)
	}
}

// checkMaintenance asserts the NodeMaintenance made for the deleting Machine md-0-abc of node n1:
// it cordons and drains n1 within the Machine's 600s, says whose it is, and the node owns it.
func checkMaintenance(t *testing.T, deleting *clusterv1.Machine, node *corev1.Node) {
	t.Helper()
	nm, clamped := Maintenance(deleting, node, "self")
	if !strings.HasPrefix(nm.Name, "machine-md-0-abc-") {
		t.Errorf("maintenance name %s; want it to begin machine-md-0-abc-", nm.Name)
	}
	if !nm.Spec.Cordon {
		t.Errorf("maintenance does not cordon; want it to")
	}
	if !nm.Spec.Drain {
		t.Errorf("maintenance does not drain; want it to")
	}
	if got := nm.Spec.DrainTimeout.Duration.Seconds(); got != 600 {
		t.Errorf("maintenance drainTimeout %vs; want 600s", got)
	}
	if clamped {
		t.Errorf("maintenance drainTimeout clamped; want not")
	}
	if nm.Spec.DrainTimeoutAction != "" {
		t.Errorf("maintenance drainTimeoutAction %q; want none", nm.Spec.DrainTimeoutAction)
	}
	if got := nm.Annotations[nodemaintv1alpha1.MachineAnnotation]; got != "capi/md-0-abc" {
		t.Errorf("maintenance %s %q; want capi/md-0-abc", nodemaintv1alpha1.MachineAnnotation, got)
	}
	if got := nm.Annotations[nodemaintv1alpha1.MachineClusterAnnotation]; got != "self" {
		t.Errorf("maintenance %s %q; want self", nodemaintv1alpha1.MachineClusterAnnotation, got)
	}
	if got := nm.Spec.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0]; got != "n1" {
		t.Errorf("maintenance selects node %s; want n1", got)
	}
	if len(nm.OwnerReferences) != 1 {
		t.Fatalf("maintenance owners %+v; want the node alone", nm.OwnerReferences)
	}
	if got := nm.OwnerReferences[0].Kind; got != "Node" {
		t.Errorf("maintenance owned by a %s; want the Node", got)
	}
	if got := nm.OwnerReferences[0].UID; got != node.UID {
		t.Errorf("maintenance owned by UID %s; want the node's %s", got, node.UID)
	}
}

// TestMaintenanceNamesDiffer: two Machines never share a NodeMaintenance's name, whatever their
// namespaces and names; a name is a valid object name, and short.
func TestMaintenanceNamesDiffer(t *testing.T) {
	for _, pair := range [][2]types.NamespacedName{
		{{Namespace: "a", Name: "b-c"}, {Namespace: "a-b", Name: "c"}},
		{{Namespace: "team-a", Name: "md-0"}, {Namespace: "team-b", Name: "md-0"}},
		{{Namespace: "n", Name: strings.Repeat("m", 60) + "x"}, {Namespace: "n", Name: strings.Repeat("m", 60) + "y"}},
	} {
		a, b := MaintenanceName(pair[0]), MaintenanceName(pair[1])
		if a == b {
			t.Errorf("%v and %v share the NodeMaintenance %s", pair[0], pair[1], a)
		}
	}
	for _, key := range []types.NamespacedName{
		{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("m", 253)},
		{Namespace: "n", Name: strings.Repeat("m", 39) + ".a.b"},
		{Namespace: "n", Name: strings.Repeat("m", 39) + "-a-b"},
	} {
		n := MaintenanceName(key)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("name of %v: %q is not a valid object name: %v", key, n, errs)
		}
		if len(n) > 63 {
			t.Errorf("name of %v: %q is %d long; want at most 63", key, n, len(n))
		}
		if again := MaintenanceName(key); again != n {
			t.Errorf("name of %v: %q, then %q; want the same", key, n, again)
		}
	}
}

// TestDrainTimeoutClamped: a nodeDrainTimeoutSeconds beyond a NodeMaintenance's bound (168h)
// gives the bound, and says so.
func TestDrainTimeoutClamped(t *testing.T) {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "m"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, tc := range []struct {
		seconds int32
		want    time.Duration
		clamped bool
	}{
		{600, 10 * time.Minute, false},
		{int32(nodemaintv1alpha1.MaxDrainTimeout.Seconds()), nodemaintv1alpha1.MaxDrainTimeout, false},
		{int32(nodemaintv1alpha1.MaxDrainTimeout.Seconds()) + 1, nodemaintv1alpha1.MaxDrainTimeout, true},
		{1<<31 - 1, nodemaintv1alpha1.MaxDrainTimeout, true},
	} {
		m.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To(tc.seconds)
		nm, clamped := Maintenance(m, node, "self")
		if nm.Spec.DrainTimeout.Duration != tc.want {
			t.Errorf("nodeDrainTimeoutSeconds %d: drainTimeout %v, want %v", tc.seconds, nm.Spec.DrainTimeout.Duration, tc.want)
		}
		if clamped != tc.clamped {
			t.Errorf("nodeDrainTimeoutSeconds %d: clamped %v, want %v", tc.seconds, clamped, tc.clamped)
		}
		if errs := nm.Spec.Problems(); len(errs) > 0 {
			t.Errorf("nodeDrainTimeoutSeconds %d: %v", tc.seconds, errs)
		}
	}
}

// FuzzDecide: whatever the Machine, its Cluster, its node and its NodeMaintenance, the decision
// writes one object at most; it releases the hook only of a Machine being deleted that carries
// it, of a Cluster that is there, not being deleted and not paused, and only once its node is
// drained, the drain timed out or there is no node to drain (looked at, not assumed); it creates
// a NodeMaintenance only of the Machine's own node (its providerID), with a drainTimeout within
// the CRD's bound; it deletes a NodeMaintenance only of a Machine that is gone or of a node that
// is not the Machine's, and only one created for a Machine of this cluster (Own). Names: two
// Machines never share one.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(0x0f), uint8(0x03), uint8(0x03), uint8(1), int32(600), "a", "b-c", "a-b", "c")
	f.Add(uint8(0x07), uint8(0x01), uint8(0x01), uint8(2), int32(1<<31-1), "n", "m", "n", "m")
	f.Add(uint8(0x00), uint8(0x00), uint8(0x00), uint8(0x11), int32(0), "a", "b", "c", "d")
	f.Add(uint8(0x1f), uint8(0x01), uint8(0x03), uint8(0x13), int32(60), "a", "b", "c", "d")
	f.Fuzz(func(t *testing.T, m, c, n, nm uint8, timeout int32, ns1, name1, ns2, name2 string) {
		key := types.NamespacedName{Namespace: "capi", Name: "m"}
		obs := Observation{Key: key, Self: "self"}
		if m&1 != 0 {
			obs.Machine = &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			obs.Machine.Spec.ClusterName = "c"
			obs.Machine.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To(timeout)
			if m&2 != 0 {
				obs.Machine.DeletionTimestamp = ptr.To(metav1.Now())
			}
			if m&4 != 0 {
				obs.Machine.Annotations = map[string]string{nodemaintv1alpha1.ClusterAPIPreDrainHook: ""}
			}
			if m&8 != 0 {
				obs.Machine.Status.NodeRef.Name = "n1"
			}
			if m&16 != 0 {
				obs.Machine.Spec.ProviderID = "p://n1"
			}
			if m&32 != 0 {
				if obs.Machine.Annotations == nil {
					obs.Machine.Annotations = map[string]string{}
				}
				obs.Machine.Annotations[clusterv1.PausedAnnotation] = ""
			}
		}
		if c&1 != 0 {
			obs.Cluster = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "c"}}
			if c&2 != 0 {
				obs.Cluster.DeletionTimestamp = ptr.To(metav1.Now())
			}
			if c&4 != 0 {
				obs.Cluster.Spec.Paused = ptr.To(true)
			}
		}
		if c&8 != 0 {
			obs.Unreachable = "no kubeconfig"
		} else if n&1 != 0 {
			obs.Node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u"}}
			if n&2 != 0 {
				obs.Node.Spec.ProviderID = "p://n1"
			} else if n&4 != 0 {
				obs.Node.Spec.ProviderID = "p://other"
			}
		}
		drained, timedOut := false, false
		if nm&1 != 0 && c&8 == 0 {
			obs.Maintenance = &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: MaintenanceName(key)}}
			for i, c := range []string{nodemaintv1alpha1.ConditionDrained, nodemaintv1alpha1.ConditionDrainTimedOut} {
				if nm&(2<<i) != 0 {
					obs.Maintenance.Status.Conditions = append(obs.Maintenance.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
				}
			}
			drained, timedOut = nm&2 != 0, nm&4 != 0
			if nm&8 != 0 {
				obs.Maintenance.DeletionTimestamp = ptr.To(metav1.Now())
			}
			if nm&16 != 0 {
				// Created for a Machine of this cluster, or of another (whose workload cluster
				// this is); unsaid: by an older nodemaint.
				cluster := "other"
				if nm&32 != 0 {
					cluster = "self"
				}
				obs.Maintenance.Annotations = map[string]string{nodemaintv1alpha1.MachineClusterAnnotation: cluster}
			}
		}
		own := obs.Maintenance != nil && Own(obs.Maintenance, obs.Self)
		d := Decide(obs)
		writes := 0
		for _, w := range []bool{d.Create != nil, d.ReleaseHook, d.DeleteMaintenance} {
			if w {
				writes++
			}
		}
		if writes > 1 {
			t.Fatalf("%d writes: %+v", writes, d)
		}
		mine := obs.Node != nil && obs.Machine != nil && obs.Machine.Spec.ProviderID != "" && obs.Node.Spec.ProviderID == obs.Machine.Spec.ProviderID
		if d.ReleaseHook || d.Create != nil {
			mm := obs.Machine
			if mm.DeletionTimestamp == nil {
				t.Fatalf("wrote for Machine %+v, not deleting: %+v", mm, d)
			}
			if !Hooked(mm) {
				t.Fatalf("wrote for Machine %+v, without the hook: %+v", mm, d)
			}
			if !Applies(mm, obs.Cluster) {
				t.Fatalf("wrote for Machine %+v of Cluster %+v, where it does not apply: %+v", mm, obs.Cluster, d)
			}
		}
		if d.ReleaseHook {
			mm := obs.Machine
			nodeless := mm.Status.NodeRef.Name == "" || obs.Unreachable == "" && obs.Node == nil
			done := mine && own && (drained || timedOut || obs.Maintenance.DeletionTimestamp != nil)
			if !nodeless && !done {
				t.Fatalf("released the hook of %+v with node %+v, %+v", mm, obs.Node, obs.Maintenance)
			}
		}
		if d.Create != nil {
			if own {
				t.Fatalf("created a NodeMaintenance over its own %+v", obs.Maintenance)
			}
			if !mine {
				t.Fatalf("created a NodeMaintenance of node %+v, not the Machine's", obs.Node)
			}
			if obs.Unreachable != "" {
				t.Fatalf("created a NodeMaintenance of node %+v, unreachable: %s", obs.Node, obs.Unreachable)
			}
			sel := d.Create.Spec.NodeSelector.NodeSelectorTerms
			if len(sel) != 1 {
				t.Fatalf("created a NodeMaintenance of %+v; want one term", sel)
			}
			if got := sel[0].MatchFields[0].Values[0]; got != obs.Node.Name {
				t.Fatalf("created a NodeMaintenance of node %s; want %s", got, obs.Node.Name)
			}
			if errs := d.Create.Spec.Problems(); len(errs) > 0 {
				t.Fatalf("drainTimeout %v of nodeDrainTimeoutSeconds %d: %v", d.Create.Spec.DrainTimeout, timeout, errs)
			}
			if want := time.Duration(timeout)*time.Second > nodemaintv1alpha1.MaxDrainTimeout; d.Clamped != want {
				t.Fatalf("drainTimeout %v of nodeDrainTimeoutSeconds %d: clamped %v; want %v", d.Create.Spec.DrainTimeout, timeout, d.Clamped, want)
			}
		}
		if d.DeleteMaintenance && obs.Machine != nil && mine {
			t.Fatalf("deleted the NodeMaintenance of a Machine still there, of its own node")
		}
		if d.DeleteMaintenance && obs.Machine != nil && obs.Node == nil {
			t.Fatalf("deleted the NodeMaintenance of a Machine still there, its node not seen")
		}
		if d.DeleteMaintenance && !own {
			t.Fatalf("deleted NodeMaintenance %+v, not this cluster's", obs.Maintenance)
		}
		if d.Create != nil && d.Create.Annotations[nodemaintv1alpha1.MachineClusterAnnotation] != string(obs.Self) {
			t.Fatalf("created NodeMaintenance %+v, not saying it is this cluster's", d.Create.ObjectMeta)
		}
		a, b := types.NamespacedName{Namespace: ns1, Name: name1}, types.NamespacedName{Namespace: ns2, Name: name2}
		if a != b && !strings.Contains(ns1+name1+ns2+name2, "/") && MaintenanceName(a) == MaintenanceName(b) {
			t.Fatalf("%v and %v share the NodeMaintenance %s", a, b, MaintenanceName(a))
		}
	})
}
