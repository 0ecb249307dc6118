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
	if n := b.Admit("n", targets("a", "b")); n != 2 {
		t.Fatalf("admitted %d of 2 with room for 3", n)
	}
	if n := b.Admit("n", targets("a", "c", "d")); n != 2 {
		t.Fatalf("admitted %d of a (waiting already), c, d with room for one more; want a and c", n)
	}
	if b.Len() != 3 {
		t.Fatalf("%d wait; want 3", b.Len())
	}
	b.Done(target("b"))
	if n := b.Admit("n", targets("d", "e")); n != 1 {
		t.Fatalf("admitted %d after one look; want 1 (d)", n)
	}
	b.Arrived(target("x"))
	b.Arrived(target("y"))
	b.Done(target("a"))
	if n := b.Admit("n", targets("e")); n != 0 {
		t.Fatalf("admitted %d while 4 wait, 3 the limit", n)
	}
	for _, n := range []string{"c", "d", "x"} {
		b.Done(target(n))
	}
	if n := b.Admit("n", targets("e", "f", "g")); n != 2 {
		t.Fatalf("admitted %d with y waiting; want 2", n)
	}
	if b.Len() != 3 {
		t.Fatalf("%d wait after the admission; want 3", b.Len())
	}
}

// TestNil: without an Eviction controller to pace to, every request is admitted.
func TestNil(t *testing.T) {
	var b *Backlog
	if New(0) != nil {
		t.Fatal("a backlog of limit 0")
	}
	if n := b.Admit("n", targets("a", "b", "c")); n != 3 {
		t.Fatalf("admitted %d of 3 without a backlog", n)
	}
	b.Arrived(target("a"))
	b.Done(target("a"))
	if b.Len() != 0 {
		t.Fatal("a nil backlog holds targets")
	}
}

// TestWake: a node refused room is queued and woken when a look makes room, one node a room, in
// the order they asked; a node woken asks again (Admit) and is queued again if still refused.
func TestWake(t *testing.T) {
	b := New(2)
	woken := func() []string {
		var out []string
		for {
			select {
			case e := <-b.Wake():
				out = append(out, e.Object.GetName())
			default:
				return out
			}
		}
	}
	b.Admit("n1", targets("a", "b"))
	if n := b.Admit("n2", targets("c")); n != 0 {
		t.Fatalf("n2 admitted %d with no room; want 0", n)
	}
	if !b.Queued("n2") {
		t.Fatalf("n2 not queued with no room")
	}
	if b.Queued("n1") {
		t.Fatalf("n1 queued; want n2 queued alone")
	}
	b.Admit("n3", targets("d"))
	b.Admit("n2", targets("c")) // asking again keeps its place
	if got := woken(); len(got) != 0 {
		t.Fatalf("woken %v with no room", got)
	}
	b.Done(target("a"))
	if got := woken(); len(got) != 1 || got[0] != "n2" {
		t.Fatalf("woken %v for one room; want n2 alone", got)
	}
	if b.Queued("n2") {
		t.Fatalf("n2 still queued once woken")
	}
	if !b.Queued("n3") {
		t.Fatalf("n3 not queued any more; want it still queued")
	}
	// Another requester's request takes the room before n2 looks: n2 queued again, after n3.
	b.Arrived(target("x"))
	if n := b.Admit("n2", targets("c")); n != 0 {
		t.Fatalf("n2 admitted %d with the room taken", n)
	}
	b.Done(target("x"))
	b.Done(target("b"))
	if got := woken(); len(got) != 2 || got[0] != "n3" || got[1] != "n2" {
		t.Fatalf("woken %v for two rooms; want n3 then n2", got)
	}
	// A node admitted for all its requests before its wake (it looked for another reason while
	// the room went to the node ahead of it) leaves the queue: the next room wakes nobody.
	b.Admit("n2", targets("c"))
	b.Admit("n3", targets("d"))
	b.Admit("n4", targets("e"))
	b.Admit("n5", targets("f"))
	b.Done(target("c"))
	if got := woken(); len(got) != 1 || got[0] != "n4" {
		t.Fatalf("woken %v for one room; want n4", got)
	}
	if n := b.Admit("n5", targets("f")); n != 1 {
		t.Fatalf("n5 admitted %d with room; want 1", n)
	}
	if b.Queued("n5") {
		t.Fatalf("n5 queued with room")
	}
	b.Done(target("d"))
	if got := woken(); len(got) != 0 {
		t.Fatalf("woken %v with nobody queued", got)
	}
}

// TestWakeInBatches: a queued node is woken once no more than half the limit wait, not at each
// look, so that its next look has room for many requests (one look of its node a request paced a
// large drain to those looks).
func TestWakeInBatches(t *testing.T) {
	b := New(4)
	b.Admit("n1", targets("a", "b", "c", "d"))
	if n := b.Admit("n2", targets("e", "f", "g")); n != 0 {
		t.Fatalf("n2 admitted %d with no room; want 0", n)
	}
	b.Done(target("a"))
	select {
	case e := <-b.Wake():
		t.Fatalf("%s woken with 3 of 4 waiting; want none before 2", e.Object.GetName())
	default:
	}
	b.Done(target("b"))
	select {
	case e := <-b.Wake():
		if e.Object.GetName() != "n2" {
			t.Fatalf("woken %s; want n2", e.Object.GetName())
		}
	default:
		t.Fatal("nobody woken with 2 of 4 waiting; want n2")
	}
	if n := b.Admit("n2", targets("e", "f", "g")); n != 2 {
		t.Fatalf("n2 admitted %d once woken; want 2, the room of half the limit", n)
	}
}
