package rollout

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		max      *intstr.IntOrString
		selected int
		want     int
	}{
		{nil, 10, 1},
		{ptr.To(intstr.FromInt32(3)), 10, 3},
		{ptr.To(intstr.FromString("25%")), 10, 2}, // rounded down
		{ptr.To(intstr.FromString("5%")), 10, 1},  // at least 1
		{ptr.To(intstr.FromString("100%")), 7, 7},
		{ptr.To(intstr.FromString("bogus")), 7, 1},
	} {
		if got := Budget(tc.max, tc.selected); got != tc.want {
			t.Errorf("Budget(%v, %d) = %d, want %d", tc.max, tc.selected, got, tc.want)
		}
	}
}

func TestDecideTurns(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	spec := nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
	nodes := []Node{{Name: "n3"}, {Name: "n1"}, {Name: "n2"}, {Name: "n4", Unschedulable: true}, {Name: "n5", Ended: nodemaintv1alpha1.PhaseReleased}}

	d := Turns(Input{Active: true, Spec: spec, Nodes: nodes}, now)
	if !slices.Equal(d.Admitted, []string{"n4", "n1"}) {
		t.Errorf("admitted %v; want n4 (already cordoned) then n1", d.Admitted)
	}
	if d.Done != 1 {
		t.Errorf("done %d; want 1 (n5)", d.Done)
	}
	if d.Waiting != 2 {
		t.Errorf("waiting %d; want 2 (n2, n3)", d.Waiting)
	}
	if d.HaltReason != "" {
		t.Errorf("halt %q; want none", d.HaltReason)
	}
	if t.Failed() {
		t.FailNow()
	}

	// n4 released, n1 still in its turn: one more starts, n2.
	nodes[3].Ended = nodemaintv1alpha1.PhaseReleased
	d = Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: d.InTurn}, now.Add(time.Minute))
	if got := turnNames(d.InTurn); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("in turn %v; want n1, n2", got)
	}
	if !slices.Equal(d.Admitted, []string{"n2"}) {
		t.Fatalf("admitted %v; want n2", d.Admitted)
	}
	if d.InTurn[0].Since.Time != now {
		t.Errorf("n1's turn restarted: %v", d.InTurn[0].Since)
	}

	// Unschedulable replacements halt: nothing new starts; the nodes in their turn stay.
	nodes[0].Ended, nodes[1].Ended = "", nodemaintv1alpha1.PhaseReleased
	halted := Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: d.InTurn, Unschedulable: []string{"app/web-x"}}, now)
	if halted.HaltReason != nodemaintv1alpha1.ReasonReplacementsUnschedulable {
		t.Errorf("halt %q; want %q", halted.HaltReason, nodemaintv1alpha1.ReasonReplacementsUnschedulable)
	}
	if len(halted.Admitted) > 0 {
		t.Errorf("halted, admitted %v; want none", halted.Admitted)
	}
	if got := turnNames(halted.InTurn); !slices.Equal(got, []string{"n2"}) {
		t.Errorf("halted, in turn %v; want n2 to stay", got)
	}
	if t.Failed() {
		t.FailNow()
	}

	// A node past drainTimeout: Pause halts, Continue marks it failed and goes on.
	late := []nodemaintv1alpha1.NodeTurn{{Name: "n2", Since: metav1.NewTime(now.Add(-2 * time.Hour))}}
	paused := Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: late, DrainTimeout: time.Hour}, now)
	if paused.HaltReason != nodemaintv1alpha1.ReasonNodeDrainTimedOut {
		t.Errorf("pause: halt %q; want %q", paused.HaltReason, nodemaintv1alpha1.ReasonNodeDrainTimedOut)
	}
	if len(paused.Admitted) > 0 {
		t.Errorf("pause: admitted %v; want none", paused.Admitted)
	}
	if !slices.Equal(paused.TimedOut, []string{"n2"}) {
		t.Errorf("pause: timed out %v; want n2", paused.TimedOut)
	}
	if t.Failed() {
		t.FailNow()
	}
	spec.OnNodeFailure = nodemaintv1alpha1.NodeFailureContinue
	cont := Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: late, DrainTimeout: time.Hour}, now)
	if cont.HaltReason != "" {
		t.Fatalf("continue: halt %q; want none", cont.HaltReason)
	}
	if i := slices.IndexFunc(cont.InTurn, func(t nodemaintv1alpha1.NodeTurn) bool { return t.Name == "n2" }); i < 0 || !cont.InTurn[i].Failed {
		t.Fatalf("continue: in turn %+v; want n2 in its turn, failed", cont.InTurn)
	}

	// An inactive maintenance has no node in its turn.
	off := Turns(Input{Spec: spec, Nodes: nodes, InTurn: late}, now)
	if len(off.InTurn) > 0 {
		t.Errorf("inactive: in turn %v; want none", off.InTurn)
	}
	if len(off.Admitted) > 0 {
		t.Errorf("inactive: admitted %v; want none", off.Admitted)
	}
}

