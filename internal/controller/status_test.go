package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/testutil"
)

// statusObjectBudget is what the whole NodeMaintenance of TestStatusBoundedAtScale may weigh, in
// bytes of JSON: status.nodes' budget (128 KiB) with room for the rest. etcd refuses objects
// over 1.5 MiB.
const statusObjectBudget = 160 << 10

// TestStatusBoundedAtScale: a maintenance of 5,000 nodes, each with a pod pending, writes its
// status (drainStartTime, totals over every node) and stays small: it details the 100 nodes with
// the most pods pending (here all have one: the first by name) and counts the others.
func TestStatusBoundedAtScale(t *testing.T) {
	const nodes = 5000
	ctx := context.Background()
	label := map[string]string{"nodemaint.dev/test-bigstatus": "true"}
	// Names as long as a cloud's: the status of a maintenance of all these nodes, each node
	// entry naming its pod, would be about 1.2 MB before it was bounded.
	nodeName := func(i int) string {
		return fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", 100+i/2500, i/250%10, i%250)
	}
	// Creating 10,000 objects one by one takes a minute; in parallel, a few seconds.
	var names []string
	for i := range nodes {
		names = append(names, nodeName(i))
	}
	t.Cleanup(func() { forEach(names, deleteBig) })
	forEach(names, func(ctx context.Context, name string) error {
		if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: label}}); err != nil {
			return err
		}
		return k8s.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: label,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "checkout-7d4b9c8f6d", UID: "rs-uid", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
		})
	}, func(err error) { t.Fatal(err) })

	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "bigstatus"},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "nodemaint.dev/test-bigstatus", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"},
			}}}}},
			Cordon: true, Drain: true, Reason: "kernel upgrade",
			// The pods wait for their owner: nothing is evicted during the test.
			EvacuationResponseTimeout: &nodemaintv1alpha1.Duration{Duration: time.Hour},
		},
	}
	if err := k8s.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNMAndWait(t, "bigstatus") }) // after the nodes are gone (cleanups run last first)

	var got nodemaintv1alpha1.NodeMaintenance
	var size int
	testutil.Eventually(t, 3*time.Minute, "the status of 5,000 nodes written", func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Name: "bigstatus"}, &got); err != nil {
			return false, "", err
		}
		raw, err := json.Marshal(&got)
		size = len(raw)
		s := got.Status
		return s.ObservedGeneration == got.Generation && s.DrainStartTime != nil && s.SelectedNodes == nodes,
			fmt.Sprintf("%d bytes, drainStartTime %v, %d nodes selected", size, s.DrainStartTime, s.SelectedNodes), err
	})
	s := got.Status
	if s.Phase != nodemaintv1alpha1.PhaseDrain {
		t.Errorf("phase %s; want %s", s.Phase, nodemaintv1alpha1.PhaseDrain)
	}
	if s.PodsPendingEvacuation != nodes {
		t.Errorf("%d pods pending evacuation; want %d", s.PodsPendingEvacuation, nodes)
	}
	if s.NodesPending != nodes {
		t.Errorf("%d nodes pending; want %d", s.NodesPending, nodes)
	}
	if s.NodesDrained != 0 {
		t.Errorf("%d nodes drained; want 0", s.NodesDrained)
	}
	if s.PodsSkipped != 0 {
		t.Errorf("%d pods skipped; want 0", s.PodsSkipped)
	}
	if c := meta.FindStatusCondition(s.Conditions, nodemaintv1alpha1.ConditionDrained); c == nil {
		t.Errorf("no Drained condition in %+v", s.Conditions)
	} else {
		if c.Status != metav1.ConditionFalse {
			t.Errorf("Drained condition status %s; want %s", c.Status, metav1.ConditionFalse)
		}
		if want := fmt.Sprintf("%d pods pending evacuation (0 evacuating by their owners) on %d nodes", nodes, nodes); c.Message != want {
			t.Errorf("Drained condition message %q; want %q", c.Message, want)
		}
	}
	if len(s.Nodes) != nodemaintv1alpha1.MaxStatusNodes {
		t.Errorf("%d nodes listed; want %d", len(s.Nodes), nodemaintv1alpha1.MaxStatusNodes)
	}
	if s.NodesNotListed != nodes-nodemaintv1alpha1.MaxStatusNodes {
		t.Errorf("%d nodes not listed; want %d", s.NodesNotListed, nodes-nodemaintv1alpha1.MaxStatusNodes)
	}
	for _, name := range slices.Sorted(slices.Values(names))[:nodemaintv1alpha1.MaxStatusNodes] {
		ns, ok := s.Nodes[name]
		if !ok {
			t.Errorf("node %s not listed; want the first nodes by name listed", name)
			break
		}
		if ns.PodsPendingEvacuation != 1 {
			t.Errorf("node %s: %d pods pending evacuation; want its pod (1)", name, ns.PodsPendingEvacuation)
			break
		}
		if len(ns.Blocked) != 1 {
			t.Errorf("node %s blocked by %+v; want its pod's one reason", name, ns.Blocked)
			break
		}
	}
	if size > statusObjectBudget {
		t.Errorf("the NodeMaintenance weighs %d bytes, over the budget of %d", size, statusObjectBudget)
	}
	t.Logf("the NodeMaintenance of %d nodes weighs %d bytes", nodes, size)
}

