package invariants

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	ernames "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// The act checks are fed what the informers and the audit log would deliver: each test plays a
// defect of a controller as the API server would have logged it, and asserts the violation's
// kind; the same sequence without the defect gives none.

const (
	node1 = "node-1"
	// admin is a user other than the controller (an admin's kubectl, the ReplicaSet controller).
	admin = "kubernetes-admin"
)

func actState() *state {
	s := newState(nil)
	s.acts = newActs(DefaultControllerUser, time.Time{})
	return s
}

func newNode(name string, cordoned bool) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec:       corev1.NodeSpec{Unschedulable: cordoned},
	}
}

func nodePod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: labels,
			CreationTimestamp: metav1.Time{Time: now.Add(-time.Hour)}},
		Spec:   corev1.PodSpec{NodeName: node1},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func duration(s string) *nodemaintv1alpha1.Duration {
	var d nodemaintv1alpha1.Duration
	if err := json.Unmarshal([]byte(`"`+s+`"`), &d); err != nil {
		panic(err)
	}
	return &d
}

// newNM returns a maintenance that drains node-1: Evict, response timeout 3m, Report.
func newNM(name string, mutate func(*nodemaintv1alpha1.NodeMaintenanceSpec)) *nodemaintv1alpha1.NodeMaintenance {
	nm := &nodemaintv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: nodemaintv1alpha1.NodeMaintenanceSpec{
			NodeSelector: corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node1}}}}}},
			Cordon: true, Drain: true,
			EvacuationResponseTimeout: duration("3m"),
			EvictionPolicy:            nodemaintv1alpha1.EvictionPolicyEvict,
			DrainTimeoutAction:        nodemaintv1alpha1.DrainTimeoutActionReport,
			DrainLabelPolicy:          nodemaintv1alpha1.DrainLabelPolicyHonor,
		},
	}
	if mutate != nil {
		mutate(&nm.Spec)
	}
	return nm
}

// deleting is a maintenance with drainTimeoutAction Delete after 5m.
func deleting(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
	spec.DrainTimeout, spec.DrainTimeoutAction = duration("5m"), nodemaintv1alpha1.DrainTimeoutActionDelete
}

// shortResponse is a maintenance with drainTimeoutAction Delete after 10m and a response
// timeout of 1m.
func shortResponse(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
	spec.DrainTimeout, spec.DrainTimeoutAction = duration("10m"), nodemaintv1alpha1.DrainTimeoutActionDelete
	spec.EvacuationResponseTimeout = duration("1m")
}

// ev is an audit entry of a successful request received at, completed 5ms later.
func ev(verb, resource, sub, namespace, name, user string, at time.Time, body any) *auditEvent {
	e := &auditEvent{AuditID: fmt.Sprintf("%s-%s-%s-%d", verb, resource, name, at.UnixNano()), Stage: "ResponseComplete", Verb: verb}
	e.User.Username = user
	e.ObjectRef = &struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	}{Resource: resource, Namespace: namespace, Name: name, Subresource: sub}
	if resource == "evictionrequests" {
		e.ObjectRef.APIGroup = "lifecycle.k8s.io"
	}
	code := int32(200)
	if verb == "create" {
		code = 201
	}
	e.ResponseStatus = &struct {
		Code int32 `json:"code"`
	}{code}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		if raw, ok := body.([]byte); ok {
			b = raw
		}
		e.RequestObject = b
	}
	e.RequestReceivedTimestamp = metav1.NewMicroTime(at)
	e.StageTimestamp = metav1.NewMicroTime(at.Add(5 * time.Millisecond))
	return e
}

// code sets the entry's response code.
func code(e *auditEvent, c int32) *auditEvent {
	e.ResponseStatus.Code = c
	return e
}

func cordonEv(user string, at time.Time, cordoned bool) *auditEvent {
	return ev("patch", "nodes", "", "", node1, user, at, map[string]any{"spec": map[string]any{"unschedulable": cordoned}})
}

// askEv is nodemaint's request as node_controller.go writes it (evacuation.ConditionPatch).
func askEv(pod string, at time.Time) *auditEvent {
	observed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod, UID: types.UID("uid-" + pod), ResourceVersion: "7"}}
	patch := evacuation.ConditionPatch(observed, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
		Reason: evacuation.ReasonNodeMaintenance, Message: "kernel", LastTransitionTime: metav1.NewTime(at)})
	body, err := patch.Data(nil)
	if err != nil {
		panic(err)
	}
	return ev("patch", "pods", "status", ns, pod, DefaultControllerUser, at, body)
}

// requestEv is an EvictionRequest created for the pod by user with requester.
func requestEv(pod, requester, user string, at time.Time) *auditEvent {
	er := lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "er-" + pod},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod, UID: types.UID("uid-" + pod)}},
			Requester: requester, Intent: lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
	return ev("create", "evictionrequests", "", ns, er.Name, user, at, er)
}

func evictEv(pod string, at time.Time) *auditEvent {
	return ev("create", "pods", "eviction", ns, pod, DefaultControllerUser, at, nil)
}

func deleteEv(pod, user string, at time.Time) *auditEvent {
	return ev("delete", "pods", "", ns, pod, user, at, nil)
}

// play feeds the entries and judges them all; it returns the kinds of the violations.
func play(s *state, entries ...*auditEvent) []string {
	for _, e := range entries {
		s.auditEvent(e)
	}
	s.judgeAudit(now.Add(24 * time.Hour))
	var out []string
	for _, v := range s.violations {
		out = append(out, v.Kind+" "+v.Act+" "+v.Pod)
	}
	return out
}

// setup: node-1 uncordoned as the watch first saw it, the pods on it, the maintenances seen at
// now (the versions the acts are judged against).
func setup(pods []*corev1.Pod, nms ...*nodemaintv1alpha1.NodeMaintenance) *state {
	s := actState()
	s.node(newNode(node1, false), false)
	for _, p := range pods {
		s.pod(p, false, now)
	}
	for _, nm := range nms {
		s.nodeMaintenance(nm, false, now)
	}
	return s
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("violations %q, want %q", got, want)
	}
}

