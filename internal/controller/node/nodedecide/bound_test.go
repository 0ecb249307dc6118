package nodedecide

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/drain"
	"github.com/nodemaint/nodemaint/internal/maintenance"
)

// longName is a NodeMaintenance name of the longest (253 characters), distinct by i.
func longName(i int) string {
	name := fmt.Sprintf("m%04d-", i) + strings.Repeat("a", 253)
	return name[:validation.DNS1123SubdomainMaxLength]
}

// overlapping are n maintenances of the longest names that cordon and drain the node, the i-th
// created i seconds after base.
func overlapping(n int, base time.Time) []*nodemaintv1alpha1.NodeMaintenance {
	var nms []*nodemaintv1alpha1.NodeMaintenance
	for i := range n {
		nms = append(nms, &nodemaintv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: longName(i), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)), Generation: 1,
				CreationTimestamp: metav1.NewTime(base.Add(time.Duration(i) * time.Second))},
			Spec: nodemaintv1alpha1.NodeMaintenanceSpec{Cordon: true, Drain: true, Reason: "kernel upgrade",
				EvictionPolicy: nodemaintv1alpha1.EvictionPolicySignalOnly},
			Status: nodemaintv1alpha1.NodeMaintenanceStatus{Phase: nodemaintv1alpha1.PhaseDrain,
				DrainStartTime: &metav1.Time{Time: base}},
		})
	}
	return nms
}

// annotationBytes is what the API server counts against its limit on a node's annotations.
func annotationBytes(a map[string]string) int {
	n := 0
	for k, v := range a {
		n += len(k) + len(v)
	}
	return n
}

// observeBounded observes the node with the maintenances admitted as the controller's observer
// admits them, and one pod classified Drain.
func observeBounded(node *corev1.Node, pods []*corev1.Pod, nms []*nodemaintv1alpha1.NodeMaintenance) Observation {
	obs := Observation{Node: node, Pods: pods}
	obs.Admit(nms)
	var cs []drain.Classified
	for i := range obs.Pods {
		cs = append(cs, drain.Classified{Pod: obs.Pods[i], Class: drain.Class{Behavior: nodemaintv1alpha1.DrainBehaviorDrain}})
	}
	obs.Plan = drain.NewPlan(cs)
	obs.Derive()
	return obs
}