func turnNames(turns []nodemaintv1alpha1.NodeTurn) []string {
	var out []string
	for _, t := range turns {
		out = append(out, t.Name)
	}
	return out
}

func TestWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ParseWindow(&nodemaintv1alpha1.MaintenanceWindow{Schedule: "0 22 * * 1-5", Duration: nodemaintv1alpha1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Time
		open bool
		next time.Time
	}{
		// Tuesday 21:00 in Berlin: opens at 22:00.
		{time.Date(2026, 3, 3, 21, 0, 0, 0, berlin), false, time.Date(2026, 3, 3, 22, 0, 0, 0, berlin)},
		// Tuesday 23:30: open until Wednesday 02:00.
		{time.Date(2026, 3, 3, 23, 30, 0, 0, berlin), true, time.Date(2026, 3, 4, 2, 0, 0, 0, berlin)},
		// Saturday 01:00: Friday's window is still open until 02:00.
		{time.Date(2026, 3, 7, 1, 0, 0, 0, berlin), true, time.Date(2026, 3, 7, 2, 0, 0, 0, berlin)},
		// Saturday 03:00: next opens Monday 22:00.
		{time.Date(2026, 3, 7, 3, 0, 0, 0, berlin), false, time.Date(2026, 3, 9, 22, 0, 0, 0, berlin)},
	} {
		got := w.At(tc.at.UTC())
		if got.Open != tc.open {
			t.Errorf("At(%v): open %v; want %v", tc.at, got.Open, tc.open)
		}
		if !got.Next.Equal(tc.next) {
			t.Errorf("At(%v): next %v; want %v", tc.at, got.Next, tc.next)
		}
	}
	// Overlapping windows join: every minute for 5 minutes is always open.
	always, _ := ParseWindow(&nodemaintv1alpha1.MaintenanceWindow{Schedule: "* * * * *", Duration: nodemaintv1alpha1.Duration{Duration: 5 * time.Minute}})
	if s := always.At(time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)); !s.Open {
		t.Errorf("every minute for 5 minutes is closed at %v", s)
	}
	for _, bad := range []nodemaintv1alpha1.MaintenanceWindow{
		{Schedule: "0 22 * *", Duration: nodemaintv1alpha1.Duration{Duration: time.Hour}},
		{Schedule: "0 22 * * *", Duration: nodemaintv1alpha1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus"},
	} {
		if _, err := ParseWindow(&bad); err == nil {
			t.Errorf("ParseWindow(%+v) accepted", bad)
		}
	}
}

