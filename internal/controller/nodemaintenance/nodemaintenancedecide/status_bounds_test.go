package nodemaintenancedecide

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/rollout"
)

// listNodes lists the nodes with the most to report, by a total order, and counts the rest.
func TestListNodesChoosesDeterministically(t *testing.T) {
	reports := []nodeReport{
		{name: "quiet"}, // nothing to report: neither listed nor counted
		{name: "b-pending-1", status: nodemaintv1alpha1.NodeMaintenanceNodeStatus{PodsPendingEvacuation: 1}},
		{name: "a-pending-1", status: nodemaintv1alpha1.NodeMaintenanceNodeStatus{PodsPendingEvacuation: 1}},
		{name: "z-pending-9", status: nodemaintv1alpha1.NodeMaintenanceNodeStatus{PodsPendingEvacuation: 9}},
		{name: "volumes", status: nodemaintv1alpha1.NodeMaintenanceNodeStatus{VolumesAttached: 2}},
		{name: "skipped", status: nodemaintv1alpha1.NodeMaintenanceNodeStatus{PodsSkipped: 3}},
		{name: "oos", status: nodemaintv1alpha1.NodeMaintenanceNodeStatus{OutOfService: true}},
	}
	for _, tc := range []struct {
		max        int
		want       []string
		notListed  int32
		reportsRev bool
	}{
		{max: 100, want: []string{"a-pending-1", "b-pending-1", "oos", "skipped", "volumes", "z-pending-9"}},
		{max: 3, want: []string{"a-pending-1", "b-pending-1", "z-pending-9"}, notListed: 3},
		{max: 4, want: []string{"a-pending-1", "b-pending-1", "volumes", "z-pending-9"}, notListed: 2, reportsRev: true},
		{max: 5, want: []string{"a-pending-1", "b-pending-1", "skipped", "volumes", "z-pending-9"}, notListed: 1},
	} {
		in := append([]nodeReport(nil), reports...)
		if tc.reportsRev {
			for i, j := 0, len(in)-1; i < j; i, j = i+1, j-1 {
				in[i], in[j] = in[j], in[i]
			}
		}
		got, notListed := listNodes(in, tc.max, 1<<20)
		if names := sortedKeys(got); strings.Join(names, ",") != strings.Join(tc.want, ",") {
			t.Errorf("max %d: listed %v; want %v", tc.max, names, tc.want)
		}
		if notListed != tc.notListed {
			t.Errorf("max %d: %d not listed; want %d", tc.max, notListed, tc.notListed)
		}
	}
	got, notListed := listNodes([]nodeReport{{name: "quiet"}}, 100, 1<<20)
	if got != nil {
		t.Errorf("nothing to report: listed %v; want nil", got)
	}
	if notListed != 0 {
		t.Errorf("nothing to report: %d not listed; want 0", notListed)
	}
}

// However many nodes there are, and however much each has to say, status.nodes stays within its
// byte budget and the CRD's limits.
func TestListNodesStaysWithinBudget(t *testing.T) {
	long := strings.Repeat("x", 253)
	var reports []nodeReport
	for i := range 10000 {
		var blocked []nodemaintv1alpha1.BlockedPods
		for r := range drain.MaxBlockedEntries {
			b := nodemaintv1alpha1.BlockedPods{Reason: fmt.Sprintf("Reason%02d", r), Message: strings.Repeat("é", 2000), Count: 1000}
			for p := range drain.MaxBlockedNames {
				b.Pods = append(b.Pods, fmt.Sprintf("%s/%s-%d", long[:63], long[:240], p))
			}
			blocked = append(blocked, b)
		}
		reports = append(reports, nodeReport{
			name:   fmt.Sprintf("%s-%05d", long[:240], i),
			status: nodemaintv1alpha1.NodeMaintenanceNodeStatus{PodsPendingEvacuation: 5000, Blocked: boundBlocked(blocked)},
		})
	}
	got, notListed := listNodes(reports, nodemaintv1alpha1.MaxStatusNodes, nodemaintv1alpha1.MaxStatusNodesBytes)
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > nodemaintv1alpha1.MaxStatusNodesBytes {
		t.Errorf("status.nodes is %d bytes, over the budget of %d", len(raw), nodemaintv1alpha1.MaxStatusNodesBytes)
	}
	if len(got) == 0 {
		t.Errorf("no node listed of %d; want some", len(reports))
	}
	if int(notListed) != len(reports)-len(got) {
		t.Errorf("%d nodes listed, %d not listed, of %d; want the rest counted, %d", len(got), notListed, len(reports), len(reports)-len(got))
	}
	for _, ns := range got {
		for _, b := range ns.Blocked {
			if n := utf8.RuneCountInString(b.Message); n > nodemaintv1alpha1.MaxBlockedMessageLength {
				t.Fatalf("a message of %d characters; want at most %d", n, nodemaintv1alpha1.MaxBlockedMessageLength)
			}
			if !utf8.ValidString(b.Message) {
				t.Fatalf("a message not valid UTF-8: %q", b.Message)
			}
		}
	}
	t.Logf("%d worst-case nodes listed in %d bytes", len(got), len(raw))
}

