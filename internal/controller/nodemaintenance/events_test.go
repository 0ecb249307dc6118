package nodemaintenance

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// A maintenance that selects more nodes than the controller computes the preflight of is told
// why its status has none, and how to get one.
func TestPreflightNotComputedEvent(t *testing.T) {
	rec := events.NewFakeRecorder(1)
	nm := &nodemaintv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "all"}}
	sinkOf(rec).preflightNotComputed(nm, 1001)
	if e := <-rec.Events; !strings.Contains(e, "Warning PreflightNotComputed") || !strings.Contains(e, "selects 1001 nodes") ||
		!strings.Contains(e, "kubectl maintenance preflight") {
		t.Errorf("Event %q", e)
	}
}
