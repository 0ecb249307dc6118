package machine

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
		m.Status.NodeRef.Name = node
		m.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To[int32](600)
		return m
	}
	maintenance := func(cond string) *nodemaintv1alpha1.NodeMaintenance {
		nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: MaintenanceName(key)}}
		if cond != "" {
			nm.Status.Conditions = []metav1.Condition{{Type: cond, Status: metav1.ConditionTrue}}
		}
		return nm
	}
	for name, tc := range map[string]struct {
		obs  Observation
		want string
	}{
		"running machine":              {Observation{Key: key, Machine: machine(false, true, "n1")}, "nothing"},
		"deleted without the hook":     {Observation{Key: key, Machine: machine(true, false, "n1")}, "nothing"},
		"deleted with the hook":        {Observation{Key: key, Machine: machine(true, true, "n1")}, "create"},
		"no node":                      {Observation{Key: key, Machine: machine(true, true, "")}, "release"},
		"draining":                     {Observation{Key: key, Machine: machine(true, true, "n1"), Maintenance: maintenance("")}, "nothing"},
		"drained":                      {Observation{Key: key, Machine: machine(true, true, "n1"), Maintenance: maintenance(nodemaintv1alpha1.ConditionDrained)}, "release"},
		"timed out":                    {Observation{Key: key, Machine: machine(true, true, "n1"), Maintenance: maintenance(nodemaintv1alpha1.ConditionDrainTimedOut)}, "release"},
		"hook released, machine going": {Observation{Key: key, Machine: machine(true, false, "n1"), Maintenance: maintenance(nodemaintv1alpha1.ConditionDrained)}, "nothing"},
		"machine gone":                 {Observation{Key: key, Maintenance: maintenance(nodemaintv1alpha1.ConditionDrained)}, "delete"},
		"machine gone, no maintenance": {Observation{Key: key}, "nothing"},
	} {
		d := Decide(tc.obs)
		got := "nothing"
		switch {
		case d.Create != nil:
			got = "create"
		case d.ReleaseHook:
			got = "release"
		case d.DeleteMaintenance:
			got = "delete"
		}
		if got != tc.want {
			t.Errorf("%s: %s (%+v), want %s", name, got, d, tc.want)
		}
	}

	nm := Maintenance(machine(true, true, "n1"))
	if nm.Name != "machine-capi-md-0-abc" || !nm.Spec.Cordon || !nm.Spec.Drain || nm.Spec.DrainTimeout.Duration.Seconds() != 600 ||
		nm.Spec.DrainTimeoutAction != "" || nm.Annotations[nodemaintv1alpha1.MachineAnnotation] != "capi/md-0-abc" ||
		nm.Spec.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0] != "n1" {
		t.Errorf("maintenance %+v", nm)
	}
	long := types.NamespacedName{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("m", 253)}
	if n := MaintenanceName(long); len(n) > 253 || n != MaintenanceName(long) || n == MaintenanceName(key) {
		t.Errorf("long name %q", n)
	}
	if v := labelValue(strings.Repeat("m", 253)); len(v) > 63 {
		t.Errorf("label value %q", v)
	}
}

// FuzzDecide: whatever the Machine and its NodeMaintenance, the decision writes one thing at
// most; it releases the hook only of a Machine being deleted that carries it, and only once its
// node is drained, the drain timed out, or there is nothing to drain; it deletes the
// NodeMaintenance only of a Machine that is gone.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(0x0f), uint8(1))
	f.Add(uint8(0x07), uint8(2))
	f.Fuzz(func(t *testing.T, m, nm uint8) {
		key := types.NamespacedName{Namespace: "capi", Name: "m"}
		obs := Observation{Key: key}
		if m&1 != 0 {
			obs.Machine = &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			if m&2 != 0 {
				obs.Machine.DeletionTimestamp = ptr.To(metav1.Now())
			}
			if m&4 != 0 {
				obs.Machine.Annotations = map[string]string{nodemaintv1alpha1.ClusterAPIPreDrainHook: ""}
			}
			if m&8 != 0 {
				obs.Machine.Status.NodeRef.Name = "n1"
			}
		}
		drained, timedOut := false, false
		if nm&1 != 0 {
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
		}
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
		if d.ReleaseHook {
			mm := obs.Machine
			done := mm.Status.NodeRef.Name == "" || obs.Maintenance != nil && (drained || timedOut || obs.Maintenance.DeletionTimestamp != nil)
			if mm.DeletionTimestamp == nil || !Hooked(mm) || !done {
				t.Fatalf("released the hook of %+v with %+v", mm, obs.Maintenance)
			}
		}
		if d.DeleteMaintenance && obs.Machine != nil {
			t.Fatalf("deleted the NodeMaintenance of a Machine still there")
		}
		if d.Create != nil && (obs.Maintenance != nil || obs.Machine.Status.NodeRef.Name == "") {
			t.Fatalf("created a NodeMaintenance over %+v", obs.Maintenance)
		}
	})
}
