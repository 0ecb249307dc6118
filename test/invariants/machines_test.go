package invariants

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// The Machine checks are fed what the informers (of the Machines' cluster and of the nodes') and
// the audit log would deliver: each test plays a controller with a defect of issue 56's Cluster
// API promises as the API servers would have logged it, and the same sequence without the defect.

const (
	machineNS   = "capi"
	machineName = "md-0-abcde"
	// machineNM is the Machine's NodeMaintenance.
	machineNM = "machine-md-0-abcde-0123456789"
)

var machineKey = machineNS + "/" + machineName

// capiState is an act state with the Machine checks, node-1 (providerID kwok://node-1, created an
// hour ago) as the watch first saw it.
func capiState() *state {
	s := actState()
	s.capi = newCAPI()
	n := newNode(node1, false)
	n.Spec.ProviderID = "kwok://" + node1
	n.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	s.node(n, false)
	s.capiNode(n, false, now.Add(-time.Hour))
	return s
}

// machineJSON is a Machine being deleted, with nodemaint's hook, of the providerID and node.
func machineJSON(providerID, node string, hooked bool) []byte {
	annotations := map[string]string{}
	if hooked {
		annotations[nodemaintv1alpha1.ClusterAPIPreDrainHook] = "nodemaint"
	}
	b, err := json.Marshal(map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
		"metadata": map[string]any{"namespace": machineNS, "name": machineName, "uid": "uid-machine",
			"annotations": annotations, "deletionTimestamp": now.Add(-time.Minute).Format(time.RFC3339), "finalizers": []string{"machine.cluster.x-k8s.io"}},
		"spec":   map[string]any{"clusterName": "wl", "providerID": providerID},
		"status": map[string]any{"nodeRef": map[string]any{"name": node}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// machineMaintenance is the NodeMaintenance of the Machine (its annotation) of the node.
func machineMaintenanceOf(node string) *nodemaintv1alpha1.NodeMaintenance {
	nm := newNM(machineNM, func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.NodeSelector = corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
	})
	nm.UID = "uid-nm"
	nm.Annotations = map[string]string{nodemaintv1alpha1.MachineAnnotation: machineKey}
	nm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID("uid-" + node)}}
	return nm
}

// releaseEv is the Machine controller's release of the hook as it writes it: a merge patch with
// the resourceVersion as a precondition (client.MergeFromWithOptimisticLock), by user.
func releaseEv(user string, at time.Time) *auditEvent {
	e := ev("patch", "machines", "", machineNS, machineName, user, at,
		map[string]any{"metadata": map[string]any{"annotations": map[string]any{nodemaintv1alpha1.ClusterAPIPreDrainHook: nil}, "resourceVersion": "42"}})
	e.ObjectRef.APIGroup = "cluster.x-k8s.io"
	return e
}

// judged feeds the entries, judges them all and returns the kinds and objects of the violations.
func judged(s *state, entries ...*auditEvent) []string {
	for _, e := range entries {
		s.auditEvent(e)
	}
	s.judgeAudit(now.Add(24 * time.Hour))
	var out []string
	for _, v := range s.violations {
		out = append(out, v.Kind+" "+v.Object)
	}
	return out
}