// FuzzDecide: the turns never exceed the budget by admitting (blocked nodes not counted), admit
// only waiting selected nodes, in order (already unschedulable first, then by name; a
// control-plane node skipped while another is in its turn), none while halted or soaking; every
// selected node is done, in its turn or waiting, exactly once; never two control-plane nodes in
// their turn; never more blocked nodes than maxBlockedNodes (or than were blocked already); no
// turn begins before soakTime ran from the last release, and nodes waiting on the soak are looked
// at again when it ends.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 8}, uint8(2), false, false, uint8(0), uint8(0), uint64(0), uint64(0))
	f.Add([]byte{0x81, 0x42, 0x23, 0x14, 0x05}, uint8(1), true, false, uint8(0), uint8(0), uint64(0), uint64(0))
	f.Add([]byte{9, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50}, uint8(3), false, true, uint8(0), uint8(0), uint64(0), uint64(0))
	f.Add([]byte{9, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50}, uint8(0x13), false, false, uint8(0), uint8(0), uint64(0), uint64(0))
	f.Add([]byte{9, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50}, uint8(0x22), false, false, uint8(0), uint8(0), uint64(0), uint64(0))
	// Soaking after a node's turn ended; control-plane nodes; blocked nodes.
	f.Add([]byte{0xe8, 0xf8, 0x04, 0x01, 0x02, 0x03, 0x10, 0x20}, uint8(4), false, false, uint8(0x35), uint8(2), uint64(0xff), uint64(0x0f))
	f.Add([]byte{0xe8, 0xf8, 0xd8, 0xc8, 0x03, 0x10, 0x20, 0x30}, uint8(4), false, false, uint8(0x80), uint8(0x83), uint64(0xaa), uint64(0x01))
	f.Fuzz(func(t *testing.T, data []byte, budget uint8, unschedulable, windowClosed bool, soak, blocking uint8, controlPlanes, blockedTurns uint64) {
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		in := Input{Active: true, Spec: nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(int32(budget%5) + 1))}, DrainTimeout: time.Hour}
		if windowClosed {
			in.Spec.Window = &nodemaintv1alpha1.MaintenanceWindow{Schedule: "0 0 * * *"}
		} else {
			in.Window.Open = true
		}
		if unschedulable {
			in.Unschedulable = []string{"app/pod"}
		}
		if gate := budget >> 4; gate != 0 {
			in.Spec.HaltOnAlerts = &nodemaintv1alpha1.AlertSelector{AlertNames: []string{"NodeDown"}}
			in.AlertsFresh = now.Add(time.Duration(gate) * time.Second)
			switch gate % 3 {
			case 1:
				in.Alerts = []string{"NodeDown"}
			case 2:
				in.AlertsUnknown = "connection refused"
			}
		}
		// soakTime of 0 to 15 minutes; the last release 0 to 15 minutes ago, or never.
		in.SoakTime = time.Duration(soak&0x0f) * time.Minute
		if soak>>4 != 0 {
			in.LastRelease = now.Add(-time.Duration(soak>>4-1) * time.Minute)
		}
		in.Spec.MaxBlockedNodes = int32(blocking % 4)
		if blocking&0x80 != 0 {
			in.Spec.OnNodeFailure = nodemaintv1alpha1.NodeFailureContinue
		}
		for i, b := range data {
			if i >= 40 {
				break
			}
			n := Node{Name: fmt.Sprintf("n%02d", (int(b)*7+i)%50), Unschedulable: b&1 != 0, Drained: b&2 != 0, ControlPlane: controlPlanes&(1<<i) != 0}
			if slices.ContainsFunc(in.Nodes, func(o Node) bool { return o.Name == n.Name }) {
				continue
			}
			switch (b >> 2) % 4 {
			case 1:
				n.Ended = nodemaintv1alpha1.PhaseReleased
			case 2:
				in.InTurn = append(in.InTurn, nodemaintv1alpha1.NodeTurn{Name: n.Name, Since: metav1.NewTime(now.Add(-time.Duration(b>>4) * 10 * time.Minute)),
					Blocked: blockedTurns&(1<<i) != 0 && !n.Drained && b>>4 >= 6})
			case 3:
				// A turn that ended: the node's annotation records it, the status still lists it.
				n.Ended = nodemaintv1alpha1.PhaseReleased
				in.InTurn = append(in.InTurn, nodemaintv1alpha1.NodeTurn{Name: n.Name, Since: metav1.NewTime(now.Add(-time.Hour))})
			}
			in.Nodes = append(in.Nodes, n)
		}
		d := Turns(in, now)
		again := Turns(in, now)
		if fmt.Sprint(again) != fmt.Sprint(d) {
			t.Fatal("Turns is not deterministic")
		}
		byName := map[string]Node{}
		for _, n := range in.Nodes {
			byName[n.Name] = n
		}
		counted, controlPlane, blockedBefore := 0, 0, 0
		for _, turn := range d.InTurn {
			if !turn.Blocked {
				counted++
			}
			if byName[turn.Name].ControlPlane {
				controlPlane++
			}
		}
		controlPlaneBefore := 0
		for _, turn := range in.InTurn {
			if byName[turn.Name].ControlPlane && byName[turn.Name].Ended == "" {
				controlPlaneBefore++
			}
			if turn.Blocked && byName[turn.Name].Ended == "" {
				blockedBefore++
			}
		}
		if len(d.Admitted) > 0 && counted > d.Budget {
			t.Fatalf("admitted %v beyond the budget %d: %d in turn, %d blocked", d.Admitted, d.Budget, len(d.InTurn), len(d.Blocked))
		}
		if controlPlane > max(1, controlPlaneBefore) {
			t.Fatalf("%d control-plane nodes in their turn (%d before): %+v", controlPlane, controlPlaneBefore, d.InTurn)
		}
		if len(d.Blocked) > max(int(in.Spec.MaxBlockedNodes), blockedBefore) {
			t.Fatalf("%d nodes blocked (%v), maxBlockedNodes %d, %d blocked before", len(d.Blocked), d.Blocked, in.Spec.MaxBlockedNodes, blockedBefore)
		}
		for _, turn := range d.InTurn {
			n := byName[turn.Name]
			if turn.Blocked && !slices.Contains(d.TimedOut, turn.Name) && !slices.ContainsFunc(in.InTurn, func(t nodemaintv1alpha1.NodeTurn) bool { return t.Name == turn.Name && t.Blocked }) {
				t.Fatalf("node %s blocked, not past drainTimeout (drained %v, since %v)", turn.Name, n.Drained, turn.Since)
			}
			if turn.Blocked && turn.Failed {
				t.Fatalf("node %s blocked and failed", turn.Name)
			}
		}
		// A turn that ended starts the soak now; no node starts before it ran.
		ended := slices.ContainsFunc(in.InTurn, func(t nodemaintv1alpha1.NodeTurn) bool { return byName[t.Name].Ended != "" })
		wantRelease := in.LastRelease
		if ended {
			wantRelease = now
		}
		if !d.LastRelease.Equal(wantRelease) {
			t.Fatalf("last release %v, want %v (a turn ended: %v)", d.LastRelease, wantRelease, ended)
		}
		if soakEnds := d.LastRelease.Add(in.SoakTime); in.SoakTime > 0 && !d.LastRelease.IsZero() && now.Before(soakEnds) {
			if len(d.Admitted) > 0 {
				t.Fatalf("admitted %v while soaking until %v", d.Admitted, soakEnds)
			}
			if d.Waiting > 0 && !d.SoakingUntil.Equal(soakEnds) {
				t.Fatalf("%d nodes wait on the soak: soaking until %v; want %v", d.Waiting, d.SoakingUntil, soakEnds)
			}
			if d.Waiting > 0 && (d.RecheckAfter <= 0 || d.RecheckAfter > soakEnds.Sub(now)) {
				t.Fatalf("%d nodes wait on the soak until %v: next look in %v; want one by then", d.Waiting, soakEnds, d.RecheckAfter)
			}
		} else if !d.SoakingUntil.IsZero() {
			t.Fatalf("soaking until %v, the soak of %v ran from %v", d.SoakingUntil, in.SoakTime, d.LastRelease)
		}
		if d.HaltReason != "" && len(d.Admitted) > 0 {
			t.Fatalf("halted (%s) but admitted %v", d.HaltReason, d.Admitted)
		}
		if d.HaltReason == nodemaintv1alpha1.ReasonNodeDrainTimedOut && len(d.Holding) == 0 {
			t.Fatalf("halted on drainTimeout, no node beyond maxBlockedNodes (blocked %v)", d.Blocked)
		}
		if (len(in.Alerts) > 0 || in.AlertsUnknown != "") && len(d.Admitted) > 0 {
			t.Fatalf("alerts %v (unknown %q) but admitted %v", in.Alerts, in.AlertsUnknown, d.Admitted)
		}
		// Nodes wait on a known answer: they are looked at again when it would go stale, at the
		// latest (a newer answer brings a look of its own).
		if in.Spec.HaltOnAlerts != nil && in.AlertsUnknown == "" && d.Waiting > 0 && (d.RecheckAfter <= 0 || d.RecheckAfter > in.AlertsFresh.Sub(now)) {
			t.Fatalf("%d nodes wait on the alerts, fresh for %v, next look in %v", d.Waiting, in.AlertsFresh.Sub(now), d.RecheckAfter)
		}
		state := map[string]string{}
		for _, n := range in.Nodes {
			if n.Ended != "" {
				state[n.Name] = "done"
			}
		}
		for _, turn := range d.InTurn {
			if state[turn.Name] != "" {
				t.Fatalf("node %s in its turn and %s", turn.Name, state[turn.Name])
			}
			if !slices.ContainsFunc(in.Nodes, func(n Node) bool { return n.Name == turn.Name }) {
				t.Fatalf("node %s in its turn, not selected", turn.Name)
			}
			state[turn.Name] = "in turn"
		}
		if d.Done+len(d.InTurn)+d.Waiting != len(in.Nodes) {
			t.Fatalf("done %d + in turn %d + waiting %d != %d selected", d.Done, len(d.InTurn), d.Waiting, len(in.Nodes))
		}
		// Admitted in order: no waiting node comes before an admitted one, but a control-plane
		// node held by another in its turn.
		var order []Node
		for _, n := range in.Nodes {
			held := n.ControlPlane && controlPlane > 0 && !slices.Contains(d.Admitted, n.Name)
			if slices.Contains(d.Admitted, n.Name) || state[n.Name] == "" && !held {
				order = append(order, n)
			}
		}
		sort.Slice(order, func(i, j int) bool {
			if order[i].Unschedulable != order[j].Unschedulable {
				return order[i].Unschedulable
			}
			return order[i].Name < order[j].Name
		})
		for i, n := range order {
			if i < len(d.Admitted) && n.Name != d.Admitted[i] {
				t.Fatalf("admitted %v, but the order is %v", d.Admitted, order)
			}
		}
	})
}

