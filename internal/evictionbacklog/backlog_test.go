package evictionbacklog

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func target(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: name}
}

func targets(names ...string) []types.NamespacedName {
	var out []types.NamespacedName
	for _, n := range names {
		out = append(out, target(n))
	}
	return out
}

// TestAdmit: requests are admitted in order while fewer than the limit wait; a target that
// waits already takes no more room; a look (Done) makes room for the next; requests of which the
// controller's watch tells (Arrived) take room too, beyond the limit.
func TestAdmit(t *testing.T) {
	b := New(3)
	if n := b.Admit(targets("a", "b")); n != 2 {
		t.Fatalf("admitted %d of 2 with room for 3", n)
	}
	if n := b.Admit(targets("a", "c", "d")); n != 2 {
		t.Fatalf("admitted %d of a (waiting already), c, d with room for one more; want a and c", n)
	}
	if b.Len() != 3 {
		t.Fatalf("%d wait; want 3", b.Len())
	}
	b.Done(target("b"))
	if n := b.Admit(targets("d", "e")); n != 1 {
		t.Fatalf("admitted %d after one look; want 1 (d)", n)
	}
	b.Arrived(target("x"))
	b.Arrived(target("y"))
	b.Done(target("a"))
	if n := b.Admit(targets("e")); n != 0 {
		t.Fatalf("admitted %d while 4 wait, 3 the limit", n)
	}
	for _, n := range []string{"c", "d", "x"} {
		b.Done(target(n))
	}
	if n := b.Admit(targets("e", "f", "g")); n != 2 || b.Len() != 3 {
		t.Fatalf("admitted %d with y waiting (%d wait); want 2, then 3 waiting", n, b.Len())
	}
}

// TestNil: without an Eviction controller to pace to, every request is admitted.
func TestNil(t *testing.T) {
	var b *Backlog
	if New(0) != nil {
		t.Fatal("a backlog of limit 0")
	}
	if n := b.Admit(targets("a", "b", "c")); n != 3 {
		t.Fatalf("admitted %d of 3 without a backlog", n)
	}
	b.Arrived(target("a"))
	b.Done(target("a"))
	if b.Len() != 0 {
		t.Fatal("a nil backlog holds targets")
	}
}
