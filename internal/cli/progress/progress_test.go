package progress

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

// bigMaintenance is the status of a maintenance of 5,000 nodes: two listed, 4,000 more with pods
// pending not listed, the rest with nothing to report.
func bigMaintenance() *nodemaintv1alpha1.NodeMaintenance {
	return &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Generation: 1},
		Spec:       nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true},
		Status: nodemaintv1alpha1.NodeMaintenanceStatus{
			ObservedGeneration: 1, Phase: nodemaintv1alpha1.PhaseDrain,
			SelectedNodes: 5000, NodesPending: 4002, NodesDrained: 998,
			PodsPendingEvacuation: 4003, PodsEvacuating: 1, PodsSkipped: 7,
			Nodes: map[string]nodemaintv1alpha1.NodeMaintenanceNodeStatus{
				"node-a": {PodsPendingEvacuation: 2, PodsEvacuating: 1, PodsSkipped: 1, Blocked: []nodemaintv1alpha1.BlockedPods{
					{Reason: nodemaintv1alpha1.BlockedReasonPodDisruptionBudget, Message: "The disruption budget db needs 1 healthy pods", Pods: []string{"prod/db-0"}, Count: 1},
				}},
				"node-b": {PodsPendingEvacuation: 1},
			},
			NodesNotListed: 4000,
			Conditions:     []metav1.Condition{{Type: nodemaintv1alpha1.ConditionDrained, Status: metav1.ConditionFalse, Reason: nodemaintv1alpha1.ReasonPodsPending}},
		},
	}
}

// The plugin shows the totals over every node, the nodes the status lists, and how many it does
// not list.
func TestDisplayOfABoundedStatus(t *testing.T) {
	nm := bigMaintenance()
	if got, want := Summary(nm), "fleet: phase Drain, 5000 nodes (4002 with pods pending, 998 drained), 4003 pods pending, 1 evacuating by their owners, 7 skipped and left running, drained False"; got != want {
		t.Errorf("summary:\n got %q\nwant %q", got, want)
	}
	var table bytes.Buffer
	WriteNodeTable(&table, nm)
	for _, want := range []string{
		"NODE    PENDING  EVACUATING  SKIPPED  BLOCKED BY\n",
		"node-a  2        1           1        PodDisruptionBudget prod/db-0\n",
		"node-b  1        0           0        -\n",
		"4000 more nodes not listed: the status details at most 100 nodes, those with the most pods pending\n",
		"998 more nodes with nothing to report\n",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("node table lacks %q:\n%s", want, table.String())
		}
	}
	lines := BlockingLines(nm)
	if len(lines) != 2 {
		t.Fatalf("blocking lines %q, want 2", lines)
	}
	if want := "node-a: PodDisruptionBudget (1) prod/db-0: The disruption budget db"; !strings.HasPrefix(lines[0], want) {
		t.Errorf("first blocking line %q, want it to start %q", lines[0], want)
	}
	if want := "4000 more nodes not listed"; !strings.HasPrefix(lines[1], want) {
		t.Errorf("second blocking line %q, want it to start %q", lines[1], want)
	}
}

// A maintenance that selects no node is never drained: following it fails at once, naming the
// reason, instead of waiting forever.
func TestFollowFailsWhenNoNodeIsSelected(t *testing.T) {
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "no-such-node", Generation: 1},
		Spec:       nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true},
		Status: nodemaintv1alpha1.NodeMaintenanceStatus{
			ObservedGeneration: 1, Phase: nodemaintv1alpha1.PhaseDrain,
			Conditions: []metav1.Condition{
				{Type: nodemaintv1alpha1.ConditionDrained, Status: metav1.ConditionFalse, Reason: nodemaintv1alpha1.ReasonNoNodesSelected, ObservedGeneration: 1},
				{Type: nodemaintv1alpha1.ConditionNodesSelected, Status: metav1.ConditionFalse, Reason: nodemaintv1alpha1.ReasonNoNodesSelected, ObservedGeneration: 1,
					Message: "the nodeSelector selects no node"},
			},
		},
	}
	c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(nm).
		WithIndex(&nodemaintv1alpha1.NodeMaintenance{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		Build()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Follow(context.Background(), &out, listOnly{c}, "no-such-node", 0) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("follow still waits for a maintenance that selects no node")
	}
	if err == nil {
		t.Fatal("follow: no error; want exit 1 naming the empty selection")
	}
	if code := clioptions.ExitCode(err); code != clioptions.ExitError {
		t.Fatalf("follow: %v (exit %d); want exit %d", err, code, clioptions.ExitError)
	}
	if want := "NodeMaintenance no-such-node drains nothing: the nodeSelector selects no node (NoNodesSelected); remove it with `kubectl maintenance complete --name no-such-node --delete`"; err.Error() != want {
		t.Fatalf("follow: %v; want %q", err, want)
	}
}

