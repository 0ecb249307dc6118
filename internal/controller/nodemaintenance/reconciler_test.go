package nodemaintenance

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A NodeMaintenance's status is written at most once per StatusBatchDelay, whatever triggers
// the reconciles; another NodeMaintenance has its own spacing.
func TestStatusWriteSpacing(t *testing.T) {
	r := &Reconciler{StatusBatchDelay: time.Second}
	a, b := types.NamespacedName{Name: "a"}, types.NamespacedName{Name: "b"}
	now := time.Unix(1000, 0)
	if w := r.statusWriteWait(a, now); w != 0 {
		t.Fatalf("first write waits %v", w)
	}
	r.statusWritten.Store(a, now)
	if w := r.statusWriteWait(a, now.Add(300*time.Millisecond)); w != 700*time.Millisecond {
		t.Errorf("write 300ms after the last waits %v, want 700ms", w)
	}
	if w := r.statusWriteWait(a, now.Add(2*time.Second)); w != 0 {
		t.Errorf("write 2s after the last waits %v", w)
	}
	if w := r.statusWriteWait(b, now); w != 0 {
		t.Errorf("another NodeMaintenance waits %v", w)
	}
}