// Issue 56: nodemaint releases its pre-drain hook only once the Machine's own node is drained of
// the pods its drain waits for, or that node does not exist. The defect: a controller that
// releases the hook early (at once, or as soon as its NodeMaintenance exists), and Cluster API
// deletes a node whose pods were never moved.
func TestMachineHookReleasedEarly(t *testing.T) {
	release := now.Add(10 * time.Second)
	hookViolation := []string{KindMachineHook + " Machine/" + machineKey}
	pod := func(mutate func(*corev1.Pod)) func(*state) {
		return func(s *state) {
			p := nodePod("web", nil)
			if mutate != nil {
				mutate(p)
			}
			s.pod(p, false, now.Add(-time.Hour))
		}
	}
	for _, tc := range []struct {
		name string
		// machine is the Machine's providerID and node; hooked unless unhooked.
		providerID, node string
		unhooked         bool
		setup            []func(*state)
		entries          []*auditEvent
		want             []string
	}{
		{name: "released while a pod is on the Machine's node", setup: []func(*state){pod(nil)},
			entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}, want: hookViolation},
		{name: "released by a JSON patch while a pod is on the node", setup: []func(*state){pod(nil)},
			entries: []*auditEvent{func() *auditEvent {
				e := releaseEv(DefaultControllerUser, release)
				e.RequestObject = json.RawMessage(`[{"op":"test","path":"/metadata/resourceVersion","value":"42"},{"op":"remove","path":"/metadata/annotations/pre-drain.delete.hook.machine.cluster.x-k8s.io~1nodemaint"}]`)
				return e
			}()}, want: hookViolation},
		{name: "released while a pod waits to complete (wait-completed)",
			setup: []func(*state){pod(func(p *corev1.Pod) {
				p.Labels = map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelWaitCompleted}
			})},
			entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}, want: hookViolation},
		{name: "released while a pod terminates",
			setup:   []func(*state){pod(func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) })},
			entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}, want: hookViolation},
		{name: "released 3s before the pod went", setup: []func(*state){pod(nil), func(s *state) {
			s.pod(nodePod("web", nil), true, release.Add(3*time.Second))
		}}, entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}, want: hookViolation},
		{name: "released once the pod went", setup: []func(*state){pod(nil), func(s *state) {
			s.pod(nodePod("web", nil), true, release.Add(-time.Second))
		}}, entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "released with no pod on the node", entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "a pod bound to the node after the release", setup: []func(*state){pod(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(release.Add(time.Second))})
		})}, entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "the node is not the Machine's", providerID: "kwok://elsewhere", setup: []func(*state){pod(nil)},
			entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "the Machine's node does not exist", node: "node-9", setup: []func(*state){pod(nil)},
			entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "the Machine has no node", node: "-", setup: []func(*state){pod(nil)},
			entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "the node went before the release", setup: []func(*state){pod(nil), func(s *state) {
			n := newNode(node1, false)
			s.capiNode(n, true, release.Add(-time.Second))
		}}, entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "the Machine's NodeMaintenance timed out", setup: []func(*state){pod(nil), func(s *state) {
			nm := machineMaintenanceOf(node1)
			nm.Status.Conditions = []metav1.Condition{{Type: nodemaintv1alpha1.ConditionDrainTimedOut, Status: metav1.ConditionTrue, Reason: "DrainTimedOut"}}
			s.machineMaintenance(nm, false, release.Add(-time.Second))
		}}, entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "the Machine's NodeMaintenance was deleted", setup: []func(*state){pod(nil), func(s *state) {
			nm := machineMaintenanceOf(node1)
			nm.DeletionTimestamp = ptr.To(metav1.NewTime(release))
			s.machineMaintenance(nm, false, release.Add(-time.Second))
		}}, entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "the Machine's NodeMaintenance not drained yet", setup: []func(*state){pod(nil), func(s *state) {
			s.machineMaintenance(machineMaintenanceOf(node1), false, release.Add(-5*time.Second))
		}}, entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}, want: hookViolation},
		{name: "pods the drain skips", setup: []func(*state){
			pod(func(p *corev1.Pod) {
				p.Labels = map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip}
			}),
			func(s *state) {
				ds := nodePod("ds", nil)
				ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
				s.pod(ds, false, now)
				tolerant := nodePod("tolerant", nil)
				tolerant.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}}
				s.pod(tolerant, false, now)
				done := nodePod("done", nil)
				done.Status.Phase = corev1.PodSucceeded
				s.pod(done, false, now)
				ruled := nodePod("ruled", map[string]string{"rule": "skip"})
				s.drainRule(&nodemaintv1alpha1.DrainRule{ObjectMeta: metav1.ObjectMeta{Name: "skip"}, Spec: nodemaintv1alpha1.DrainRuleSpec{
					Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorSkip},
					Pods:  []nodemaintv1alpha1.DrainRulePodSelector{{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"rule": "skip"}}}},
				}}, false)
				s.pod(ruled, false, now)
			}},
			entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "released by an admin (kubectl maintenance cleanup)", setup: []func(*state){pod(nil)},
			entries: []*auditEvent{releaseEv(admin, release)}},
		{name: "a Machine nodemaint never hooked", unhooked: true, setup: []func(*state){pod(nil)},
			entries: []*auditEvent{releaseEv(DefaultControllerUser, release)}},
		{name: "a write that keeps the hook", setup: []func(*state){pod(nil)},
			entries: []*auditEvent{func() *auditEvent {
				e := releaseEv(DefaultControllerUser, release)
				e.RequestObject = json.RawMessage(`{"metadata":{"labels":{"a":"b"}}}`)
				return e
			}()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := capiState()
			providerID, node := "kwok://"+node1, node1
			if tc.providerID != "" {
				providerID = tc.providerID
			}
			switch tc.node {
			case "":
			case "-":
				node = ""
			default:
				node = tc.node
			}
			s.machine(machineJSON(providerID, node, !tc.unhooked), false, now.Add(-time.Minute))
			for _, f := range tc.setup {
				f(s)
			}
			// Cluster API lets the Machine go once the hook is released: judged all the same.
			s.machine(machineJSON(providerID, node, false), true, release.Add(time.Second))
			expect(t, judged(s, tc.entries...), tc.want...)
			if tc.want != nil && s.capi.releases != 1 {
				t.Errorf("%d releases judged, want 1", s.capi.releases)
			}
		})
	}
}