// listOnly is a fake client that says it cannot stream a watch's initial list (watch-list
// semantics; it sends no bookmark), as client-go's fake clientsets do, so that informers list it.
type listOnly struct{ client.WithWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// Follow shows each change the watch brings and ends when the maintenance is drained, fails when
// it is deleted, and times out with exit code 3.
func TestFollowWatchesChanges(t *testing.T) {
	pending := func() *nodemaintv1alpha1.NodeMaintenance {
		nm := bigMaintenance()
		nm.Status.Nodes, nm.Status.NodesNotListed = nil, 0
		return nm
	}
	start := func(t *testing.T, timeout time.Duration) (client.WithWatch, *syncBuffer, chan error) {
		c := fake.NewClientBuilder().WithScheme(clioptions.Scheme).WithObjects(pending()).WithStatusSubresource(&nodemaintv1alpha1.NodeMaintenance{}).Build()
		out := &syncBuffer{}
		done := make(chan error, 1)
		go func() { done <- Follow(t.Context(), out, listOnly{c}, "fleet", timeout) }()
		waitFor(t, func() bool { return strings.Contains(out.String(), "4003 pods pending") })
		return c, out, done
	}
	wait := func(t *testing.T, done chan error) error {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("follow did not end")
			return nil
		}
	}

	t.Run("drained", func(t *testing.T) {
		c, out, done := start(t, 0)
		nm := pending()
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(nm), nm); err != nil {
			t.Fatal(err)
		}
		nm.Status.PodsPendingEvacuation = 12
		if err := c.Status().Update(t.Context(), nm); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return strings.Contains(out.String(), "12 pods pending") })
		nm.Status.PodsPendingEvacuation, nm.Status.NodesPending, nm.Status.NodesDrained = 0, 0, 5000
		nm.Status.Conditions = []metav1.Condition{{Type: nodemaintv1alpha1.ConditionDrained, Status: metav1.ConditionTrue, Reason: nodemaintv1alpha1.ReasonDrained, ObservedGeneration: 1}}
		if err := c.Status().Update(t.Context(), nm); err != nil {
			t.Fatal(err)
		}
		if err := wait(t, done); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out.String(), "nodemaintenance.nodemaint.dev/fleet: drained\n") {
			t.Errorf("output:\n%s", out.String())
		}
	})
	t.Run("deleted", func(t *testing.T) {
		c, _, done := start(t, 0)
		if err := c.Delete(t.Context(), pending()); err != nil {
			t.Fatal(err)
		}
		if err := wait(t, done); err == nil || err.Error() != "NodeMaintenance fleet was deleted" {
			t.Errorf("follow: %v, want the deletion", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		_, _, done := start(t, 500*time.Millisecond)
		err := wait(t, done)
		if code := clioptions.ExitCode(err); code != clioptions.ExitTimedOut {
			t.Fatalf("follow: %v (exit %d), want a time-out (exit %d)", err, code, clioptions.ExitTimedOut)
		}
		if want := "timed out waiting for NodeMaintenance fleet to drain: 4003 pods pending"; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("follow: %v, want it to start %q", err, want)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in other goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "the condition", func(context.Context) (bool, string, error) { return cond(), "", nil })
}
