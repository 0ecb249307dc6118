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
	if !e.None() {
		t.Fatal("nothing refused yet: None must say so")
	}
	if !(*Refusals)(nil).None() {
		t.Fatal("no refusals at all (nil): None must say so")
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
	if reason, msg, ok := e.Refusal("a"); !ok {
		t.Errorf("Refusal of a: none; want the budget's")
	} else {
		if reason != nodemaintv1alpha1.BlockedReasonPodDisruptionBudget {
			t.Errorf("Refusal of a: reason %q; want %q", reason, nodemaintv1alpha1.BlockedReasonPodDisruptionBudget)
		}
		if msg != "pdb says no" {
			t.Errorf("Refusal of a: message %q; want %q", msg, "pdb says no")
		}
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
	if _, _, ok := e.Refusal("a"); ok {
		t.Error("Done does not forget the pod: its refusal kept")
	}
	if w := e.Wait("a", now); w != 0 {
		t.Errorf("Done does not forget the pod: it waits %v, want 0", w)
	}
	if d := e.Refused("a", now, nodemaintv1alpha1.BlockedReasonEvictionFailed, ""); d != time.Second {
		t.Errorf("Done does not forget the pod: refused again, it backs off %v, want the first 1s", d)
	}
}