// forEach runs fn on every name, 32 at a time, and reports the first error.
func forEach(names []string, fn func(context.Context, string) error, fail ...func(error)) {
	var g errgroup.Group
	g.SetLimit(32)
	for _, name := range names {
		g.Go(func() error { return fn(context.Background(), name) })
	}
	if err := g.Wait(); err != nil && len(fail) > 0 {
		fail[0](err)
	}
}

// deleteBig deletes a node of TestStatusBoundedAtScale and its pod.
func deleteBig(ctx context.Context, name string) error {
	_ = k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	_ = k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}, client.GracePeriodSeconds(0))
	return nil
}

// TestSkippedPodsReported: pods a tenant's label or a DrainRule skips stay on the node; the
// maintenance is drained without them, and says so: it counts them, per node too, and the
// Drained condition and Event name them with what skipped them.
func TestSkippedPodsReported(t *testing.T) {
	ctx := context.Background()
	rule := &nodemaintv1alpha1.DrainRule{
		ObjectMeta: metav1.ObjectMeta{Name: "keep-logs"},
		Spec: nodemaintv1alpha1.DrainRuleSpec{
			Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorSkip},
			Pods:  []nodemaintv1alpha1.DrainRulePodSelector{{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "skipped-logs"}}}},
		},
	}
	if err := k8s.Create(ctx, rule); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rule) })
	createNode(t, "skipped-node", nil, false)
	createNode(t, "skipped-empty", nil, false)
	app := createPod(t, "skipped-app", "skipped-node")
	createPod(t, "skipped-a", "skipped-node", withLabels(map[string]string{"nodemaint.dev/drain": "skip"}))
	createPod(t, "skipped-b", "skipped-node", withLabels(map[string]string{"app": "skipped-logs"}))
	createNM(t, "skipped", true, true, "", "skipped-node", "skipped-empty")

	eventually(t, "skipped pods counted", func(ctx context.Context) (bool, string, error) {
		nm := &nodemaintv1alpha1.NodeMaintenance{}
		err := k8s.Get(ctx, types.NamespacedName{Name: "skipped"}, nm)
		s := nm.Status
		_, quietListed := s.Nodes["skipped-empty"]
		ok := s.PodsSkipped == 2 && s.PodsPendingEvacuation == 1 && s.NodesPending == 1 && s.Nodes["skipped-node"].PodsSkipped == 2 &&
			s.Nodes["skipped-node"].PodsPendingEvacuation == 1 && !quietListed && s.NodesDrained == 1 && s.NodesNotListed == 0
		return ok, fmt.Sprintf("%+v", s), err
	})

	deletePod(app)
	const want = "every targeted pod is gone from the 2 selected nodes; 2 pods skipped and left running: " +
		"default/skipped-a (label nodemaint.dev/drain=skip), default/skipped-b (DrainRule keep-logs)"
	c := expectCondition(t, "skipped", nodemaintv1alpha1.ConditionDrained, metav1.ConditionTrue, nodemaintv1alpha1.ReasonDrained)
	if c.Message != want {
		t.Errorf("Drained message %q, want %q", c.Message, want)
	}
	eventually(t, "Drained Event naming the skipped pods", func(ctx context.Context) (bool, string, error) {
		var events eventsv1.EventList
		if err := k8s.List(ctx, &events); err != nil {
			return false, "", err
		}
		for _, e := range events.Items {
			if e.Reason == nodemaintv1alpha1.ReasonDrained && e.Regarding.Kind == "NodeMaintenance" && e.Regarding.Name == "skipped" {
				return e.Note == want, e.Note, nil
			}
		}
		return false, "no Drained Event", nil
	})
	expectStatus(t, "skipped", "skipped-node", testutil.StatusView{Phase: nodemaintv1alpha1.PhaseDrainComplete, Selected: 2, Drained: "True"})
	notEvicted(t, "skipped-a")
	notEvicted(t, "skipped-b")
}