// Promise 2: SignalOnly never evicts, in either protocol; Evict does, after the response timeout.
func TestActSignalOnly(t *testing.T) {
	pod := nodePod("bare", nil)
	for _, tc := range []struct {
		name   string
		policy nodemaintv1alpha1.EvictionPolicy
		ask    *auditEvent
		want   []string
	}{
		{"pod conditions, SignalOnly", nodemaintv1alpha1.EvictionPolicySignalOnly, askEv("bare", now.Add(time.Second)),
			[]string{KindSignalOnly + " evict app/bare"}},
		// The EvictionRequest itself asks for an eviction, which any Eviction controller but
		// nodemaint's own carries out (issue 56).
		{"EvictionRequest, SignalOnly", nodemaintv1alpha1.EvictionPolicySignalOnly,
			requestEv("bare", ernames.Requester, DefaultControllerUser, now.Add(time.Second)),
			[]string{KindSignalOnly + " ask app/bare", KindSignalOnly + " evict app/bare"}},
		{"pod conditions, Evict", nodemaintv1alpha1.EvictionPolicyEvict, askEv("bare", now.Add(time.Second)), nil},
		{"EvictionRequest, Evict", nodemaintv1alpha1.EvictionPolicyEvict,
			requestEv("bare", ernames.Requester, DefaultControllerUser, now.Add(time.Second)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup([]*corev1.Pod{pod}, newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) { spec.EvictionPolicy = tc.policy }))
			// The defect of issue 29: evicted seconds after the request.
			expect(t, play(s, cordonEv(DefaultControllerUser, now, true), tc.ask, evictEv("bare", now.Add(3*time.Second))), tc.want...)
		})
	}
}

// Promise 2: a spec nodemaint cannot use (SpecValid False, or spec.Problems()) evicts nothing.
func TestActUnusableSpec(t *testing.T) {
	pod := nodePod("bare", nil)
	for _, tc := range []struct {
		name string
		nm   *nodemaintv1alpha1.NodeMaintenance
		want []string
	}{
		{"SpecValid False", func() *nodemaintv1alpha1.NodeMaintenance {
			nm := newNM("nm", nil)
			nm.Status.Conditions = []metav1.Condition{{Type: nodemaintv1alpha1.ConditionSpecValid, Status: metav1.ConditionFalse,
				Reason: nodemaintv1alpha1.ReasonInvalidSpec, ObservedGeneration: 1}}
			return nm
		}(), []string{KindSignalOnly + " evict app/bare"}},
		{"a response timeout that does not parse", newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
			spec.EvacuationResponseTimeout = duration("3 days")
		}), []string{KindSignalOnly + " evict app/bare"}},
		{"SpecValid False of an older generation", func() *nodemaintv1alpha1.NodeMaintenance {
			nm := newNM("nm", nil)
			nm.Generation = 2
			nm.Status.Conditions = []metav1.Condition{{Type: nodemaintv1alpha1.ConditionSpecValid, Status: metav1.ConditionFalse,
				Reason: nodemaintv1alpha1.ReasonInvalidSpec, ObservedGeneration: 1}}
			return nm
		}(), nil},
		{"usable", newNM("nm", nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup([]*corev1.Pod{pod}, tc.nm)
			expect(t, play(s, cordonEv(DefaultControllerUser, now, true), askEv("bare", now.Add(time.Second)),
				evictEv("bare", now.Add(4*time.Minute))), tc.want...)
		})
	}
}

// Promise 4: a deletion needs drainTimeoutAction Delete, the node's drainTimeout since its drain
// started, and the pod's response timeout since it was asked. The defect of issue 29: a
// rollout that cordoned first (drain false) for longer than drainTimeout deletes 30s after drain
// true.
func TestActDeletionNotDue(t *testing.T) {
	web := nodePod("web", nil)
	late := nodePod("late", nil)
	cordonFirst := func(s *state) []*auditEvent {
		// Cordoned at now with drain false; drain true 6m later, when the pods are first asked.
		s.nodeMaintenance(newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) { deleting(spec); spec.Drain = false }), false, now)
		s.nodeMaintenance(newNM("nm", deleting), false, now.Add(6*time.Minute))
		return []*auditEvent{cordonEv(DefaultControllerUser, now, true),
			askEv("web", now.Add(6*time.Minute)), askEv("late", now.Add(6*time.Minute))}
	}
	for _, tc := range []struct {
		name  string
		nm    *nodemaintv1alpha1.NodeMaintenance
		setup func(*state) []*auditEvent
		acts  []*auditEvent
		want  []string
	}{
		{name: "30s after drain true, cordoned first for 6m", setup: cordonFirst,
			acts: []*auditEvent{deleteEv("web", DefaultControllerUser, now.Add(6*time.Minute+30*time.Second))},
			want: []string{KindDeletionNotDue + " delete app/web"}},
		{name: "drainTimeout after drain true", setup: cordonFirst,
			acts: []*auditEvent{deleteEv("web", DefaultControllerUser, now.Add(11*time.Minute+time.Second))}},
		{name: "Report never deletes", nm: newNM("nm", nil),
			acts: []*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(time.Second)),
				deleteEv("web", DefaultControllerUser, now.Add(time.Hour))},
			want: []string{KindDeletionNotDue + " delete app/web"}},
		{name: "never asked", nm: newNM("nm", deleting),
			acts: []*auditEvent{cordonEv(DefaultControllerUser, now, true), deleteEv("web", DefaultControllerUser, now.Add(time.Hour))},
			want: []string{KindDeletionNotDue + " delete app/web"}},
		{
			// The node's drain started with web at 1s; late (a later order group) was asked at
			// 4m: at 5m2s the drainTimeout has run, but not late's response timeout; at 7m2s both.
			name: "the pod's response timeout counts from its own ask", nm: newNM("nm", deleting),
			acts: []*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(time.Second)),
				askEv("late", now.Add(4*time.Minute)),
				deleteEv("late", DefaultControllerUser, now.Add(5*time.Minute+2*time.Second))},
			want: []string{KindDeletionNotDue + " delete app/late"},
		},
		{
			name: "both timeouts run", nm: newNM("nm", deleting),
			acts: []*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(time.Second)),
				askEv("late", now.Add(4*time.Minute)),
				deleteEv("late", DefaultControllerUser, now.Add(7*time.Minute+2*time.Second))},
		},
		{
			// Response timeout 1m, drainTimeout 10m: asked 5m ago is not enough.
			name: "the response timeout ran, the drainTimeout did not", nm: newNM("nm", shortResponse),
			acts: []*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(time.Second)),
				deleteEv("web", DefaultControllerUser, now.Add(5*time.Minute))},
			want: []string{KindDeletionNotDue + " delete app/web"},
		},
		{
			// The drainTimeout counts from the node's drain start (web's ask), not late's.
			name: "the drainTimeout counts per node", nm: newNM("nm", shortResponse),
			acts: []*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(time.Second)),
				askEv("late", now.Add(9*time.Minute)),
				deleteEv("late", DefaultControllerUser, now.Add(10*time.Minute+2*time.Second))},
		},
		{
			// The ReplicaSet controller's deletion is nobody's concern here.
			name: "someone else's deletion", nm: newNM("nm", nil),
			acts: []*auditEvent{deleteEv("web", "system:serviceaccount:kube-system:replicaset-controller", now.Add(time.Second))},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nms []*nodemaintv1alpha1.NodeMaintenance
			if tc.nm != nil {
				nms = append(nms, tc.nm)
			}
			s := setup([]*corev1.Pod{web, late}, nms...)
			var entries []*auditEvent
			if tc.setup != nil {
				entries = tc.setup(s)
			}
			expect(t, play(s, append(entries, tc.acts...)...), tc.want...)
		})
	}
}