func sortedKeys(m map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus) []string {
	return slices.Sorted(maps.Keys(m))
}

// A rollout with hundreds of nodes past their drainTimeout, each with a long name, writes
// conditions within their bounds: a message over the API's 32,768 would fail every status write
// and stop the rollout.
func TestConditionMessagesBounded(t *testing.T) {
	nm := &nodemaintv1alpha1.NodeMaintenance{Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
		Cordon: true, Drain: true, DrainTimeout: &nodemaintv1alpha1.Duration{Duration: time.Hour},
		Rollout: &nodemaintv1alpha1.RolloutSpec{},
	}}
	turns := &rollout.Decision{}
	for i := range 500 {
		turns.TimedOut = append(turns.TimedOut, fmt.Sprintf("%s-%03d", strings.Repeat("n", 240), i))
	}
	status := maintenanceStatus(nm, nil, turns, time.Now())
	timedOut := false
	for _, c := range status.Conditions {
		if len(c.Message) > nodemaintv1alpha1.MaxConditionMessageLength {
			t.Errorf("condition %s: a message of %d bytes; want at most %d", c.Type, len(c.Message), nodemaintv1alpha1.MaxConditionMessageLength)
		}
		if !utf8.ValidString(c.Message) {
			t.Errorf("condition %s: a message not valid UTF-8", c.Type)
		}
		if c.Type == nodemaintv1alpha1.ConditionDrainTimedOut {
			timedOut = c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "and 495 more")
		}
	}
	if !timedOut {
		t.Errorf("DrainTimedOut does not name a few nodes and count the rest: %+v", status.Conditions)
	}
}

