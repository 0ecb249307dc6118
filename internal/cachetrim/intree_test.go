package cachetrim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaint/nodemaint/internal/controller/eviction/evictiondecide"
)

// TestInTreeWritesKept: of an EvictionRequest or an Eviction, the cache keeps the managed fields
// entries of kube-controller-manager's Eviction controllers (without their fields), so that
// nodemaint's Eviction controller tells that the in-tree one answers; every other entry, and
// every entry of other objects, goes.
func TestInTreeWritesKept(t *testing.T) {
	managed := func() []metav1.ManagedFieldsEntry {
		fields := metav1.NewFieldsV1(`{"f:status":{}}`)
		return []metav1.ManagedFieldsEntry{
			{Manager: "nodemaint-eviction-controller/nodemaint", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields},
			{Manager: evictiondecide.InTreeController, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", FieldsV1: fields},
			{Manager: evictiondecide.InTreeResponder, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", FieldsV1: fields},
		}
	}
	for _, obj := range []interface {
		metav1.Object
	}{
		&lifecyclev1alpha1.EvictionRequest{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed()}},
		&lifecyclev1alpha1.Eviction{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed()}},
	} {
		if _, err := Metadata(obj); err != nil {
			t.Fatal(err)
		}
		got := obj.GetManagedFields()
		if len(got) != 2 {
			t.Errorf("%T kept %+v: want the in-tree controllers' entries without their fields", obj, got)
			continue
		}
		if got[0].Manager != evictiondecide.InTreeController {
			t.Errorf("%T first entry's manager %q; want %q", obj, got[0].Manager, evictiondecide.InTreeController)
		}
		if got[1].Manager != evictiondecide.InTreeResponder {
			t.Errorf("%T second entry's manager %q; want %q", obj, got[1].Manager, evictiondecide.InTreeResponder)
		}
		if got[0].FieldsV1 != nil {
			t.Errorf("%T first entry kept its fields %s; want them dropped", obj, got[0].FieldsV1.GetRawString())
		}
		if got[0].Subresource != "status" {
			t.Errorf("%T first entry's subresource %q; want status", obj, got[0].Subresource)
		}
		if got[0].Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("%T first entry's operation %q; want %q", obj, got[0].Operation, metav1.ManagedFieldsOperationApply)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed()}}
	if _, err := Metadata(cm); err != nil || cm.ManagedFields != nil {
		t.Errorf("another object kept %+v (%v)", cm.ManagedFields, err)
	}
}