// Promise 1: nothing is asked, evicted or deleted before its node is cordoned. The audit log
// orders the cordon and the act to the microsecond.
func TestActNotCordoned(t *testing.T) {
	pod := nodePod("web", nil)
	for _, tc := range []struct {
		name    string
		initial bool
		entries []*auditEvent
		want    []string
	}{
		{"asked 2ms before the cordon completed", false,
			[]*auditEvent{askEv("web", now), cordonEv(DefaultControllerUser, now.Add(-3*time.Millisecond), true)},
			[]string{KindNotCordoned + " ask app/web"}},
		{"asked through an EvictionRequest before the cordon", false,
			[]*auditEvent{requestEv("web", ernames.Requester, DefaultControllerUser, now), cordonEv(DefaultControllerUser, now.Add(time.Second), true)},
			[]string{KindNotCordoned + " ask app/web"}},
		{"evicted on a node never cordoned", false,
			[]*auditEvent{evictEv("web", now.Add(4*time.Minute))},
			[]string{KindNotCordoned + " evict app/web"}},
		{"asked after the node was uncordoned", false,
			[]*auditEvent{cordonEv(admin, now, true), cordonEv(admin, now.Add(time.Second), false), askEv("web", now.Add(2*time.Second))},
			[]string{KindNotCordoned + " ask app/web"}},
		{"asked 1ms after the cordon completed", false,
			[]*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(6*time.Millisecond))}, nil},
		{"asked after a cordon whose response was a 504 (the write took effect; its client went away)", false,
			[]*auditEvent{code(cordonEv(DefaultControllerUser, now, true), 504), askEv("web", now.Add(time.Second))}, nil},
		{"asked after a cordon refused with a 409", false,
			[]*auditEvent{code(cordonEv(DefaultControllerUser, now, true), 409), askEv("web", now.Add(time.Second))},
			[]string{KindNotCordoned + " ask app/web"}},
		{"cordoned by an admin before the log began", true,
			[]*auditEvent{askEv("web", now), evictEv("web", now.Add(4*time.Minute))}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := actState()
			s.node(newNode(node1, tc.initial), false)
			s.pod(pod, false, now)
			s.nodeMaintenance(newNM("nm", nil), false, now)
			expect(t, play(s, tc.entries...), tc.want...)
		})
	}
}

// Promise 4: a pod every maintenance that may act on it skips is left alone. The defect of
// issue 29: an admin's Honor + Delete maintenance deletes a skip-labelled pod because another
// maintenance on the node says Ignore (and Report: it would evict, never delete).
func TestActSkippedPod(t *testing.T) {
	skip := map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip}
	ignore := func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.DrainLabelPolicy = nodemaintv1alpha1.DrainLabelPolicyIgnore
	}
	skipRule := &nodemaintv1alpha1.DrainRule{ObjectMeta: metav1.ObjectMeta{Name: "a-keep-db"}, Spec: nodemaintv1alpha1.DrainRuleSpec{
		Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorSkip},
		Pods:  []nodemaintv1alpha1.DrainRulePodSelector{{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	}}
	selectWeb := func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	signalOnly := func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	}
	late := now.Add(time.Hour)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		rules  []*nodemaintv1alpha1.DrainRule
		nms    []*nodemaintv1alpha1.NodeMaintenance
		act    *auditEvent
		want   []string
	}{
		{name: "skip label, Honor+Delete next to Ignore+Report, deleted", labels: skip,
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("admin", deleting), newNM("user", ignore)},
			act: deleteEv("pod", DefaultControllerUser, late), want: []string{KindSkippedPod + " delete app/pod"}},
		{name: "no label, Honor+Delete next to Ignore+Report, deleted",
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("admin", deleting), newNM("user", ignore)},
			act: deleteEv("pod", DefaultControllerUser, late)},
		{name: "skip label, Honor, evicted", labels: skip, nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", nil)},
			act: evictEv("pod", late), want: []string{KindSkippedPod + " ask app/pod", KindSkippedPod + " evict app/pod"}},
		{name: "skip label, Ignore, evicted", labels: skip, nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", ignore)},
			act: evictEv("pod", late)},
		// spec.podSelector: a maintenance's eviction never reaches a pod it does not select, even
		// when another maintenance draining the node selects it (and only asks: SignalOnly).
		{name: "podSelector not selecting the pod, evicted", labels: map[string]string{"app": "db"},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("web", selectWeb), newNM("all", signalOnly)},
			act: evictEv("pod", late), want: []string{KindSkippedPod + " evict app/pod"}},
		{name: "podSelector selecting the pod, evicted", labels: map[string]string{"app": "web"},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("web", selectWeb)},
			act: evictEv("pod", late)},
		{name: "podSelector not selecting the pod, Delete, deleted", labels: map[string]string{"app": "db"},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("web", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) { deleting(spec); selectWeb(spec) })},
			act: deleteEv("pod", DefaultControllerUser, late), want: []string{KindSkippedPod + " ask app/pod", KindSkippedPod + " delete app/pod"}},
		{name: "DrainRule Skip, evicted", labels: map[string]string{"app": "db"}, rules: []*nodemaintv1alpha1.DrainRule{skipRule},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", ignore)},
			act: evictEv("pod", late), want: []string{KindSkippedPod + " ask app/pod", KindSkippedPod + " evict app/pod"}},
		{name: "DrainRule Skip behind a Drain rule first by name, evicted", labels: map[string]string{"app": "db"},
			rules: []*nodemaintv1alpha1.DrainRule{skipRule, {ObjectMeta: metav1.ObjectMeta{Name: "0-drain-all"}, Spec: nodemaintv1alpha1.DrainRuleSpec{
				Drain: nodemaintv1alpha1.DrainRuleDrainConfig{Behavior: nodemaintv1alpha1.DrainBehaviorDrain},
				Pods:  []nodemaintv1alpha1.DrainRulePodSelector{{Selector: &metav1.LabelSelector{}}},
			}}},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", nil)},
			act: evictEv("pod", late)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup([]*corev1.Pod{nodePod("pod", tc.labels)}, tc.nms...)
			for _, r := range tc.rules {
				s.drainRule(r, false)
			}
			expect(t, play(s, cordonEv(DefaultControllerUser, now, true), askEv("pod", now.Add(time.Second)), tc.act), tc.want...)
		})
	}
}