// A maintenance past the bound on some of its nodes (maintenance.MaxMaintenancesPerNode) says so
// in a condition naming a few of them, holds their pods by that in status.nodes, and is never
// Drained before it acted on them, even when nothing is left on them.
func TestStatusOfMaintenanceWaitingForAPlace(t *testing.T) {
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "late", Generation: 2},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true}}
	var nodes []NodeDecision
	for i := range 300 {
		d := NodeDecision{Name: fmt.Sprintf("%s-%03d", strings.Repeat("n", 240), i)}
		if i%3 == 0 {
			d.Report.Beyond = []string{"other", "late"}
		}
		nodes = append(nodes, d)
	}
	cond := func(status nodemaintv1alpha1.NodeMaintenanceStatus, t string) *metav1.Condition {
		for i := range status.Conditions {
			if status.Conditions[i].Type == t {
				return &status.Conditions[i]
			}
		}
		return nil
	}

	// Nothing left on any node: drained where it acts, not Drained.
	status := maintenanceStatus(nm, nodes, nil, time.Now())
	over := cond(status, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit)
	if over == nil {
		t.Fatalf("no NodesOverMaintenanceLimit condition; want one (%+v)", status.Conditions)
	}
	conditionIs(t, over, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit, metav1.ConditionTrue, nodemaintv1alpha1.ReasonTooManyMaintenances)
	if want := "waiting for a place on 100 of the 300 selected nodes ("; !strings.HasPrefix(over.Message, want) {
		t.Errorf("NodesOverMaintenanceLimit message %q; want it to begin %q", over.Message, want)
	}
	if want := " and 95 more): at most 64 NodeMaintenances act on a node at once"; !strings.Contains(over.Message, want) {
		t.Errorf("NodesOverMaintenanceLimit message %q; want it to say %q", over.Message, want)
	}
	if len(over.Message) > nodemaintv1alpha1.MaxConditionMessageLength {
		t.Errorf("NodesOverMaintenanceLimit message of %d bytes; want at most %d", len(over.Message), nodemaintv1alpha1.MaxConditionMessageLength)
	}
	conditionIs(t, cond(status, nodemaintv1alpha1.ConditionDrained), nodemaintv1alpha1.ConditionDrained, metav1.ConditionFalse, nodemaintv1alpha1.ReasonTooManyMaintenances)
	if status.Phase != nodemaintv1alpha1.PhaseDrain {
		t.Errorf("phase %s, want Drain", status.Phase)
	}

	// Pods left on a node it waits on: held by the bound, whatever holds them for the others.
	nodes[3].Report = nodedecide.Report{Pending: 7, Left: []string{"a/1", "a/2"}, Beyond: nodes[3].Report.Beyond,
		Blocked: []nodemaintv1alpha1.BlockedPods{{Reason: nodemaintv1alpha1.BlockedReasonWaitingForOwner, Count: 7}}}
	nodes[4].Report = nodedecide.Report{Pending: 1, Blocked: []nodemaintv1alpha1.BlockedPods{{Reason: nodemaintv1alpha1.BlockedReasonWaitingForOwner, Count: 1}}}
	status = maintenanceStatus(nm, nodes, nil, time.Now())
	if b := status.Nodes[nodes[3].Name].Blocked; len(b) != 1 {
		t.Errorf("waiting node: blocked %+v; want one entry", b)
	} else {
		if b[0].Reason != nodemaintv1alpha1.ReasonTooManyMaintenances {
			t.Errorf("waiting node: blocked by %s; want %s", b[0].Reason, nodemaintv1alpha1.ReasonTooManyMaintenances)
		}
		if b[0].Count != 7 {
			t.Errorf("waiting node: %d pods blocked; want 7", b[0].Count)
		}
		if len(b[0].Pods) != 2 {
			t.Errorf("waiting node: blocked pods named %v; want 2", b[0].Pods)
		}
	}
	if b := status.Nodes[nodes[4].Name].Blocked; len(b) != 1 {
		t.Errorf("acting node: blocked %+v; want one entry", b)
	} else if b[0].Reason != nodemaintv1alpha1.BlockedReasonWaitingForOwner {
		t.Errorf("acting node: blocked by %s; want %s", b[0].Reason, nodemaintv1alpha1.BlockedReasonWaitingForOwner)
	}
	conditionIs(t, cond(status, nodemaintv1alpha1.ConditionDrained), nodemaintv1alpha1.ConditionDrained, "", nodemaintv1alpha1.ReasonPodsPending)

	// A place freed on every node: the condition goes, and the maintenance is Drained.
	for i := range nodes {
		nodes[i].Report = nodedecide.Report{}
	}
	nm.Status = status
	status = maintenanceStatus(nm, nodes, nil, time.Now())
	if c := cond(status, nodemaintv1alpha1.ConditionNodesOverMaintenanceLimit); c != nil {
		t.Errorf("NodesOverMaintenanceLimit %+v stays", c)
	}
	conditionIs(t, cond(status, nodemaintv1alpha1.ConditionDrained), nodemaintv1alpha1.ConditionDrained, metav1.ConditionTrue, "")
}

// conditionIs fails unless the condition c of the type is there with the status and the reason
// (either not checked where empty).
func conditionIs(t *testing.T, c *metav1.Condition, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	if c == nil {
		t.Errorf("no %s condition; want one", typ)
		return
	}
	if status != "" && c.Status != status {
		t.Errorf("%s is %s; want %s (%+v)", typ, c.Status, status, c)
	}
	if reason != "" && c.Reason != reason {
		t.Errorf("%s reason %s; want %s (%+v)", typ, c.Reason, reason, c)
	}
}
