package evictor

import (
	"slices"
	"testing"
	"time"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

func TestRefusalsBackOff(t *testing.T) {
	e := NewRefusals(time.Second, 8*time.Second)
	now := time.Unix(1000, 0)
	if e.Wait("a", now) != 0 {
		t.Fatal("a pod never refused waits")
	}
	if !e.None() || !(*Refusals)(nil).None() {
		t.Fatal("nothing refused yet: None must say so")
	}
	var delays []time.Duration
	for range 5 {
		delays = append(delays, e.Refused("a", now, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, "pdb says no"))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}; !slices.Equal(delays, want) {
		t.Errorf("back-off %v, want %v", delays, want)
	}
	if w := e.Wait("a", now.Add(3*time.Second)); w != 5*time.Second {
		t.Errorf("Wait = %v, want 5s", w)
	}
	if reason, msg, ok := e.Refusal("a"); !ok || reason != nodemaintv1alpha1.BlockedReasonPodDisruptionBudget || msg != "pdb says no" {
		t.Errorf("Refusal = %q, %q, %v", reason, msg, ok)
	}
	if e.Wait("b", now) != 0 {
		t.Error("one pod's back-off holds up another")
	}
	if e.None() {
		t.Error("a refused: None says none")
	}
	e.Done("a")
	if !e.None() {
		t.Error("a done: None must say so")
	}
	if _, _, ok := e.Refusal("a"); ok || e.Wait("a", now) != 0 || e.Refused("a", now, nodemaintv1alpha1.BlockedReasonEvictionFailed, "") != time.Second {
		t.Error("Done does not forget the pod")
	}
}