// Promise 2 under any Eviction controller (issue 56): an EvictionRequest of nodemaint's asks for
// an eviction, which the in-tree Eviction controller (or any but nodemaint's own, which holds
// nodemaint's requests for the drain) carries out at once. So a pod no maintenance would evict is
// asked through its pod condition alone: the defect is an EvictionRequest for it.
func TestActEvictionRequestOfASignalOnlyPod(t *testing.T) {
	signalOnly := func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
	}
	selectWeb := func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	unusable := newNM("broken", nil)
	unusable.Status.Conditions = []metav1.Condition{{Type: nodemaintv1alpha1.ConditionSpecValid, Status: metav1.ConditionFalse,
		Reason: nodemaintv1alpha1.ReasonInvalidSpec, ObservedGeneration: 1}}
	request := requestEv("pod", ernames.Requester, DefaultControllerUser, now.Add(time.Second))
	for _, tc := range []struct {
		name   string
		labels map[string]string
		nms    []*nodemaintv1alpha1.NodeMaintenance
		ask    *auditEvent
		want   []string
	}{
		{name: "SignalOnly, EvictionRequest", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", signalOnly)},
			ask: request, want: []string{KindSignalOnly + " ask app/pod"}},
		{name: "SignalOnly, pod condition", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", signalOnly)},
			ask: askEv("pod", now.Add(time.Second))},
		{name: "unusable spec, EvictionRequest", nms: []*nodemaintv1alpha1.NodeMaintenance{unusable},
			ask: request, want: []string{KindSignalOnly + " ask app/pod"}},
		{name: "Evict, EvictionRequest", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", nil)}, ask: request},
		// Another maintenance evicts, but its podSelector leaves the pod alone: it would not evict it.
		{name: "SignalOnly beside an Evict that does not select the pod, EvictionRequest", labels: map[string]string{"app": "db"},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("all", signalOnly), newNM("web", selectWeb)},
			ask: request, want: []string{KindSignalOnly + " ask app/pod"}},
		{name: "SignalOnly beside an Evict that selects the pod, EvictionRequest", labels: map[string]string{"app": "web"},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("all", signalOnly), newNM("web", selectWeb)}, ask: request},
		// The policy switched to Evict as the controller asked: the version around the ask allows it.
		{name: "SignalOnly switched to Evict, EvictionRequest", ask: request},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup([]*corev1.Pod{nodePod("pod", tc.labels)}, tc.nms...)
			if tc.nms == nil {
				s.nodeMaintenance(newNM("nm", signalOnly), false, now.Add(-time.Hour))
				s.nodeMaintenance(newNM("nm", nil), false, now.Add(2*time.Second))
			}
			expect(t, play(s, cordonEv(DefaultControllerUser, now, true), tc.ask), tc.want...)
		})
	}
}

// Promise 4 for asks: a pod every maintenance selecting its node skips (spec.podSelector, the
// label policy, DrainRules) is never asked to move; one that any of them drains is, whether that
// one evicts or only signals, and a maintenance switching its drain on as the controller asks
// still counts.
func TestActAskOfASkippedPod(t *testing.T) {
	selectWeb := func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		nms    []*nodemaintv1alpha1.NodeMaintenance
		ask    *auditEvent
		want   []string
	}{
		{name: "podSelector not selecting the pod, pod condition", labels: map[string]string{"app": "db"},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("web", selectWeb)}, ask: askEv("pod", now.Add(time.Second)),
			want: []string{KindSkippedPod + " ask app/pod"}},
		{name: "podSelector not selecting the pod, EvictionRequest", labels: map[string]string{"app": "db"},
			nms:  []*nodemaintv1alpha1.NodeMaintenance{newNM("web", selectWeb)},
			ask:  requestEv("pod", ernames.Requester, DefaultControllerUser, now.Add(time.Second)),
			want: []string{KindSkippedPod + " ask app/pod"}},
		{name: "podSelector selecting the pod", labels: map[string]string{"app": "web"},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("web", selectWeb)}, ask: askEv("pod", now.Add(time.Second))},
		{name: "another maintenance, cordoning only so far, selects the pod", labels: map[string]string{"app": "db"},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("web", selectWeb), newNM("all", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) { spec.Drain = false })},
			ask: askEv("pod", now.Add(time.Second))},
		{name: "skip label under Honor", labels: map[string]string{nodemaintv1alpha1.DrainLabel: nodemaintv1alpha1.DrainLabelSkip},
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", nil)}, ask: askEv("pod", now.Add(time.Second)),
			want: []string{KindSkippedPod + " ask app/pod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup([]*corev1.Pod{nodePod("pod", tc.labels)}, tc.nms...)
			expect(t, play(s, cordonEv(DefaultControllerUser, now, true), tc.ask), tc.want...)
		})
	}
}

