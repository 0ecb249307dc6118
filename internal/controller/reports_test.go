package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// TestStatusFromTheNodeControllersReports: a NodeMaintenance's status reports what the node
// controller decided about its node, without deciding the node's pods again: a pod's owner
// answering changes the node controller's report, which brings the status up to date, and no
// status write of this drain decides the node again once the node controller has looked.
func TestStatusFromTheNodeControllersReports(t *testing.T) {
	createNode(t, "reports-node", nil, false)
	createPod(t, "reports-a", "reports-node", ownedByReplicaSet)
	createPod(t, "reports-b", "reports-node", ownedByReplicaSet)
	createDrainNM(t, "reports", time.Hour, "reports-node")
	expectBlocked(t, "reports", "reports-node", "reports-a", nodemaintv1alpha1.BlockedReasonWaitingForOwner, "waiting up to 1h0m0s")

	// Once a status is made from the node controller's report, it has looked since the node was
	// last written (the drain's status is made again every few seconds).
	settled, _ := reportsRead(t)
	eventually(t, "a status made from the node controller's report", func(context.Context) (bool, string, error) {
		n, again := reportsRead(t)
		return n > settled, fmt.Sprintf("%v read from the node controller, %v decided again", n, again), nil
	})
	fromNode, again := reportsRead(t)
	setPodCondition(t, "reports-a", corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: "Surge", Message: "waiting for Deployment web to surge"})
	expectBlocked(t, "reports", "reports-node", "reports-a", nodemaintv1alpha1.BlockedReasonEvacuatingByOwner, "waiting for Deployment web to surge")
	fromNodeAfter, againAfter := reportsRead(t)
	if fromNodeAfter <= fromNode {
		t.Errorf("the node controller's report was read %v times before the answer and %v after: the status did not come from it", fromNode, fromNodeAfter)
	}
	if againAfter != again {
		t.Errorf("the node was decided again %v times for the status after its owner answered, want 0", againAfter-again)
	}
}

// reportsRead returns how many node reports the statuses read from the node controller, and how
// many nodes they decided again (nodemaint_status_node_reports_total).
func reportsRead(t *testing.T) (fromNode, again float64) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "nodemaint_status_node_reports_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() == "source" && l.GetValue() == "node-controller":
					fromNode = m.GetCounter().GetValue()
				case l.GetName() == "source" && l.GetValue() == "decided-again":
					again = m.GetCounter().GetValue()
				}
			}
		}
	}
	return fromNode, again
}