// TestHaltOnAlerts: while alerts the rollout selects fire, or cannot be told, no node starts its
// turn; the nodes in their turn stay; while nodes wait on a known answer, they are looked at
// again when it goes stale.
func TestHaltOnAlerts(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	spec := nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2)),
		HaltOnAlerts: &nodemaintv1alpha1.AlertSelector{MatchLabels: map[string]string{"severity": "critical"}}}
	nodes := []Node{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}
	inTurn := []nodemaintv1alpha1.NodeTurn{{Name: "n1", Since: metav1.NewTime(now.Add(-time.Minute))}}
	in := Input{Active: true, Spec: spec, Nodes: nodes, InTurn: inTurn, AlertsFresh: now.Add(30 * time.Second)}

	firing := in
	firing.Alerts = []string{"EtcdMembersDown"}
	d := Turns(firing, now)
	if d.HaltReason != nodemaintv1alpha1.ReasonAlertsFiring {
		t.Errorf("firing: halt %q; want %q", d.HaltReason, nodemaintv1alpha1.ReasonAlertsFiring)
	}
	if !slices.Equal(d.Alerts, []string{"EtcdMembersDown"}) {
		t.Errorf("firing: alerts %v; want EtcdMembersDown", d.Alerts)
	}
	if len(d.Admitted) > 0 {
		t.Errorf("firing: admitted %v; want none", d.Admitted)
	}
	if got := turnNames(d.InTurn); !slices.Equal(got, []string{"n1"}) {
		t.Errorf("firing: in turn %v; want n1 to stay", got)
	}
	if d.RecheckAfter != 30*time.Second {
		t.Errorf("firing: recheck %v; want 30s, when the answer goes stale", d.RecheckAfter)
	}
	if t.Failed() {
		t.FailNow()
	}
	unknown := in
	unknown.AlertsUnknown, unknown.AlertsFresh = "Prometheus unreachable since 2026-01-01T11:59:00Z: connection refused", time.Time{}
	d = Turns(unknown, now)
	if d.HaltReason != nodemaintv1alpha1.ReasonAlertsUnknown {
		t.Errorf("unknown: halt %q; want %q", d.HaltReason, nodemaintv1alpha1.ReasonAlertsUnknown)
	}
	if d.AlertsUnknown != unknown.AlertsUnknown {
		t.Errorf("unknown: says %q; want %q", d.AlertsUnknown, unknown.AlertsUnknown)
	}
	if len(d.Admitted) > 0 {
		t.Errorf("unknown: admitted %v; want none", d.Admitted)
	}
	if d.RecheckAfter != 0 {
		t.Errorf("unknown: recheck %v; want no look of its own (a new answer brings one)", d.RecheckAfter)
	}
	if t.Failed() {
		t.FailNow()
	}
	d = Turns(in, now)
	if d.HaltReason != "" {
		t.Errorf("clear: halt %q; want none", d.HaltReason)
	}
	if !slices.Equal(d.Admitted, []string{"n2"}) {
		t.Errorf("clear: admitted %v; want n2", d.Admitted)
	}
	if d.RecheckAfter != 30*time.Second {
		t.Errorf("clear: recheck %v; want a look in 30s (n3 waits)", d.RecheckAfter)
	}
	if t.Failed() {
		t.FailNow()
	}
	// Nothing waits: firing alerts halt nothing, and nothing is looked at again.
	done := Input{Active: true, Spec: spec, Nodes: []Node{{Name: "n1"}}, InTurn: inTurn, Alerts: []string{"EtcdMembersDown"}, AlertsFresh: now.Add(30 * time.Second)}
	d = Turns(done, now)
	if d.HaltReason != "" {
		t.Errorf("nothing waits: halt %q; want none", d.HaltReason)
	}
	if d.RecheckAfter != 0 {
		t.Errorf("nothing waits: recheck %v; want none", d.RecheckAfter)
	}
}