// evictWithGrace is nodemaint's eviction of the pod with a grace period (nil: none named).
func evictWithGrace(pod string, at time.Time, grace *int64) *auditEvent {
	return ev("create", "pods", "eviction", ns, pod, DefaultControllerUser, at, map[string]any{
		"kind": "Eviction", "apiVersion": "policy/v1", "metadata": map[string]any{"name": pod, "namespace": ns},
		"deleteOptions": map[string]any{"gracePeriodSeconds": grace, "preconditions": map[string]any{"uid": "uid-" + pod}},
	})
}

// Promises 4 and 5 for spec.evictionGracePeriodSeconds: an eviction carries a grace period no
// longer than the shortest of the maintenances it is for (each one's evictionGracePeriodSeconds,
// else the pod's own); a deletion no longer than the longest. The defect: a controller that
// ignores evictionGracePeriodSeconds, and evicts with the pod's own 30s.
func TestActGracePeriod(t *testing.T) {
	grace := func(g int64) func(*nodemaintv1alpha1.NodeMaintenanceSpec) {
		return func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) { spec.EvictionGracePeriodSeconds = ptr.To(g) }
	}
	late := now.Add(time.Hour)
	pod := nodePod("pod", nil)
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	for _, tc := range []struct {
		name string
		nms  []*nodemaintv1alpha1.NodeMaintenance
		act  *auditEvent
		want []string
	}{
		{name: "5s asked, evicted with the pod's own 30s", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", grace(5))},
			act: evictEv("pod", late), want: []string{KindGracePeriod + " evict app/pod"}},
		{name: "5s asked, evicted with 30s", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", grace(5))},
			act: evictWithGrace("pod", late, ptr.To[int64](30)), want: []string{KindGracePeriod + " evict app/pod"}},
		{name: "5s asked, evicted with 5s", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", grace(5))},
			act: evictWithGrace("pod", late, ptr.To[int64](5))},
		{name: "none asked, evicted with the pod's own", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", nil)},
			act: evictEv("pod", late)},
		{name: "60s asked (longer than the pod's own), evicted with 60s", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", grace(60))},
			act: evictWithGrace("pod", late, ptr.To[int64](60))},
		{name: "5s and 10s asked, evicted with 10s", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("a", grace(5)), newNM("b", grace(10))},
			act: evictWithGrace("pod", late, ptr.To[int64](10)), want: []string{KindGracePeriod + " evict app/pod"}},
		{name: "5s asked by a SignalOnly maintenance the eviction is not for, evicted with 10s",
			nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("a", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
				grace(5)(spec)
				spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
			}), newNM("b", grace(10))},
			act: evictWithGrace("pod", late, ptr.To[int64](10))},
		// A rollout's turn on the node is not the checker's to tell: left out.
		{name: "5s asked by a rollout, evicted with 30s", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("a", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
			grace(5)(spec)
			spec.Rollout = &nodemaintv1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		}), newNM("b", nil)},
			act: evictWithGrace("pod", late, ptr.To[int64](30))},
		{name: "Delete with 5s, deleted with the pod's own 30s", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
			deleting(spec)
			grace(5)(spec)
		})}, act: deleteEv("pod", DefaultControllerUser, late), want: []string{KindGracePeriod + " delete app/pod"}},
		{name: "Delete with 5s, deleted with 5s", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
			deleting(spec)
			grace(5)(spec)
		})}, act: ev("delete", "pods", "", ns, "pod", DefaultControllerUser, late, map[string]any{"gracePeriodSeconds": 5})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup([]*corev1.Pod{pod}, tc.nms...)
			expect(t, play(s, cordonEv(DefaultControllerUser, now, true), askEv("pod", now.Add(time.Second)), tc.act), tc.want...)
		})
	}
}

// spec.autoscalers: nodemaint sets an autoscaler annotation on a node only for a maintenance
// cordoning it that holds autoscalers (Hold, the default). The defect: a controller that ignores
// spec.autoscalers Ignore.
func TestActAutoscalers(t *testing.T) {
	hold := ev("patch", "nodes", "", "", node1, DefaultControllerUser, now.Add(time.Second), map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation: "true",
			nodemaintv1alpha1.AutoscalersHeldAnnotation: nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation}},
		"spec": map[string]any{"unschedulable": true}})
	release := ev("patch", "nodes", "", "", node1, DefaultControllerUser, now.Add(time.Second), map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation: nil,
			nodemaintv1alpha1.AutoscalersHeldAnnotation: nil}}})
	ignore := func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
		spec.Autoscalers = nodemaintv1alpha1.AutoscalerPolicyIgnore
	}
	for _, tc := range []struct {
		name string
		nms  []*nodemaintv1alpha1.NodeMaintenance
		act  *auditEvent
		want []string
	}{
		{name: "Ignore, held", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", ignore)}, act: hold,
			want: []string{KindAutoscalers + " hold autoscalers -"}},
		{name: "no maintenance, held", act: hold, want: []string{KindAutoscalers + " hold autoscalers -"}},
		{name: "Hold, held", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
			spec.Autoscalers = nodemaintv1alpha1.AutoscalerPolicyHold
		})}, act: hold},
		{name: "Ignore beside the default, held", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("a", ignore), newNM("b", nil)}, act: hold},
		{name: "Hold, planned only (no cordon), held", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
			spec.Cordon, spec.Drain = false, false
		})}, act: hold, want: []string{KindAutoscalers + " hold autoscalers -"}},
		{name: "Ignore, released", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", ignore)}, act: release},
		{name: "Ignore, held by someone else", nms: []*nodemaintv1alpha1.NodeMaintenance{newNM("nm", ignore)},
			act: ev("patch", "nodes", "", "", node1, admin, now.Add(time.Second), map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{nodemaintv1alpha1.KarpenterDoNotDisruptAnnotation: "true"}}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup(nil, tc.nms...)
			expect(t, play(s, tc.act), tc.want...)
		})
	}
}

