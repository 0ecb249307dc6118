package nodemaintenancedecide

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
)

// The node controller's reports are shared by every reconcile that reads them: the status cuts a
// message too long for the CRD in its own copy and leaves the report as it was.
func TestDecideLeavesTheReportsAsTheyWere(t *testing.T) {
	long := strings.Repeat("x", nodemaintv1alpha1.MaxBlockedMessageLength+10)
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	rep := nodedecide.Report{Pending: 1, Left: []string{"default/p"},
		Blocked: []nodemaintv1alpha1.BlockedPods{{Reason: nodemaintv1alpha1.BlockedReasonEvictionFailed, Message: long, Pods: []string{"default/p"}, Count: 1}}}
	d := Decide(Observation{Maintenance: nm, Nodes: []*corev1.Node{node}, Reports: []nodedecide.Report{rep}}, "", time.Now())

	if got := rep.Blocked[0].Message; got != long {
		t.Errorf("the report's message changed to %d characters, want %d", len(got), len(long))
	}
	b := d.Status.Nodes["n1"].Blocked
	if len(b) != 1 {
		t.Fatalf("status blocked %+v, want one entry", b)
	}
	if len(b[0].Message) > nodemaintv1alpha1.MaxBlockedMessageLength {
		t.Errorf("the status's message has %d characters, over %d", len(b[0].Message), nodemaintv1alpha1.MaxBlockedMessageLength)
	}
	b[0].Pods[0] = "changed"
	if rep.Blocked[0].Pods[0] != "default/p" {
		t.Errorf("the status shares the report's pod names: %v", rep.Blocked[0].Pods)
	}
}