// TestSoakBlockedControlPlane: a turn that ends starts the soak, during which no node starts; a
// node past drainTimeout is blocked up to maxBlockedNodes and no longer counts, one more is
// handled by onNodeFailure; control-plane nodes go one at a time, the others passing them.
func TestSoakBlockedControlPlane(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	spec := nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2)), MaxBlockedNodes: 1}

	// n1's turn ended: the soak starts now; n3 waits until it ran.
	nodes := []Node{{Name: "n1", Ended: nodemaintv1alpha1.PhaseReleased}, {Name: "n2"}, {Name: "n3"}}
	turns := []nodemaintv1alpha1.NodeTurn{{Name: "n1", Since: metav1.NewTime(now.Add(-time.Minute))}, {Name: "n2", Since: metav1.NewTime(now.Add(-time.Minute))}}
	d := Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: turns, SoakTime: 30 * time.Second}, now)
	if len(d.Admitted) > 0 {
		t.Errorf("released now: admitted %v; want none during the soak", d.Admitted)
	}
	if !d.LastRelease.Equal(now) {
		t.Errorf("released now: last release %v; want %v", d.LastRelease, now)
	}
	if want := now.Add(30 * time.Second); !d.SoakingUntil.Equal(want) {
		t.Errorf("released now: soaking until %v; want %v", d.SoakingUntil, want)
	}
	if d.RecheckAfter != 30*time.Second {
		t.Errorf("released now: recheck %v; want 30s", d.RecheckAfter)
	}
	if t.Failed() {
		t.FailNow()
	}
	d = Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: d.InTurn, SoakTime: 30 * time.Second, LastRelease: d.LastRelease}, now.Add(30*time.Second))
	if !slices.Equal(d.Admitted, []string{"n3"}) {
		t.Errorf("soaked: admitted %v; want n3", d.Admitted)
	}
	if !d.SoakingUntil.IsZero() {
		t.Errorf("soaked: soaking until %v; want no soak", d.SoakingUntil)
	}
	if !d.LastRelease.Equal(now) {
		t.Errorf("soaked: last release %v; want %v", d.LastRelease, now)
	}
	if t.Failed() {
		t.FailNow()
	}

	// n1 and n2 past drainTimeout: n1, the earlier, is blocked and no longer counts; n2 holds
	// the rollout (Pause), or fails (Continue).
	nodes = []Node{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}, {Name: "n4"}}
	late := []nodemaintv1alpha1.NodeTurn{{Name: "n1", Since: metav1.NewTime(now.Add(-3 * time.Hour))}, {Name: "n2", Since: metav1.NewTime(now.Add(-2 * time.Hour))}}
	d = Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: late, DrainTimeout: time.Hour}, now)
	if !slices.Equal(d.Blocked, []string{"n1"}) {
		t.Errorf("pause: blocked %v; want n1", d.Blocked)
	}
	if !slices.Equal(d.Holding, []string{"n2"}) {
		t.Errorf("pause: holding %v; want n2", d.Holding)
	}
	if d.HaltReason != nodemaintv1alpha1.ReasonNodeDrainTimedOut {
		t.Errorf("pause: halt %q; want %q", d.HaltReason, nodemaintv1alpha1.ReasonNodeDrainTimedOut)
	}
	if len(d.Admitted) > 0 {
		t.Errorf("pause: admitted %v; want none", d.Admitted)
	}
	if !slices.Equal(d.TimedOut, []string{"n1", "n2"}) {
		t.Errorf("pause: timed out %v; want n1, n2", d.TimedOut)
	}
	if t.Failed() {
		t.FailNow()
	}
	spec.MaxBlockedNodes = 2
	d = Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: late, DrainTimeout: time.Hour}, now)
	if !slices.Equal(d.Blocked, []string{"n1", "n2"}) {
		t.Errorf("two blocked: blocked %v; want n1, n2", d.Blocked)
	}
	if d.HaltReason != "" {
		t.Errorf("two blocked: halt %q; want none", d.HaltReason)
	}
	if !slices.Equal(d.Admitted, []string{"n3", "n4"}) {
		t.Errorf("two blocked: admitted %v; want n3, n4", d.Admitted)
	}
	if t.Failed() {
		t.FailNow()
	}
	spec.MaxBlockedNodes, spec.OnNodeFailure = 1, nodemaintv1alpha1.NodeFailureContinue
	d = Turns(Input{Active: true, Spec: spec, Nodes: nodes, InTurn: late, DrainTimeout: time.Hour}, now)
	if !slices.Equal(d.Blocked, []string{"n1"}) {
		t.Errorf("continue: blocked %v; want n1", d.Blocked)
	}
	if d.HaltReason != "" {
		t.Errorf("continue: halt %q; want none", d.HaltReason)
	}
	if !d.InTurn[1].Failed {
		t.Errorf("continue: in turn %+v; want the second (n2) failed", d.InTurn)
	}
	if !slices.Equal(d.Admitted, []string{"n3"}) {
		t.Errorf("continue: admitted %v; want n3", d.Admitted)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Control-plane nodes one at a time, whatever maxUnavailable: cp1 starts, cp2 waits, w1
	// and w2 pass it.
	spec = nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromString("100%"))}
	nodes = []Node{{Name: "cp1", ControlPlane: true}, {Name: "cp2", ControlPlane: true}, {Name: "w1"}, {Name: "w2"}}
	d = Turns(Input{Active: true, Spec: spec, Nodes: nodes}, now)
	if !slices.Equal(d.Admitted, []string{"cp1", "w1", "w2"}) {
		t.Errorf("control plane: admitted %v; want cp1, w1, w2", d.Admitted)
	}
	if d.Waiting != 1 {
		t.Errorf("control plane: waiting %d; want 1 (cp2)", d.Waiting)
	}
}