// Only nodemaint's own acts, from the checker's start, are judged; the Eviction controller's
// work for another requester is not nodemaint's drain.
func TestActAttribution(t *testing.T) {
	t.Run("another requester's EvictionRequest", func(t *testing.T) {
		s := setup([]*corev1.Pod{nodePod("web", nil)}, newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
			spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
		}))
		expect(t, play(s, requestEv("web", "descheduler.example.com/lownodeutilization", "system:serviceaccount:kube-system:descheduler", now),
			evictEv("web", now.Add(time.Second))))
	})
	t.Run("before the checker started", func(t *testing.T) {
		s := setup([]*corev1.Pod{nodePod("web", nil)})
		s.acts.from = now.Add(time.Minute)
		expect(t, play(s, evictEv("web", now.Add(time.Second))))
		expect(t, play(s, evictEv("web", now.Add(2*time.Minute))), KindNotCordoned+" evict app/web")
	})
	t.Run("a refused eviction", func(t *testing.T) {
		s := setup([]*corev1.Pod{nodePod("web", nil)})
		e := evictEv("web", now)
		e.ResponseStatus.Code = 429
		expect(t, play(s, e))
	})
	t.Run("a withdrawal is no ask", func(t *testing.T) {
		s := setup([]*corev1.Pod{nodePod("web", nil)})
		observed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "uid-web", ResourceVersion: "7"}}
		body, err := evacuation.RemoveConditionPatch(observed, evacuation.Request).Data(nil)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, play(s, ev("patch", "pods", "status", ns, "web", DefaultControllerUser, now, body)))
	})
	t.Run("a pod deleted before the act is judged", func(t *testing.T) {
		pod := nodePod("web", nil)
		s := setup([]*corev1.Pod{pod}, newNM("nm", func(spec *nodemaintv1alpha1.NodeMaintenanceSpec) {
			spec.EvictionPolicy = nodemaintv1alpha1.EvictionPolicySignalOnly
		}))
		s.auditEvent(cordonEv(DefaultControllerUser, now, true))
		s.auditEvent(evictEv("web", now.Add(time.Second)))
		s.pod(pod, true, now.Add(time.Second))
		expect(t, play(s), KindSignalOnly+" evict app/web")
	})
}

// Acts are judged settle after they completed, and not while a watch gap is open: the state
// they are judged against is the relisted one.
func TestActWaitsForSettleAndGap(t *testing.T) {
	s := setup([]*corev1.Pod{nodePod("web", nil)})
	s.auditEvent(evictEv("web", now))
	s.judgeAudit(now.Add(time.Second))
	if len(s.violations) > 0 {
		t.Fatalf("judged before settle: %v", s.violations)
	}
	if len(s.acts.pending) != 1 {
		t.Fatalf("%d acts pending before settle, want 1", len(s.acts.pending))
	}
	s.openGap()
	s.judgeAudit(now.Add(time.Minute))
	if len(s.violations) > 0 {
		t.Fatalf("judged inside a gap: %v", s.violations)
	}
	s.closeGap()
	expect(t, play(s), KindNotCordoned+" evict app/web")
}

func TestUnschedulableIn(t *testing.T) {
	for _, tc := range []struct {
		verb, body                 string
		cordoned, mentioned, known bool
	}{
		{"patch", `{"spec":{"unschedulable":true}}`, true, true, true},
		{"patch", `{"spec":{"unschedulable":null}}`, false, true, true},
		{"patch", `{"metadata":{"annotations":{"a":"b"}}}`, false, false, true},
		{"patch", `[{"op":"replace","path":"/spec/unschedulable","value":true}]`, true, true, true},
		{"patch", `[{"op":"remove","path":"/spec/unschedulable"}]`, false, true, true},
		{"update", `{"spec":{"taints":[]}}`, false, true, true},
		{"update", `{"spec":{"unschedulable":true}}`, true, true, true},
		{"patch", ``, false, true, false},
	} {
		c, m, k := unschedulableIn(tc.verb, json.RawMessage(tc.body))
		if c != tc.cordoned {
			t.Errorf("%s %s: cordoned %v, want %v", tc.verb, tc.body, c, tc.cordoned)
		}
		if m != tc.mentioned {
			t.Errorf("%s %s: mentioned %v, want %v", tc.verb, tc.body, m, tc.mentioned)
		}
		if k != tc.known {
			t.Errorf("%s %s: known %v, want %v", tc.verb, tc.body, k, tc.known)
		}
	}
}

// The leftovers include nodemaint's EvictionRequests once their pods are gone (promise 7: a
// node deleted under maintenance left them forever), and Evictions of gone pods that no request
// owns any more.
func TestLeftoverEvictionRequest(t *testing.T) {
	er := lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "er-web"},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: "web", UID: "uid"}},
			Requester: ernames.Requester, Intent: lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
	eviction := lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: "web"}}},
	}
	got := Leftovers(Snapshot{EvictionRequests: []lifecyclev1alpha1.EvictionRequest{er}, Evictions: []lifecyclev1alpha1.Eviction{eviction}}, Baseline{})
	want := []string{"Eviction app/web: its pod app/web is gone", "EvictionRequest app/er-web: intent Eviction, its pod app/web is gone"}
	if !slices.Equal(got, want) {
		t.Errorf("leftovers %q, want %q", got, want)
	}
	// An Eviction of a gone pod kept for another requester's request that owns it (upstream's
	// controller keeps it, saying TargetEvicted, until the garbage collector takes it with the
	// request): not a leftover; once the request is gone, it is.
	other := er
	other.UID, other.Spec.Requester = "uid-other", "descheduler.example.com/x"
	kept := eviction
	kept.OwnerReferences = []metav1.OwnerReference{{APIVersion: "lifecycle.k8s.io/v1alpha1", Kind: "EvictionRequest", Name: other.Name, UID: other.UID}}
	if got := Leftovers(Snapshot{EvictionRequests: []lifecyclev1alpha1.EvictionRequest{other}, Evictions: []lifecyclev1alpha1.Eviction{kept}}, Baseline{}); len(got) > 0 {
		t.Errorf("leftovers %q, want none: the Eviction is its request's", got)
	}
	if got := Leftovers(Snapshot{Evictions: []lifecyclev1alpha1.Eviction{kept}}, Baseline{}); !slices.Equal(got, want[:1]) {
		t.Errorf("leftovers %q, want %q", got, want[:1])
	}
	// The pod gone and nothing of nodemaint's left: clean.
	if got := Leftovers(Snapshot{Pods: []corev1.Pod{*nodePod("other", map[string]string{nodemaintv1alpha1.DrainLabel: "skip"})}}, Baseline{}); len(got) > 0 {
		t.Errorf("leftovers %q, want none", got)
	}
	// A maintenance deleted whose finalizer was never released.
	nm := newNM("stuck", nil)
	nm.DeletionTimestamp, nm.Finalizers = &metav1.Time{Time: now}, []string{nodemaintv1alpha1.Finalizer}
	raised := autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web",
		Annotations: map[string]string{evacuation.SurgeBoundsAnnotation: "{}"}}}
	if got := Leftovers(Snapshot{HorizontalPodAutoscalers: []autoscalingv2.HorizontalPodAutoscaler{raised}}, Baseline{}); len(got) != 1 || !strings.Contains(got[0], "HorizontalPodAutoscaler app/web") {
		t.Errorf("leftovers of an autoscaler's record of raised bounds: %v", got)
	}
	if got := Leftovers(Snapshot{NodeMaintenances: []nodemaintv1alpha1.NodeMaintenance{*nm}}, Baseline{}); len(got) != 1 || !strings.Contains(got[0], "NodeMaintenance stuck") {
		t.Errorf("leftovers %q, want the stuck maintenance", got)
	}
}