// patchedAnnotations are the node's annotations once the API server applied the JSON merge
// patch the node reconciler sends (client.MergeFrom) to the observed node.
func patchedAnnotations(t *testing.T, observed, want *corev1.Node) (map[string]string, int) {
	t.Helper()
	data, err := client.MergeFrom(observed).Data(want)
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range observed.Annotations {
		out[k] = v
	}
	for k, v := range patch.Metadata.Annotations {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out, len(data)
}

// TestThousandOverlappingMaintenances: 1,000 maintenances with names of the longest select one
// node and drain it. Named all in the node's annotations, they pass the API server's 256 KiB
// limit on a node's annotations, and the patch that cordons the node would be refused: the node
// could never be cordoned nor restored. Bounded, the node is cordoned by a valid patch naming
// the 64 oldest; the others wait, counted in the node's condition, and are told why (Beyond).
func TestThousandOverlappingMaintenances(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	nms := overlapping(1000, now.Add(-time.Hour))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		"node.alpha.kubernetes.io/ttl":                           "0",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
	}}}
	pods := []*corev1.Pod{replicaPod("web-1", time.Time{}, nil)}

	// Unbounded, as before: every maintenance in both annotations.
	var all []maintenance.NodeEntry
	starts := map[string]maintenance.DrainStart{}
	for _, nm := range nms {
		all = append(all, maintenance.NodeEntry{Name: nm.Name, Phase: nodemaintv1alpha1.PhaseDrain})
		starts[nm.Name] = maintenance.DrainStart{Start: now, Generation: nm.Generation, UID: nm.UID}
	}
	unbounded := len(nodemaintv1alpha1.MaintenancesAnnotation) + len(maintenance.FormatEntries(all)) +
		len(nodemaintv1alpha1.DrainStartedAnnotation) + len(maintenance.FormatDrainStarts(starts))
	t.Logf("unbounded: nodemaint's annotations for 1,000 maintenances take %d bytes (limit %d)", unbounded, apivalidation.TotalAnnotationSizeLimitB)
	if unbounded <= apivalidation.TotalAnnotationSizeLimitB {
		t.Fatalf("the test is not at the size that breaks the unbounded annotations: %d bytes", unbounded)
	}

	obs := observeBounded(node, pods, nms)
	d := Decide(obs, now)
	if !d.NodeChanged {
		t.Errorf("the node is not changed; want it cordoned")
	}
	if !d.Node.Spec.Unschedulable {
		t.Errorf("the node is schedulable; want it cordoned")
	}
	if !d.Intent.Drain {
		t.Errorf("the intent does not drain; want it to")
	}
	if len(d.Request) != 1 {
		t.Errorf("%d evacuation requests; want 1", len(d.Request))
	}
	if t.Failed() {
		t.FailNow()
	}
	annotations, patchBytes := patchedAnnotations(t, node, d.Node)
	if errs := apivalidation.ValidateAnnotations(annotations, field.NewPath("metadata", "annotations")); len(errs) > 0 {
		t.Fatalf("the node patch is invalid: %v", errs.ToAggregate())
	}
	size := annotationBytes(annotations)
	t.Logf("bounded: the node's annotations take %d bytes (maintenances %d, drain-started %d), the cordon patch %d bytes",
		size, len(annotations[nodemaintv1alpha1.MaintenancesAnnotation]), len(annotations[nodemaintv1alpha1.DrainStartedAnnotation]), patchBytes)
	if size > 48<<10 {
		t.Errorf("the node's annotations take %d bytes, over the 48 KiB the bound promises", size)
	}
	entries := maintenance.ParseEntries(annotations[nodemaintv1alpha1.MaintenancesAnnotation])
	recordedStarts := maintenance.ParseDrainStarts(annotations[nodemaintv1alpha1.DrainStartedAnnotation])
	if len(entries) != maintenance.MaxMaintenancesPerNode {
		t.Errorf("%d entries; want %d", len(entries), maintenance.MaxMaintenancesPerNode)
	}
	if len(recordedStarts) != maintenance.MaxMaintenancesPerNode {
		t.Errorf("%d drain starts; want %d", len(recordedStarts), maintenance.MaxMaintenancesPerNode)
	}
	if len(d.Intent.Beyond) != 1000-maintenance.MaxMaintenancesPerNode {
		t.Errorf("%d beyond; want %d", len(d.Intent.Beyond), 1000-maintenance.MaxMaintenancesPerNode)
	}
	if t.Failed() {
		t.FailNow()
	}
	for i, e := range entries {
		if e.Name != longName(i) {
			t.Fatalf("entry %d is %s, want the %d-th oldest", i, e.Name[:5], i)
		}
	}
	if d.Intent.Beyond[0] != longName(maintenance.MaxMaintenancesPerNode) {
		t.Errorf("the first to wait is %s, want the oldest not acting", d.Intent.Beyond[0][:5])
	}
	for _, c := range d.Node.Status.Conditions {
		if len(c.Message) > 2048 {
			t.Errorf("condition %s: message of %d bytes", c.Type, len(c.Message))
		}
		if c.Type == nodemaintv1alpha1.NodeConditionUnderMaintenance && !strings.Contains(c.Message, "and 59 more; at the limit: at most 64 NodeMaintenances act on a node at once, others wait for a place") {
			t.Errorf("UnderMaintenance says %q", c.Message)
		}
	}

	// Applied, the decision stands. A maintenance older than all that comes to select the node
	// waits: it does not displace one acting.
	next := apply(obs, d, now)
	older := overlapping(1, now.Add(-2*time.Hour))[0]
	older.Name = "older"
	d2 := Decide(observeBounded(next.Node, next.Pods, append(nms, older)), now)
	if d2.NodeChanged {
		t.Errorf("with an older maintenance, the node changed; want it as it is")
	}
	if d2.Intent.Beyond[0] != "older" {
		t.Errorf("first waiting %s; want the older maintenance", d2.Intent.Beyond[0][:5])
	}
	if len(d2.Intent.Entries) != maintenance.MaxMaintenancesPerNode {
		t.Errorf("with an older maintenance, %d entries; want %d", len(d2.Intent.Entries), maintenance.MaxMaintenancesPerNode)
	}
	if t.Failed() {
		t.FailNow()
	}

	// One acting maintenance ends: the first waiting takes its place, in the same bounds.
	ended := nms[3].DeepCopy()
	ended.Spec.Cordon, ended.Spec.Drain = false, false
	withEnded := append([]*nodemaintv1alpha1.NodeMaintenance{}, nms...)
	withEnded[3] = ended
	d3 := Decide(observeBounded(next.Node, next.Pods, append(withEnded, older)), now)
	entries = maintenance.NodeEntries(d3.Node)
	has := map[string]bool{}
	for _, e := range entries {
		has[e.Name] = true
	}
	if len(entries) != maintenance.MaxMaintenancesPerNode {
		t.Errorf("after one ended, %d entries; want %d", len(entries), maintenance.MaxMaintenancesPerNode)
	}
	if has[ended.Name] {
		t.Errorf("the ended maintenance is still an entry; want it replaced")
	}
	if !has["older"] {
		t.Errorf("the first waiting (older) is not an entry; want it in the ended one's place")
	}
	if !d3.Node.Spec.Unschedulable {
		t.Errorf("after one ended, the node is schedulable; want it still cordoned")
	}
	if t.Failed() {
		t.FailNow()
	}
	if size := annotationBytes(d3.Node.Annotations); size > 48<<10 {
		t.Errorf("%d bytes", size)
	}
}