// TestRefused: a maintenance without a rollout that its status says selects more than one
// control-plane node stays in Planning on every node; on a control-plane node it waits for its
// status to say so for its generation; a rollout is never refused.
func TestRefused(t *testing.T) {
	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp1", Labels: map[string]string{nodemaintv1alpha1.ControlPlaneLabel: ""}}}
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 2},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true}}
	phases := func() (nodemaintv1alpha1.Phase, nodemaintv1alpha1.Phase) {
		return Phase(nm, cp, nil, false), Phase(nm, worker, nil, false)
	}
	c, w := phases()
	if c != nodemaintv1alpha1.PhasePlanning {
		t.Errorf("no verdict yet: control plane %s; want %s", c, nodemaintv1alpha1.PhasePlanning)
	}
	if w != nodemaintv1alpha1.PhaseDrain {
		t.Errorf("no verdict yet: worker %s; want %s", w, nodemaintv1alpha1.PhaseDrain)
	}
	if t.Failed() {
		t.FailNow()
	}
	nm.Status.Conditions = []metav1.Condition{{Type: nodemaintv1alpha1.ConditionNodesSelected, Status: metav1.ConditionTrue, Reason: nodemaintv1alpha1.ReasonNodesSelected, ObservedGeneration: 1}}
	if c, _ := phases(); c != nodemaintv1alpha1.PhasePlanning {
		t.Fatalf("verdict of an older generation: control plane %s, want Planning", c)
	}
	nm.Status.Conditions[0].ObservedGeneration = 2
	c, w = phases()
	if c != nodemaintv1alpha1.PhaseDrain {
		t.Errorf("one control-plane node: control plane %s; want %s", c, nodemaintv1alpha1.PhaseDrain)
	}
	if w != nodemaintv1alpha1.PhaseDrain {
		t.Errorf("one control-plane node: worker %s; want %s", w, nodemaintv1alpha1.PhaseDrain)
	}
	if t.Failed() {
		t.FailNow()
	}
	nm.Status.Conditions[0].Status, nm.Status.Conditions[0].Reason = metav1.ConditionFalse, nodemaintv1alpha1.ReasonEtcdQuorumAtRisk
	c, w = phases()
	if c != nodemaintv1alpha1.PhasePlanning {
		t.Errorf("refused: control plane %s; want %s", c, nodemaintv1alpha1.PhasePlanning)
	}
	if w != nodemaintv1alpha1.PhasePlanning {
		t.Errorf("refused: worker %s; want %s", w, nodemaintv1alpha1.PhasePlanning)
	}
	if t.Failed() {
		t.FailNow()
	}
	nm.Spec.Rollout = &nodemaintv1alpha1.RolloutSpec{}
	if Refused(nm, cp) {
		t.Error("a rollout refused on a control-plane node")
	}
	if Refused(nm, worker) {
		t.Error("a rollout refused on a worker")
	}
}
