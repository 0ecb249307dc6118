package nodedecide

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// TestDeleteNeedsThePermission: past its drainTimeout, a maintenance with drainTimeoutAction
// Delete deletes its pods only when the controller may delete pods; without the permission (the
// default install) it deletes nothing, evicts the pods as Report does and looks again no sooner
// for the deletions it cannot make.
func TestDeleteNeedsThePermission(t *testing.T) {
	nm := deleting("kernel")
	node := cordonedNode(map[string]maintenance.DrainStart{"kernel": {Start: t0.Add(-time.Hour), Generation: nm.Generation, UID: nm.UID}})
	node.Annotations["nodemaint.dev/maintenances"] = "kernel=Drain"
	pods := []*corev1.Pod{replicaPod("web-1", t0.Add(-10*time.Minute), nil)}

	obs := observeClassed(node, pods, false, nil, nm)
	d := Decide(obs, t0)
	if got := names(d.Delete); got != "web-1" {
		t.Fatalf("allowed: deleted %q; want web-1 deleted", got)
	}
	if len(d.Evict) != 0 {
		t.Fatalf("allowed: evicted %q; want none evicted", names(d.Evict))
	}

	obs = observeClassed(node, pods, false, nil, nm)
	obs.PodDeletionDenied = true
	d = Decide(obs, t0)
	if len(d.Delete) != 0 {
		t.Fatalf("denied: deleted %q; want nothing deleted", names(d.Delete))
	}
	if names(d.Evict) != "web-1" {
		t.Fatalf("denied: evicted %q; want web-1 evicted through its budget, as with Report", names(d.Evict))
	}
}