// Issue 56: a tenant's Machine that names a node of another providerID (any node of the cluster)
// gets nothing cordoned. The defect: a controller that takes status.nodeRef for the Machine's node
// and creates its NodeMaintenance there.
func TestMachineNodeNotOwned(t *testing.T) {
	nodeViolation := []string{KindMachineNode + " Machine/" + machineKey}
	for _, tc := range []struct {
		name       string
		providerID string
		// machineLate: the Machine is seen after its NodeMaintenance; noMachine: never.
		machineLate, noMachine bool
		nm                     *nodemaintv1alpha1.NodeMaintenance
		want                   []string
	}{
		{name: "a NodeMaintenance of the Machine on another providerID's node", providerID: "kwok://elsewhere",
			nm: machineMaintenanceOf(node1), want: nodeViolation},
		{name: "the Machine has no providerID", providerID: "", nm: machineMaintenanceOf(node1), want: nodeViolation},
		{name: "the Machine seen after its NodeMaintenance", providerID: "kwok://elsewhere", machineLate: true,
			nm: machineMaintenanceOf(node1), want: nodeViolation},
		{name: "the Machine's own node", providerID: "kwok://" + node1, nm: machineMaintenanceOf(node1)},
		{name: "a node that does not exist", providerID: "kwok://elsewhere", nm: machineMaintenanceOf("node-9")},
		{name: "a NodeMaintenance of nobody's", providerID: "kwok://elsewhere", nm: newNM("plain", nil)},
		{name: "a Machine the checker never saw", noMachine: true, nm: machineMaintenanceOf(node1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := capiState()
			if !tc.machineLate && !tc.noMachine {
				s.machine(machineJSON(tc.providerID, node1, true), false, now)
			}
			s.nodeMaintenance(tc.nm, false, now)
			s.machineMaintenance(tc.nm, false, now)
			// The controller cordons the node for it.
			entries := []*auditEvent{cordonEv(DefaultControllerUser, now.Add(time.Second), true)}
			if tc.machineLate {
				s.machine(machineJSON(tc.providerID, node1, true), false, now.Add(5*time.Second))
				for _, e := range entries {
					s.auditEvent(e)
				}
				entries = nil
				s.judgeAudit(now.Add(10 * time.Second))
			}
			expect(t, judged(s, entries...), tc.want...)
		})
	}
}

// Issue 56 and promise 7: nothing of nodemaint's is left for a Machine once it is gone. The
// defect: a controller that forgets the NodeMaintenance of a Machine deleted (the node stays).
func TestMachineLeftovers(t *testing.T) {
	node := *newNode(node1, false)
	for _, tc := range []struct {
		name     string
		machines []string
		nodes    []corev1.Node
		deleting bool
		want     []string
	}{
		{name: "the Machine gone, its NodeMaintenance left", machines: []string{}, nodes: []corev1.Node{node},
			want: []string{"NodeMaintenance " + machineNM + ": of Machine " + machineKey + ", which is gone"}},
		{name: "the Machine there", machines: []string{machineKey}, nodes: []corev1.Node{node}},
		{name: "the Machine and its node gone: the garbage collector's", machines: []string{}},
		{name: "the Machines not read", nodes: []corev1.Node{node}},
		{name: "the NodeMaintenance being deleted", machines: []string{}, nodes: []corev1.Node{node}, deleting: true,
			want: []string{"NodeMaintenance " + machineNM + ": deleted at 2026-01-02T03:04:05Z, still there (finalizers [])"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := machineMaintenanceOf(node1)
			if tc.deleting {
				nm.DeletionTimestamp = ptr.To(metav1.NewTime(now))
			}
			got := Leftovers(Snapshot{Nodes: tc.nodes, NodeMaintenances: []nodemaintv1alpha1.NodeMaintenance{*nm}, Machines: tc.machines}, Baseline{})
			if !slices.Equal(got, tc.want) {
				t.Errorf("leftovers %q, want %q", got, tc.want)
			}
		})
	}
}

// The writes of Machines that release the hook, and those that do not.
func TestReleasesHookIn(t *testing.T) {
	hook := nodemaintv1alpha1.ClusterAPIPreDrainHook
	for _, tc := range []struct {
		verb, body string
		want       bool
	}{
		{"patch", `{"metadata":{"annotations":{"` + hook + `":null},"resourceVersion":"1"}}`, true},
		{"patch", `{"metadata":{"annotations":null,"resourceVersion":"388"}}`, true},
		{"patch", `{"metadata":{"annotations":{"` + hook + `":"nodemaint"}}}`, false},
		{"patch", `{"metadata":{"finalizers":null}}`, false},
		{"patch", `{"metadata":{"annotations":{"other":null}}}`, false},
		{"patch", `[{"op":"remove","path":"/metadata/annotations/pre-drain.delete.hook.machine.cluster.x-k8s.io~1nodemaint"}]`, true},
		{"patch", `[{"op":"remove","path":"/metadata/annotations/other"}]`, false},
		{"update", `{"kind":"Machine","metadata":{"annotations":{"other":"x"}}}`, true},
		{"update", `{"kind":"Machine","metadata":{"annotations":{"` + hook + `":"nodemaint"}}}`, false},
		{"patch", `{"kind":"Machine","apiVersion":"cluster.x-k8s.io/v1beta2","metadata":{"name":"m"}}`, true},
		{"patch", ``, false},
	} {
		if got := releasesHookIn(tc.verb, json.RawMessage(tc.body)); got != tc.want {
			t.Errorf("%s %s: releases %v, want %v", tc.verb, tc.body, got, tc.want)
		}
	}
}
