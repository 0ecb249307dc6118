package ownwrites

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(rv, label string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", ResourceVersion: rv, Labels: map[string]string{"v": label}}}
}

func TestFresh(t *testing.T) {
	w := New[*corev1.Pod](nil)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return now }

	// Nothing written: the cache is fresh.
	if got := w.Fresh(pod("1", "cached")); got.Labels["v"] != "cached" {
		t.Fatalf("got %v", got.Labels)
	}
	// Written over 1: a cache at 1 is stale, the write is seen instead.
	w.Wrote("1", pod("2", "written"))
	if got := w.Fresh(pod("1", "cached")); got.Labels["v"] != "written" {
		t.Fatalf("stale cache: got %v", got.Labels)
	}
	// Written again over what was written (2 → 3) while the cache is still at 1: both are stale.
	w.Wrote("2", pod("3", "again"))
	for _, rv := range []string{"1", "2"} {
		if got := w.Fresh(pod(rv, "cached")); got.Labels["v"] != "again" {
			t.Fatalf("cache at %s: got %v", rv, got.Labels)
		}
	}
	// The cache shows the write (or a later version of anyone's): it is used, the write forgotten.
	if got := w.Fresh(pod("3", "cached")); got.Labels["v"] != "cached" || w.Len() != 0 {
		t.Fatalf("fresh cache: got %v, %d remembered", got.Labels, w.Len())
	}
	if got := w.Fresh(pod("1", "cached")); got.Labels["v"] != "cached" {
		t.Fatalf("forgotten write still used: %v", got.Labels)
	}

	// A write computed from a version that is not the last recorded starts over.
	w.Wrote("5", pod("6", "a"))
	w.Wrote("7", pod("8", "b"))
	if got := w.Fresh(pod("5", "cached")); got.Labels["v"] != "cached" {
		t.Fatalf("history kept: %v", got.Labels)
	}

	// A write the cache never shows is forgotten after a while.
	w.Wrote("10", pod("11", "gone"))
	now = now.Add(forget)
	if got := w.Fresh(pod("10", "cached")); got.Labels["v"] != "cached" {
		t.Fatalf("old write used: %v", got.Labels)
	}
	w.Wrote("12", pod("13", "x"))
	w.Forget("u")
	if w.Len() != 0 {
		t.Fatalf("not forgotten")
	}

	// A nil record remembers nothing.
	var none *Writes[*corev1.Pod]
	none.Wrote("1", pod("2", "written"))
	if got := none.Fresh(pod("1", "cached")); got.Labels["v"] != "cached" {
		t.Fatalf("nil: %v", got.Labels)
	}
}

// TestRecent: a write is remembered for a minute, then forgotten; a nil record remembers
// nothing.
func TestRecent(t *testing.T) {
	now := time.Unix(1000, 0)
	d := NewRecent()
	d.now = func() time.Time { return now }
	d.Sent("a")
	if !d.Recently("a") || d.Recently("b") {
		t.Fatal("want a's write remembered, b's not")
	}
	now = now.Add(forget)
	if d.Recently("a") {
		t.Fatal("a's write remembered past a minute")
	}
	var none *Recent
	none.Sent("a")
	if none.Recently("a") {
		t.Fatal("a nil record remembers")
	}
}

// TestConflicts: the version a write was refused at is behind until the cache shows another
// (or a minute has passed); other objects and versions are not; a nil record remembers nothing.
func TestConflicts(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewConflicts()
	c.now = func() time.Time { return now }

	c.Met(pod("1", "cached"))
	if !c.Behind(pod("1", "cached")) {
		t.Fatal("the version refused at is not behind")
	}
	other := pod("1", "cached")
	other.UID = "v"
	if c.Behind(other) {
		t.Fatal("another object is behind")
	}
	// The cache shows a later version: it is decided from, and the record ends.
	if c.Behind(pod("2", "cached")) || c.Len() != 0 {
		t.Fatalf("a later version is behind, or the record stays (%d)", c.Len())
	}
	if c.Behind(pod("1", "cached")) {
		t.Fatal("the record outlived the later version")
	}

	// A cache that never shows the later version (the object deleted) is trusted again after a
	// while, and the next record expires the old.
	c.Met(pod("3", "cached"))
	now = now.Add(forget)
	if c.Behind(pod("3", "cached")) {
		t.Fatal("behind past a minute")
	}
	c.Met(pod("4", "cached"))
	now = now.Add(forget)
	other.ResourceVersion = "9"
	c.Met(other)
	if c.Len() != 1 {
		t.Fatalf("%d remembered, want the last one only", c.Len())
	}

	var none *Conflicts
	none.Met(pod("1", "cached"))
	if none.Behind(pod("1", "cached")) || none.Len() != 0 {
		t.Fatal("a nil record remembers")
	}
}
