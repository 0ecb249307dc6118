package evictiondecide

import (
	"fmt"
	"testing"
	"time"

	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaint/nodemaint/internal/testutil"
	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// wroteNothing fails unless the decision writes nothing at all.
func wroteNothing(t *testing.T, d Decision) {
	t.Helper()
	if d.Create != nil || d.Evict != nil || len(d.Status)+len(d.Meta)+len(d.Delete)+len(d.RequestStatus) > 0 {
		t.Fatalf("wrote while an in-tree Eviction controller answers: create %v, evict %v, status %d, meta %d, delete %d, request status %d",
			d.Create != nil, d.Evict != nil, len(d.Status), len(d.Meta), len(d.Delete), len(d.RequestStatus))
	}
}

// TestDecideHandsOverToInTree: once kube-controller-manager's Eviction controller answers in the
// cluster, nodemaint's writes nothing, its own Eviction under way included (the in-tree one
// adopts it), nor collects its Evictions of gone pods, nor evicts; it looks again after
// YieldRecheck. Without it, the same observations are written (the test could not fail else).
func TestDecideHandsOverToInTree(t *testing.T) {
	req := testRequest("r", "other.example.com/descheduler", "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)
	base := Observation{Namespace: "ns", Name: "p", Pod: testPod(), HeartbeatDeadline: 20 * time.Minute, Controller: "me",
		Requests: []lifecyclev1alpha1.EvictionRequest{req}}
	fresh := base
	// Its own Eviction under way: created, its status not yet written.
	underWay := apply(base, Decide(base, t0))
	// Its own Eviction whose pod is gone: collected, and the request told.
	gone, _ := settle(t, base, t0)
	gone.Pod = nil
	for name, obs := range map[string]Observation{"fresh request": fresh, "own Eviction under way": underWay, "pod gone": gone} {
		t.Run(name, func(t *testing.T) {
			if d := Decide(obs, t0); d.Create == nil && len(d.Status)+len(d.Delete)+len(d.RequestStatus) == 0 && d.Evict == nil {
				t.Fatalf("without an in-tree controller nothing is written either: the case proves nothing (%+v)", d)
			}
			obs.InTree = InTreeMessage(InTreeController, "EvictionRequest", "ns", "elsewhere")
			d := Decide(obs, t0)
			wroteNothing(t, d)
			if d.StandAside == "" {
				t.Errorf("stand aside %q: want a reason", d.StandAside)
			}
			if d.RecheckAfter != YieldRecheck {
				t.Errorf("recheck after %v: want %v", d.RecheckAfter, YieldRecheck)
			}
		})
	}
}

// TestDecideAwaitsInTree: with InTreeGrace, a pod's Eviction is created only once its oldest
// request asking for eviction is that old; meanwhile nothing of the pod is written and the
// decision is made again when the grace is over. A pod another controller's Eviction answers is
// left to it as before; without the grace (--eviction-controller=on) the Eviction is created at
// once.
func TestDecideAwaitsInTree(t *testing.T) {
	const grace = 2 * time.Second
	old := testRequest("old", evictionrequest.Requester, "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)
	old.CreationTimestamp = metav1.NewTime(t0)
	young := testRequest("young", "other.example.com/descheduler", "uid-p", lifecyclev1alpha1.EvictionRequestIntentEviction)
	young.CreationTimestamp = metav1.NewTime(t0.Add(1500 * time.Millisecond))
	withdrawn := testRequest("withdrawn", "x.example.org/y", "uid-p", lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
	withdrawn.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	obs := Observation{Namespace: "ns", Name: "p", Pod: testPod(), HeartbeatDeadline: 20 * time.Minute, Controller: "me",
		InTreeGrace: grace, Requests: []lifecyclev1alpha1.EvictionRequest{young, old, withdrawn}}

	d := Decide(obs, t0.Add(500*time.Millisecond))
	wroteNothing(t, d)
	if d.StandAside == "" {
		t.Fatalf("stand aside %q: want a reason", d.StandAside)
	}
	if d.RecheckAfter != 1500*time.Millisecond {
		t.Fatalf("recheck after %v: want 1.5s (the oldest request's grace left; a withdrawn one does not count)", d.RecheckAfter)
	}
	// A clock behind the API server's: one wait at most the grace.
	behind := Decide(obs, t0.Add(-time.Minute))
	if behind.Create != nil {
		t.Fatalf("clock behind: created %s; want none", behind.Create.Name)
	}
	if behind.RecheckAfter != grace {
		t.Fatalf("clock behind: recheck after %v; want %v", behind.RecheckAfter, grace)
	}
	over := Decide(obs, t0.Add(grace))
	if over.Create == nil {
		t.Fatalf("grace over: created nothing; want the Eviction created")
	}
	if over.StandAside != "" {
		t.Fatalf("grace over: stand aside %q; want none", over.StandAside)
	}
	on := obs
	on.InTreeGrace = 0
	if d := Decide(on, t0); d.Create == nil {
		t.Fatalf("without a grace: want the Eviction created at once (stand aside %q)", d.StandAside)
	}
	// Another controller's Eviction answers for the pod: it is left to it, whatever the grace.
	other := obs
	other.Evictions = []lifecyclev1alpha1.Eviction{otherEviction(0, t0)}
	beside := Decide(other, t0.Add(time.Hour))
	if beside.Create != nil {
		t.Fatalf("created %s beside another controller's Eviction; want none", beside.Create.Name)
	}
	if beside.StandAside == "" {
		t.Fatalf("beside another controller's Eviction: no stand-aside reason; want one")
	}
	// Its own Eviction under way goes on within the grace of a later request.
	underWay := obs
	underWay.InTreeGrace = 0
	underWay = apply(underWay, Decide(underWay, t0))
	underWay.InTreeGrace = grace
	goesOn := Decide(underWay, t0)
	if goesOn.StandAside != "" {
		t.Fatalf("its own Eviction held by the grace: stand aside %q; want none", goesOn.StandAside)
	}
	if len(goesOn.Status) != 1 {
		t.Fatalf("its own Eviction under way: %d status writes; want 1 (%+v)", len(goesOn.Status), goesOn)
	}
}

func TestInTreeManager(t *testing.T) {
	for _, tc := range []struct {
		managers []string
		want     string
	}{
		{nil, ""},
		{[]string{"nodemaint-eviction-controller/nodemaint", "kube-controller-manager"}, ""},
		{[]string{"nodemaint-eviction-controller/nodemaint", InTreeController}, InTreeController},
		{[]string{InTreeResponder}, InTreeResponder},
	} {
		var managed []metav1.ManagedFieldsEntry
		for _, m := range tc.managers {
			managed = append(managed, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationApply})
		}
		if got := InTreeManager(managed); got != tc.want {
			t.Errorf("InTreeManager(%v) = %q, want %q", tc.managers, got, tc.want)
		}
	}
}

// FuzzDecideInTree: whatever the observation (FuzzDecide's), while an in-tree controller answers
// nothing is written; with the grace, no Eviction is created before the pod's oldest request is
// that old.
func FuzzDecideInTree(f *testing.F) {
	f.Add([]byte{}, byte(0))
	f.Add([]byte{3, 1, 2, 0x41, 0x12, 9, 200, 7, 1, 3}, byte(1))
	f.Add([]byte{0xff, 0x13, 0x22, 0x31, 0x40, 0x05, 0x66, 0x77, 0x88, 0x99, 0xaa}, byte(2))
	f.Fuzz(func(t *testing.T, data []byte, mode byte) {
		g := &testutil.FuzzBytes{Data: data}
		now := t0.Add(time.Hour)
		obs := fuzzObservation(g, now)
		if mode%2 == 0 {
			obs.InTree = "fuzzed"
			wroteNothing(t, Decide(obs, now))
			return
		}
		obs.InTreeGrace = InTreeGrace
		age := time.Duration(mode) * 100 * time.Millisecond / 2
		for i := range obs.Requests {
			obs.Requests[i].CreationTimestamp = metav1.NewTime(now.Add(-age - time.Duration(i)*time.Second))
		}
		before := fmt.Sprintf("%+v", obs)
		d := Decide(obs, now)
		if fmt.Sprintf("%+v", obs) != before {
			t.Fatal("Decide changed its observation")
		}
		check(t, obs, d, now)
		oldest := age + time.Duration(max(len(obs.Requests)-1, 0))*time.Second
		if d.Create != nil && oldest < InTreeGrace {
			t.Fatalf("created Eviction %s with its oldest request %v old, within the grace", d.Create.Name, oldest)
		}
	})
}
