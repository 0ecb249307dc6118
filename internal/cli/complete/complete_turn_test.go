package complete

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/cli/target"
)

// turnsCluster: rollout pool-a (release Manual) has node-1 in its turn and node-2 waiting;
// rollout pool-b (release Rebooted) has node-3 in its turn; node-4 is in both pool-a's and
// pool-c's turns; node-5 is maintained without a rollout by NodeMaintenance node-5; node-6 is
// in pool-a's turn and maintained by node-6, which does not roll; node-7 completed its turn.
func turnsCluster() client.Client {
	manual := func(name string, inTurn ...string) *nodemaintv1alpha1.NodeMaintenance {
		nm := &nodemaintv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true,
				Rollout: &nodemaintv1alpha1.RolloutSpec{Release: nodemaintv1alpha1.ReleaseManual}},
			Status: nodemaintv1alpha1.NodeMaintenanceStatus{Rollout: &nodemaintv1alpha1.RolloutStatus{}},
		}
		for _, n := range inTurn {
			nm.Status.Rollout.InTurn = append(nm.Status.Rollout.InTurn, nodemaintv1alpha1.NodeTurn{Name: n})
		}
		return nm
	}
	rebooted := manual("pool-b", "node-3")
	rebooted.Spec.Rollout.Release = nodemaintv1alpha1.ReleaseRebooted
	plain := func(name string) *nodemaintv1alpha1.NodeMaintenance {
		return &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true}}
	}
	node := func(name string, annotations ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
		for i := 0; i+1 < len(annotations); i += 2 {
			n.Annotations[annotations[i]] = annotations[i+1]
		}
		return n
	}
	const entries, complete = nodemaintv1alpha1.MaintenancesAnnotation, nodemaintv1alpha1.CompleteAnnotation
	return fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(
		manual("pool-a", "node-1", "node-4", "node-6"), rebooted, manual("pool-c", "node-4"), plain("node-5"), plain("node-6"),
		node("node-1", entries, "pool-a=DrainComplete", complete, "someone-else"),
		node("node-2", entries, "pool-a=Planning"),
		node("node-3", entries, "pool-b=DrainComplete"),
		node("node-4", entries, "pool-a=Drain,pool-c=Drain"),
		node("node-5", entries, "node-5=Drain"),
		node("node-6", entries, "node-6=Drain,pool-a=Drain"),
		node("node-7", entries, "pool-a=Released", complete, "pool-a"),
	).Build()
}

// TestCompleteTurns: complete NODE ends the node's turn in its rollout by adding the rollout's
// name to nodemaint.dev/complete, keeping the names others wrote; it finds the rollout from the
// node's annotation, or takes --maintenance; it refuses, changing nothing, an unknown node, a
// node waiting for its turn, a rollout that does not release on complete, and ambiguity. Nodes
// in no rollout are left to the whole-maintenance complete.
func TestCompleteTurns(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		nodes    []string
		named    string
		wantDone bool
		wantErr  string
		wantOut  string
		want     map[string]string // node: nodemaint.dev/complete afterwards
	}{
		{nodes: []string{"node-1"}, wantDone: true, wantOut: "node/node-1: turn in nodemaintenance.nodemaint.dev/pool-a completed",
			want: map[string]string{"node-1": "someone-else,pool-a"}},
		{nodes: []string{"node-1"}, named: "pool-a", wantDone: true, want: map[string]string{"node-1": "someone-else,pool-a"}},
		{nodes: []string{"node-4"}, wantDone: true, wantErr: "node node-4 is in the rollouts pool-a, pool-c: name one with --maintenance: nothing changed"},
		{nodes: []string{"node-4"}, named: "pool-c", wantDone: true, want: map[string]string{"node-4": "pool-c"}},
		{nodes: []string{"node-1", "node-2"}, wantDone: true, wantErr: "node node-2 waits for its turn in pool-a: complete a node once its turn started: nothing changed",
			want: map[string]string{"node-1": "someone-else"}},
		{nodes: []string{"node-3"}, wantDone: true, wantErr: "NodeMaintenance pool-b releases a node by itself (release Rebooted), not on complete"},
		{nodes: []string{"node-1", "no-such-node"}, wantDone: true, wantErr: "no node named no-such-node: nothing changed",
			want: map[string]string{"node-1": "someone-else"}},
		{nodes: []string{"no-such-node"}, named: "pool-a", wantDone: true, wantErr: "no node named no-such-node: nothing changed"},
		{nodes: []string{"node-1"}, named: "node-5", wantDone: true, wantErr: "NodeMaintenance node-5 does not roll (no spec.rollout): complete it as a whole with `kubectl maintenance complete --name node-5`"},
		{nodes: []string{"node-1"}, named: "pool-z", wantDone: true, wantErr: "no NodeMaintenance pool-z: nothing changed"},
		{nodes: []string{"node-3"}, named: "pool-a", wantDone: true, wantErr: "node node-3 is not in the rollout pool-a"},
		{nodes: []string{"node-6"}, wantDone: true, wantErr: "NodeMaintenance node-6 maintains these nodes, and they are in the rollout pool-a: say which to complete, --name node-6 (the whole maintenance) or --maintenance pool-a"},
		{nodes: []string{"node-7"}, wantDone: true, wantOut: "node/node-7: its turn in nodemaintenance.nodemaint.dev/pool-a already ended (Released)",
			want: map[string]string{"node-7": "pool-a"}},
		// In no rollout: the NodeMaintenance named after the node is completed, as always.
		{nodes: []string{"node-5"}, wantDone: false},
		{nodes: []string{"no-such-node"}, wantDone: false},
	} {
		c := turnsCluster()
		tg := &target.Target{}
		if err := tg.Complete(tc.nodes); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		done, err := completeTurns(ctx, &out, c, tg, tc.named, "")
		name := strings.Join(tc.nodes, " ") + " --maintenance=" + tc.named
		if done != tc.wantDone {
			t.Errorf("%s: done %v; want %v", name, done, tc.wantDone)
		}
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v; want %q", name, err, tc.wantErr)
		}
		if !strings.Contains(out.String(), tc.wantOut) {
			t.Errorf("%s: output %q, want %q", name, out.String(), tc.wantOut)
		}
		for n, want := range tc.want {
			node := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: n}, node); err != nil {
				t.Fatal(err)
			}
			if got := node.Annotations[nodemaintv1alpha1.CompleteAnnotation]; got != want {
				t.Errorf("%s: node %s completes %q, want %q", name, n, got, want)
			}
		}
	}
}

func TestWithName(t *testing.T) {
	for _, tc := range [][3]string{
		{"", "a", "a"},
		{"b", "a", "b,a"},
		{"b, a", "a", "b, a"},
		{"ab", "a", "ab,a"},
	} {
		if got := withName(tc[0], tc[1]); got != tc[2] {
			t.Errorf("withName(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}