// The tail reads the log as the API server appends it, a line at a time, and follows a
// rotation.
func TestAuditTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	c := &Checker{state: actState(), audit: &auditTail{path: path}}
	c.readAudit() // not written yet
	line := func(e *auditEvent) []byte {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	first := line(evictEv("a", now))
	if err := os.WriteFile(path, append(first, line(evictEv("b", now))[:10]...), 0o644); err != nil {
		t.Fatal(err)
	}
	c.readAudit()
	if lines, _, _, _ := c.AuditStats(); lines != 1 {
		t.Fatalf("read %d lines, want the complete one", lines)
	}
	if len(c.state.acts.pending) != 1 {
		t.Fatalf("%d acts pending, want the complete line's", len(c.state.acts.pending))
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(line(evictEv("b", now))[10:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, line(evictEv("c", now)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.readAudit()
	lines, bad, _, _ := c.AuditStats()
	if lines != 3 {
		t.Errorf("read %d lines, want 3 across the rotation", lines)
	}
	if bad != 0 {
		t.Errorf("%d bad lines, want none", bad)
	}
	if len(c.state.acts.pending) != 3 {
		t.Errorf("%d acts pending, want 3 across the rotation", len(c.state.acts.pending))
	}
}

// An act is judged against the pod its request named by UID, not a later pod of the same name:
// a StatefulSet's pod evicted on a cordoned node and recreated within the same second on a node
// that is not cordoned (a CreationTimestamp has whole seconds) is no NotCordoned; an eviction
// that named the new pod is.
func TestActJudgesThePodItNamed(t *testing.T) {
	evictUID := func(uid string, at time.Time) *auditEvent {
		return ev("create", "pods", "eviction", ns, "db-1", DefaultControllerUser, at,
			map[string]any{"deleteOptions": map[string]any{"preconditions": map[string]any{"uid": uid}}})
	}
	for _, tc := range []struct {
		name string
		uid  string
		want []string
	}{
		{"the evicted pod", "uid-old", nil},
		{"the pod recreated elsewhere", "uid-new", []string{KindNotCordoned + " evict app/db-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := nodePod("db-1", nil)
			old.UID = "uid-old"
			s := setup([]*corev1.Pod{old}, newNM("nm", nil))
			s.node(newNode("node-2", false), false)
			at := now.Add(3 * time.Second)
			for _, e := range []*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("db-1", now.Add(time.Second)), evictUID(tc.uid, at)} {
				s.auditEvent(e)
			}
			s.pod(old, true, at.Add(100*time.Millisecond))
			recreated := nodePod("db-1", nil)
			recreated.UID, recreated.Spec.NodeName = "uid-new", "node-2"
			recreated.CreationTimestamp = metav1.NewTime(at.Truncate(time.Second))
			s.pod(recreated, false, at.Add(200*time.Millisecond))
			expect(t, play(s), tc.want...)
		})
	}
}

// Promise 4 over promise 5: a deletion that a maintenance's drainTimeoutAction Delete allowed
// bypasses the pod's budget by design, so the budget's breach is excused; a deletion that was not
// due breaches both promises.
func TestDueDeletionBypassesBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delete time.Duration
		code   int32
		want   []string
	}{
		{"due", 5*time.Minute + 2*time.Second, 200, nil},
		{"not due", 2 * time.Minute, 200, []string{KindDeletionNotDue + " delete app/web", KindPodDisruptionBudget + "  app/web"}},
		// A deletion answered 504 (its client, a leader on a loaded machine, went away) that the
		// API server applied.
		{"due, answered 504", 5*time.Minute + 2*time.Second, 504, nil},
		{"not due, answered 504", 2 * time.Minute, 504, []string{KindDeletionNotDue + " delete app/web", KindPodDisruptionBudget + "  app/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			web := nodePod("web", map[string]string{"app": "web"})
			s := setup([]*corev1.Pod{web}, newNM("nm", deleting))
			s.pdb(newPDB("web", ptr.To(intstr.FromInt32(1)), nil), false)
			at := now.Add(tc.delete)
			for _, e := range []*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(time.Second)), code(deleteEv("web", DefaultControllerUser, at), tc.code)} {
				s.auditEvent(e)
			}
			s.pod(terminating(web), false, at.Add(10*time.Millisecond))
			got := play(s)
			slices.Sort(got)
			expect(t, got, tc.want...)
			if tc.want == nil && s.acts.excusedViolations != 1 {
				t.Errorf("%d violations excused, want the budget's 1", s.acts.excusedViolations)
			}
		})
	}
}

// A deletion's response timeout counts from the ask of the very pod deleted: a StatefulSet's pod
// recreated under the same name is not taken as asked when its predecessor was.
func TestActDeletionCountsFromThePodsOwnAsk(t *testing.T) {
	deleteUID := func(uid string, at time.Time) *auditEvent {
		return ev("delete", "pods", "", ns, "db-1", DefaultControllerUser, at, map[string]any{"preconditions": map[string]any{"uid": uid}})
	}
	askUID := func(uid string, at time.Time) *auditEvent {
		observed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-1", UID: types.UID(uid), ResourceVersion: "7"}}
		body, err := evacuation.ConditionPatch(observed, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
			Reason: evacuation.ReasonNodeMaintenance, LastTransitionTime: metav1.NewTime(at)}).Data(nil)
		if err != nil {
			t.Fatal(err)
		}
		return ev("patch", "pods", "status", ns, "db-1", DefaultControllerUser, at, body)
	}
	old := nodePod("db-1", nil)
	old.UID = "uid-old"
	s := setup([]*corev1.Pod{old}, newNM("nm", deleting))
	for _, e := range []*auditEvent{cordonEv(DefaultControllerUser, now, true), askUID("uid-old", now.Add(time.Second))} {
		s.auditEvent(e)
	}
	s.judgeAudit(now.Add(time.Minute))
	s.pod(old, true, now.Add(time.Minute))
	recreated := nodePod("db-1", nil)
	recreated.UID, recreated.CreationTimestamp = "uid-new", metav1.NewTime(now.Add(time.Minute))
	s.pod(recreated, false, now.Add(time.Minute))
	// The new pod, asked at 5m50s, deleted at 6m: its own response timeout (3m) has not run.
	expect(t, play(s, askUID("uid-new", now.Add(5*time.Minute+50*time.Second)), deleteUID("uid-new", now.Add(6*time.Minute))),
		KindDeletionNotDue+" delete app/db-1")
}

// The drainTimeout counts from the node's drain start (cordoned, and drained by the maintenance),
// not from the first ask, which follows it by as long as writing the asks takes.
func TestActDrainTimeoutCountsFromTheDrainStart(t *testing.T) {
	web := nodePod("web", nil)
	s := setup([]*corev1.Pod{web}, newNM("nm", deleting))
	// Cordoned at now, the first ask 10s later; deleted 5m after the cordon: due.
	expect(t, play(s, cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(10*time.Second)),
		deleteEv("web", DefaultControllerUser, now.Add(5*time.Minute+time.Second))))
	// Deleted 4m50s after the cordon: not due.
	s = setup([]*corev1.Pod{web}, newNM("nm", deleting))
	expect(t, play(s, cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(10*time.Second)),
		deleteEv("web", DefaultControllerUser, now.Add(4*time.Minute+50*time.Second))), KindDeletionNotDue+" delete app/web")
}

// A deletion is judged against the pod it named even when that pod's successor under the same
// name came and went before the act was judged (a StatefulSet's pod, deleted twice within the
// settle), or replaced it without a delete event (a relist): the due deletion still excuses the
// budget's breach. Before, the checker kept one gone pod per name and found none.
func TestActFindsThePodAfterItsSuccessors(t *testing.T) {
	for _, tc := range []struct {
		name string
		// successors replays what follows the deletion on the watch.
		successors func(s *state, old *corev1.Pod, at time.Time)
	}{
		{"deleted, recreated, deleted again", func(s *state, old *corev1.Pod, at time.Time) {
			s.pod(old, true, at.Add(20*time.Millisecond))
			next := nodePod("db-0", map[string]string{"app": "db"})
			next.UID, next.Spec.NodeName, next.Status.Conditions = "uid-next", "", nil
			s.pod(next, false, at.Add(30*time.Millisecond))
			s.pod(next, true, at.Add(40*time.Millisecond))
		}},
		{"replaced across a relist", func(s *state, old *corev1.Pod, at time.Time) {
			next := nodePod("db-0", map[string]string{"app": "db"})
			next.UID, next.Spec.NodeName, next.Status.Conditions = "uid-next", "", nil
			s.pod(next, false, at.Add(30*time.Millisecond))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := nodePod("db-0", map[string]string{"app": "db"})
			old.UID = "uid-old"
			s := setup([]*corev1.Pod{old}, newNM("nm", deleting))
			s.pdb(newPDB("db", ptr.To(intstr.FromInt32(1)), nil), false)
			at := now.Add(5*time.Minute + 2*time.Second)
			for _, e := range []*auditEvent{cordonEv(DefaultControllerUser, now, true), askEv("db-0", now.Add(time.Second)),
				ev("delete", "pods", "", ns, "db-0", DefaultControllerUser, at, map[string]any{"preconditions": map[string]any{"uid": "uid-old"}})} {
				s.auditEvent(e)
			}
			s.pod(terminating(old), false, at.Add(10*time.Millisecond))
			tc.successors(s, terminating(old), at)
			expect(t, play(s))
			if o := s.acts.outcomes[ns+"/db-0"]; !strings.Contains(o, "due, by NodeMaintenance/nm") {
				t.Errorf("the deletion judged %q, want due, by NodeMaintenance/nm", o)
			}
			if s.acts.excusedViolations != 1 {
				t.Errorf("%d violations excused, want the budget's 1", s.acts.excusedViolations)
			}
		})
	}
}

// The drain start outlives the checker's minute of maintenance versions: a maintenance whose
// status the controller writes now and then (a new leader's first write) still drains since it
// was first seen draining, and its deletion 5m after the cordon is due. Before, the start was
// the oldest version kept, a minute before the deletion.
func TestActDrainStartOutlivesTheHistory(t *testing.T) {
	web := nodePod("web", nil)
	nm := newNM("nm", deleting)
	s := setup([]*corev1.Pod{web}, nm)
	for at := 30 * time.Second; at < 5*time.Minute; at += 30 * time.Second {
		written := nm.DeepCopy()
		written.ResourceVersion = at.String()
		s.nodeMaintenance(written, false, now.Add(at))
	}
	expect(t, play(s, cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(time.Second)),
		deleteEv("web", DefaultControllerUser, now.Add(5*time.Minute+time.Second))))

	// A drain switched off and on again starts again.
	s = setup([]*corev1.Pod{web}, nm)
	off := nm.DeepCopy()
	off.Spec.Drain = false
	s.nodeMaintenance(off, false, now.Add(time.Minute))
	s.nodeMaintenance(nm, false, now.Add(2*time.Minute))
	expect(t, play(s, cordonEv(DefaultControllerUser, now, true), askEv("web", now.Add(time.Second)),
		deleteEv("web", DefaultControllerUser, now.Add(5*time.Minute+time.Second))), KindDeletionNotDue+" delete app/web")
}
