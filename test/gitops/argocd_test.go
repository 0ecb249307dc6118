// Package gitops tests what nodemaint ships for GitOps tools: the Argo CD health check of a
// NodeMaintenance (config/argocd), run in the Lua interpreter Argo CD runs it in (gopher-lua,
// v1.1.2 as Argo CD v3 pins it), against NodeMaintenances built from the API types with statuses
// as the controller writes them.
package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	nmv1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

const (
	healthScriptPath = "../../config/argocd/health.lua"
	cmPatchPath      = "../../config/argocd/argocd-cm-patch.yaml"
	// healthKeyPrefix is the prefix of argocd-cm's health customization keys, followed by
	// <group>_<kind> (Argo CD's util/settings).
	healthKeyPrefix = "resource.customizations.health."
)

// health is what a health script returns: Argo CD's health.HealthStatus.
type health struct {
	Status  string
	Message string
}

// validHealth are the statuses Argo CD accepts from a script (util/lua isValidHealthStatusCode).
var validHealth = map[string]bool{"Unknown": true, "Progressing": true, "Healthy": true, "Suspended": true, "Degraded": true, "Missing": true}

// runHealthLua runs a health script on obj as Argo CD's util/lua VM.ExecuteHealthLua does in
// production (resource.customizations.useOpenLibs unset): no standard library but package, base
// and table (Argo CD also loads a sandboxed os, which these scripts do not use), a one-second
// deadline, the object as the global obj, and the returned table read as status and message.
func runHealthLua(script string, obj *unstructured.Unstructured) (health, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return health{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj.Object))
	fn, err := l.LoadString(script)
	if err != nil {
		return health{}, err
	}
	l.Push(fn)
	if err := l.PCall(0, lua.MultRet, nil); err != nil {
		return health{}, err
	}
	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return health{}, nil
	case lua.LTTable:
	default:
		return health{}, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	tbl := ret.(*lua.LTable)
	if key, _ := tbl.Next(lua.LNil); key == lua.LNil {
		return health{}, nil // an empty table encodes as a JSON array: Argo CD reads no health
	}
	var h health
	for field, dst := range map[string]*string{"status": &h.Status, "message": &h.Message} {
		switch v := tbl.RawGetString(field).(type) {
		case lua.LString:
			*dst = string(v)
		case *lua.LNilType:
		default:
			return health{}, fmt.Errorf("%s is a Lua %s, not a string", field, v.Type())
		}
	}
	if !validHealth[h.Status] {
		return health{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return h, nil
}

// toLua converts an unstructured value to Lua as Argo CD's util/lua decodeValue does.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(toLua(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), toLua(l, item))
		}
		return tbl
	}
	return lua.LNil
}

// unstructuredOf is nm as Argo CD's cluster cache holds it: its JSON decoded into an
// unstructured object (integers as int64). Without status, the object has none, as one the API
// server returns before the controller wrote a status.
func unstructuredOf(nm *nmv1.NodeMaintenance, withStatus bool) (*unstructured.Unstructured, error) {
	nm = nm.DeepCopy()
	nm.APIVersion, nm.Kind = nmv1.GroupVersion.String(), "NodeMaintenance"
	data, err := json.Marshal(nm)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	if !withStatus {
		unstructured.RemoveNestedField(u.Object, "status")
	}
	return u, nil
}

// The statuses below are as the controller writes them (internal/controller/nodemaintenance:
// status.go, rollout.go, spec_valid.go, reconciler.go's nodesSelectedCondition): its conditions,
// reasons and messages, Ready computed from the others (readyCondition).

var transition = metav1.NewTime(time.Date(2026, 3, 14, 22, 5, 0, 0, time.UTC))

func condition(generation int64, typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation, LastTransitionTime: transition}
}

// readyFrom is the Ready condition that follows c, with its reason and message.
func readyFrom(c metav1.Condition, status metav1.ConditionStatus) metav1.Condition {
	return condition(c.ObservedGeneration, nmv1.ConditionReady, status, c.Reason, c.Message)
}

// maintenance is a NodeMaintenance of generation generation whose status the controller wrote
// for observed (0: never).
func maintenance(generation, observed int64, spec nmv1.NodeMaintenanceSpec, phase nmv1.Phase, conds ...metav1.Condition) *nmv1.NodeMaintenance {
	spec.NodeSelector = corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"}},
	}}}}
	spec.Reason = "kernel 6.12 upgrade"
	nm := &nmv1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "kernel-upgrade", Generation: generation, UID: "5d1c3a7e-0b6f-4e0a-9d55-0c4b7f3c2a11",
			CreationTimestamp: metav1.NewTime(transition.Add(-time.Hour)), Finalizers: []string{nmv1.Finalizer}},
		Spec: spec,
	}
	if observed == 0 {
		return nm
	}
	for i := range conds {
		conds[i].ObservedGeneration = observed
	}
	nm.Status = nmv1.NodeMaintenanceStatus{
		ObservedGeneration: observed, Phase: phase, EvacuationProtocol: nmv1.EvacuationProtocolPodConditions,
		SelectedNodes: 3, Conditions: conds,
	}
	switch phase {
	case nmv1.PhaseDrain:
		nm.Status.NodesPending, nm.Status.PodsPendingEvacuation, nm.Status.PodsEvacuating = 2, 12, 4
		nm.Status.DrainStartTime = &transition
	case nmv1.PhaseDrainComplete:
		nm.Status.NodesDrained = 3
		nm.Status.DrainStartTime = &transition
	}
	return nm
}

// duration is the Duration the API decodes of text: invalid, keeping the text, when Go cannot
// parse it.
func duration(text string) *nmv1.Duration {
	var d nmv1.Duration
	if err := d.UnmarshalJSON([]byte(`"` + text + `"`)); err != nil {
		panic(err)
	}
	return &d
}

// healthCase is a NodeMaintenance and the health Argo CD should read of it.
type healthCase struct {
	name     string
	nm       *nmv1.NodeMaintenance
	noStatus bool // the object has no status at all
	want     health
}

func healthCases() []healthCase {
	var (
		cordon       = nmv1.NodeMaintenanceSpec{Cordon: true}
		drain        = nmv1.NodeMaintenanceSpec{Cordon: true, Drain: true, DrainTimeout: duration("1h")}
		rolloutDrain = nmv1.NodeMaintenanceSpec{Cordon: true, Drain: true, DrainTimeout: duration("1h"),
			Rollout: &nmv1.RolloutSpec{Window: &nmv1.MaintenanceWindow{Schedule: "0 22 * * 1-5", Duration: *duration("4h")}}}

		selected     = condition(0, nmv1.ConditionNodesSelected, metav1.ConditionTrue, nmv1.ReasonNodesSelected, "the nodeSelector selects 3 nodes")
		notRequested = condition(0, nmv1.ConditionDrained, metav1.ConditionFalse, nmv1.ReasonDrainNotRequested, "spec.drain is false")
		pending      = condition(0, nmv1.ConditionDrained, metav1.ConditionFalse, nmv1.ReasonPodsPending,
			"12 pods pending evacuation (4 evacuating by their owners) on 2 nodes")
		drained = condition(0, nmv1.ConditionDrained, metav1.ConditionTrue, nmv1.ReasonDrained,
			"every targeted pod is gone from the 3 selected nodes; 1 pods skipped and left running: monitoring/node-exporter-7xk2p (tolerates the unschedulable taint)")
		within   = condition(0, nmv1.ConditionDrainTimedOut, metav1.ConditionFalse, nmv1.ReasonWithinDrainTimeout, "")
		timedOut = condition(0, nmv1.ConditionDrainTimedOut, metav1.ConditionTrue, nmv1.ReasonDrainTimedOut,
			"not drained 1h0m0s after drain started: 12 pods and 0 volumes left on 2 nodes, among them shop/cart-0, shop/cart-1")
		rolling = condition(0, nmv1.ConditionDrained, metav1.ConditionFalse, nmv1.ReasonRolling,
			"1 of 3 nodes released; 0 in their turn are drained; 2 waiting")
		unschedulable = condition(0, nmv1.ConditionRolloutHalted, metav1.ConditionTrue, nmv1.ReasonReplacementsUnschedulable,
			"2 pods cannot be scheduled (shop/web-7d9c8-x2x9p, shop/web-7d9c8-zq4lm): no new node starts until they are")
		outside = condition(0, nmv1.ConditionRolloutHalted, metav1.ConditionTrue, nmv1.ReasonOutsideWindow,
			"outside the maintenance window: no new node starts; it opens at 2026-03-16T22:00:00Z")
		nodeTimedOut = condition(0, nmv1.ConditionRolloutHalted, metav1.ConditionTrue, nmv1.ReasonNodeDrainTimedOut,
			"not drained within drainTimeout 1h0m0s: node-b; no new node starts until they are drained or released (onNodeFailure Pause)")
		turnTimedOut = condition(0, nmv1.ConditionDrainTimedOut, metav1.ConditionTrue, nmv1.ReasonDrainTimedOut,
			"not drained 1h0m0s after their turn started: node-b; 5 pods left on the nodes in their turn, among them shop/cart-2")
		rolloutComplete = condition(0, nmv1.ConditionRolloutHalted, metav1.ConditionFalse, nmv1.ReasonRolloutComplete, "every selected node was released")
		noneSelected    = condition(0, nmv1.ConditionNodesSelected, metav1.ConditionFalse, nmv1.ReasonNoNodesSelected, "the nodeSelector selects no node")
		drainedNone     = condition(0, nmv1.ConditionDrained, metav1.ConditionFalse, nmv1.ReasonNoNodesSelected, "the nodeSelector selects no node: nothing is drained")
		badSelector     = condition(0, nmv1.ConditionNodesSelected, metav1.ConditionFalse, nmv1.ReasonInvalidNodeSelector,
			`the nodeSelector selects no node: values[0][node.kubernetes.io/instance-type]: Invalid value: "m5 xlarge": a valid label must be an empty string or consist of alphanumeric characters`)
		etcdAtRisk = condition(0, nmv1.ConditionNodesSelected, metav1.ConditionFalse, nmv1.ReasonEtcdQuorumAtRisk,
			"the nodeSelector selects 3 control-plane nodes (cp-1, cp-2, cp-3) and there is no spec.rollout: they would be cordoned, drained and maintained at once")
		overLimit = condition(0, nmv1.ConditionNodesOverMaintenanceLimit, metav1.ConditionTrue, nmv1.ReasonTooManyMaintenances,
			"waiting for a place on 1 of the 3 selected nodes (node-c): at most 64 NodeMaintenances act on a node at once, and 64 others act on it; nothing is done to the node for this one (no cordon, taint, evacuation request, eviction or deletion) until one of them ends")
		planned  = condition(0, nmv1.ConditionReady, metav1.ConditionTrue, nmv1.ReasonPlanned, "planned on 3 nodes: they carry the planned-maintenance taint")
		cordoned = condition(0, nmv1.ConditionReady, metav1.ConditionTrue, nmv1.ReasonCordoned, "every selected node is cordoned (3 nodes)")
		complete = condition(0, nmv1.ConditionReady, metav1.ConditionTrue, nmv1.ReasonMaintenanceComplete, "the maintenance is complete: its nodes are restored")
	)

	// A spec stored before the API server refused its drainTimeout ("1d": Go has no days), and
	// one whose window's time zone does not exist, as setSpecValid reports them.
	invalid := nmv1.NodeMaintenanceSpec{Cordon: true, Drain: true, DrainTimeout: duration("1d")}
	invalidSpec := condition(0, nmv1.ConditionSpecValid, metav1.ConditionFalse, nmv1.ReasonInvalidSpec,
		strings.Join(invalid.Problems(), "; ")+"; until it is fixed, nodemaint only cordons and requests evacuation: it evicts, deletes and taints nothing for this maintenance")
	badWindow := *rolloutDrain.DeepCopy()
	badWindow.Rollout.Window.TimeZone = "Europe/Atlantis"
	badWindowSpec := condition(0, nmv1.ConditionSpecValid, metav1.ConditionFalse, nmv1.ReasonInvalidSpec,
		`spec.rollout.window.timeZone: "Europe/Atlantis" is not a time zone: unknown time zone Europe/Atlantis; until it is fixed, no node starts its turn`)
	outsideForever := condition(0, nmv1.ConditionRolloutHalted, metav1.ConditionTrue, nmv1.ReasonOutsideWindow, "outside the maintenance window: no new node starts")

	withRollout := func(nm *nmv1.NodeMaintenance, done, inTurn, waiting int32) *nmv1.NodeMaintenance {
		nm.Status.Rollout = &nmv1.RolloutStatus{NodesDone: done, NodesInTurn: inTurn, NodesWaiting: waiting}
		for i := range inTurn {
			nm.Status.Rollout.InTurn = append(nm.Status.Rollout.InTurn, nmv1.NodeTurn{Name: fmt.Sprintf("node-%c", 'b'+i), Since: transition})
		}
		return nm
	}
	msg := func(c metav1.Condition) string { return c.Reason + ": " + c.Message }

	return []healthCase{
		{name: "just created, no status yet", noStatus: true,
			nm:   maintenance(1, 0, drain, ""),
			want: health{"Progressing", "waiting for the controller"}},
		{name: "status older than the spec (drain just set on a cordoned maintenance)",
			nm:   maintenance(3, 2, drain, nmv1.PhaseCordon, selected, notRequested, cordoned),
			want: health{"Progressing", "waiting for the controller"}},
		{name: "Planning",
			nm:   maintenance(1, 1, nmv1.NodeMaintenanceSpec{}, nmv1.PhasePlanning, selected, notRequested, planned),
			want: health{"Healthy", msg(planned)}},
		{name: "Cordon under way",
			nm: maintenance(2, 2, cordon, nmv1.PhaseCordon, selected, notRequested,
				condition(0, nmv1.ConditionReady, metav1.ConditionFalse, nmv1.ReasonCordoning, "1 of the 3 selected nodes are cordoned")),
			want: health{"Progressing", "Cordoning: 1 of the 3 selected nodes are cordoned"}},
		{name: "Cordon done",
			nm:   maintenance(2, 2, cordon, nmv1.PhaseCordon, selected, notRequested, cordoned),
			want: health{"Healthy", msg(cordoned)}},
		{name: "Cordon waiting for a place on a node (TooManyMaintenances)",
			nm:   maintenance(2, 2, cordon, nmv1.PhaseCordon, selected, notRequested, overLimit, readyFrom(overLimit, metav1.ConditionFalse)),
			want: health{"Progressing", msg(overLimit)}},
		{name: "Drain in progress (PodsPending)",
			nm:   maintenance(3, 3, drain, nmv1.PhaseDrain, selected, pending, within, readyFrom(pending, metav1.ConditionFalse)),
			want: health{"Progressing", msg(pending)}},
		{name: "DrainTimedOut",
			nm:   maintenance(3, 3, drain, nmv1.PhaseDrain, selected, pending, timedOut, readyFrom(timedOut, metav1.ConditionFalse)),
			want: health{"Degraded", msg(timedOut)}},
		{name: "Drained (DrainComplete)",
			nm:   maintenance(3, 3, drain, nmv1.PhaseDrainComplete, selected, drained, within, readyFrom(drained, metav1.ConditionTrue)),
			want: health{"Healthy", msg(drained)}},
		{name: "MaintenanceComplete",
			nm:   maintenance(4, 4, nmv1.NodeMaintenanceSpec{DrainTimeout: duration("1h")}, nmv1.PhaseMaintenanceComplete, selected, notRequested, complete),
			want: health{"Healthy", msg(complete)}},
		{name: "rollout under way",
			nm: withRollout(maintenance(3, 3, rolloutDrain, nmv1.PhaseDrain, selected, pending, within,
				condition(0, nmv1.ConditionRolloutHalted, metav1.ConditionFalse, nmv1.ReasonRolling, "at most 1 nodes in their turn at once: 1 done, 1 in turn, 1 waiting"),
				readyFrom(pending, metav1.ConditionFalse)), 1, 1, 1),
			want: health{"Progressing", msg(pending)}},
		{name: "rollout halted (ReplacementsUnschedulable)",
			nm: withRollout(maintenance(3, 3, rolloutDrain, nmv1.PhaseDrain, selected, pending, within, unschedulable,
				readyFrom(unschedulable, metav1.ConditionFalse)), 1, 1, 1),
			want: health{"Degraded", msg(unschedulable)}},
		{name: "rollout halted on a node's drain timeout (onNodeFailure Pause)",
			nm: withRollout(maintenance(3, 3, rolloutDrain, nmv1.PhaseDrain, selected, pending, turnTimedOut, nodeTimedOut,
				readyFrom(turnTimedOut, metav1.ConditionFalse)), 1, 1, 1),
			want: health{"Degraded", msg(turnTimedOut)}},
		{name: "rollout outside its window",
			nm: withRollout(maintenance(3, 3, rolloutDrain, nmv1.PhaseDrain, selected, rolling, within, outside,
				readyFrom(outside, metav1.ConditionFalse)), 1, 0, 2),
			want: health{"Suspended", msg(outside)}},
		{name: "rollout whose window never opens (invalid time zone)",
			nm: withRollout(maintenance(3, 3, badWindow, nmv1.PhaseDrain, selected, rolling, within, outsideForever, badWindowSpec,
				readyFrom(badWindowSpec, metav1.ConditionFalse)), 0, 0, 3),
			want: health{"Degraded", msg(badWindowSpec)}},
		{name: "rollout drained node by node, complete",
			nm: withRollout(maintenance(3, 3, rolloutDrain, nmv1.PhaseMaintenanceComplete, selected,
				condition(0, nmv1.ConditionDrained, metav1.ConditionTrue, nmv1.ReasonDrained, "each of the 3 selected nodes was drained in its turn and released"),
				within, rolloutComplete, complete), 3, 0, 0),
			want: health{"Healthy", msg(complete)}},
		{name: "rollout that only cordons, complete",
			nm: withRollout(maintenance(2, 2, nmv1.NodeMaintenanceSpec{Cordon: true, Rollout: &nmv1.RolloutSpec{}}, nmv1.PhaseCordon, selected, notRequested,
				rolloutComplete, readyFrom(rolloutComplete, metav1.ConditionTrue)), 3, 0, 0),
			want: health{"Healthy", msg(rolloutComplete)}},
		{name: "invalid spec (InvalidSpec)",
			nm:   maintenance(1, 1, invalid, nmv1.PhaseDrain, selected, pending, invalidSpec, readyFrom(invalidSpec, metav1.ConditionFalse)),
			want: health{"Degraded", msg(invalidSpec)}},
		{name: "invalid nodeSelector (InvalidNodeSelector)",
			nm:   maintenance(1, 1, drain, nmv1.PhaseDrain, badSelector, drainedNone, within, readyFrom(badSelector, metav1.ConditionFalse)),
			want: health{"Degraded", msg(badSelector)}},
		{name: "control-plane nodes together (EtcdQuorumAtRisk)",
			nm:   maintenance(1, 1, drain, nmv1.PhaseDrain, etcdAtRisk, pending, within, readyFrom(etcdAtRisk, metav1.ConditionFalse)),
			want: health{"Degraded", msg(etcdAtRisk)}},
		{name: "no node selected yet (NoNodesSelected)",
			nm:   maintenance(1, 1, drain, nmv1.PhaseDrain, noneSelected, drainedNone, within, readyFrom(noneSelected, metav1.ConditionFalse)),
			want: health{"Progressing", msg(noneSelected)}},
		{name: "status of a controller without the Ready condition",
			nm:   maintenance(3, 3, drain, nmv1.PhaseDrain, selected, pending, within),
			want: health{"Progressing", "waiting for the controller to report Ready"}},
	}
}

// checkHealth runs script on the case's object and says how its health differs from the
// expected one; nil when it is the same.
func checkHealth(script string, c healthCase) error {
	obj, err := unstructuredOf(c.nm, !c.noStatus)
	if err != nil {
		return err
	}
	got, err := runHealthLua(script, obj)
	if err != nil {
		return fmt.Errorf("the health script failed: %w", err)
	}
	if got != c.want {
		return fmt.Errorf("health %s %q, want %s %q", got.Status, got.Message, c.want.Status, c.want.Message)
	}
	return nil
}

func readScript(t *testing.T) string {
	t.Helper()
	script, err := os.ReadFile(healthScriptPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(script)
}

func TestArgoCDHealthCheck(t *testing.T) {
	script := readScript(t)
	cases := healthCases()
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.want.Status] = true
		t.Run(c.name, func(t *testing.T) {
			if err := checkHealth(script, c); err != nil {
				t.Error(err)
			}
		})
	}
	for _, status := range []string{"Healthy", "Progressing", "Degraded", "Suspended"} {
		if !covered[status] {
			t.Errorf("no case expects %s", status)
		}
	}

	// The table fails a script that gets a case wrong: one that is always Healthy, one that
	// reads a status the controller wrote for an older spec, one that takes a closed window for a
	// failure.
	t.Run("a wrong script fails the table", func(t *testing.T) {
		find := func(name string) healthCase {
			for _, c := range cases {
				if c.name == name {
					return c
				}
			}
			t.Fatalf("no case %q", name)
			return healthCase{}
		}
		alwaysHealthy := `
local hs = {}
hs.status = "Healthy"
hs.message = "fine"
return hs
`
		replace := func(old, new string) string {
			if !strings.Contains(script, old) {
				t.Fatalf("health.lua has no %q to change", old)
			}
			return strings.Replace(script, old, new, 1)
		}
		for _, wrong := range []struct {
			name, script, caseName string
		}{
			{"always Healthy", alwaysHealthy, "DrainTimedOut"},
			{"ignores observedGeneration", replace("obj.status.observedGeneration < obj.metadata.generation", "false"),
				"status older than the spec (drain just set on a cordoned maintenance)"},
			{"a closed window is Degraded", replace(`decide("Suspended", halted)`, `decide("Degraded", halted)`), "rollout outside its window"},
		} {
			err := checkHealth(wrong.script, find(wrong.caseName))
			if err == nil {
				t.Errorf("script %q passes the case %q", wrong.name, wrong.caseName)
				continue
			}
			t.Logf("script %q fails the case %q: %v", wrong.name, wrong.caseName, err)
		}
		// The always-Healthy script fails every case that is not Healthy.
		for _, c := range cases {
			if c.want.Status != "Healthy" && checkHealth(alwaysHealthy, c) == nil {
				t.Errorf("the always-Healthy script passes the case %q", c.name)
			}
		}
	})
}

// A script error, a wrong return value and a status Argo CD does not know are told apart as
// Argo CD tells them (so that the table above fails a broken script rather than reading it).
func TestRunHealthLuaAsArgoCD(t *testing.T) {
	obj, err := unstructuredOf(maintenance(1, 1, nmv1.NodeMaintenanceSpec{}, nmv1.PhasePlanning), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, script string
		want         health
		err          bool
	}{
		{name: "syntax error", script: "return {", err: true},
		{name: "runtime error", script: "return obj.status.nothing.here", err: true},
		{name: "string library absent, as in Argo CD", script: `return {status = string.upper("healthy")}`, err: true},
		{name: "not a table", script: `return "Healthy"`, err: true},
		{name: "unknown status", script: `return {status = "Fine"}`, want: health{"Unknown", "Lua returned an invalid health status"}},
		{name: "nil", script: "return nil", want: health{}},
		{name: "reads obj", script: `return {status = "Healthy", message = obj.metadata.name .. " " .. obj.status.observedGeneration}`,
			want: health{"Healthy", "kernel-upgrade 1"}},
		{name: "endless loop stopped", script: "while true do end", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runHealthLua(tc.script, obj)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// The argocd-cm patch holds health.lua verbatim, under the key Argo CD looks up for a
// NodeMaintenance, and merges into an existing argocd-cm without touching its other keys.
func TestArgoCDConfigMapPatch(t *testing.T) {
	script := readScript(t)
	raw, err := os.ReadFile(cmPatchPath)
	if err != nil {
		t.Fatal(err)
	}
	var patch corev1.ConfigMap
	if err := yaml.UnmarshalStrict(raw, &patch); err != nil {
		t.Fatal(err)
	}
	if patch.APIVersion != "v1" {
		t.Errorf("the patch's apiVersion is %q, want v1", patch.APIVersion)
	}
	if patch.Kind != "ConfigMap" {
		t.Errorf("the patch's kind is %q, want ConfigMap", patch.Kind)
	}
	if patch.Name != "argocd-cm" {
		t.Errorf("the patch's name is %q, want argocd-cm", patch.Name)
	}

	// Argo CD's key for a kind: resource.customizations.health.<group>_<kind>, read back as
	// <group>/<kind> and matched against the object's GroupVersionKind.
	scheme := runtime.NewScheme()
	if err := nmv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gvks, _, err := scheme.ObjectKinds(&nmv1.NodeMaintenance{})
	if err != nil {
		t.Fatal(err)
	}
	key := healthKeyPrefix + gvks[0].Group + "_" + gvks[0].Kind
	if len(patch.Data) != 1 {
		t.Errorf("the patch sets %d keys, want only %s", len(patch.Data), key)
	}
	got, ok := patch.Data[key]
	switch {
	case !ok:
		t.Fatalf("the patch has no key %s", key)
	case got != script:
		t.Errorf("the patch's %s differs from %s at byte %d: update the patch from the script", key, healthScriptPath, firstDifference(got, script))
	}

	argocdCM := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: "argocd", Labels: map[string]string{"app.kubernetes.io/part-of": "argocd"}},
		Data:       map[string]string{"timeout.reconciliation": "180s", healthKeyPrefix + "cert-manager.io_Certificate": "return {}"},
	}
	original, err := json.Marshal(argocdCM)
	if err != nil {
		t.Fatal(err)
	}
	patchJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patchJSON, corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	var result corev1.ConfigMap
	if err := json.Unmarshal(merged, &result); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{key: got}
	for k, v := range argocdCM.Data {
		want[k] = v
	}
	if len(result.Data) != len(want) {
		t.Errorf("the patched argocd-cm has keys %v; want %v", slices.Sorted(maps.Keys(result.Data)), slices.Sorted(maps.Keys(want)))
	}
	if result.Namespace != "argocd" {
		t.Errorf("the patched argocd-cm is in namespace %q; want its own, argocd", result.Namespace)
	}
	if result.Labels["app.kubernetes.io/part-of"] != "argocd" {
		t.Errorf("the patched argocd-cm has labels %v; want its own kept (app.kubernetes.io/part-of: argocd)", result.Labels)
	}
	for k, v := range want {
		if result.Data[k] != v {
			t.Errorf("the patched argocd-cm's %s is not the one it should keep or set (%d bytes, want %d)", k, len(result.Data[k]), len(v))
		}
	}
}

// The patch applies with kustomize too, as its header says: listed under patches: next to Argo
// CD's manifests, in a kustomization that sets their namespace.
func TestArgoCDConfigMapPatchWithKustomize(t *testing.T) {
	script := readScript(t)
	raw, err := os.ReadFile(cmPatchPath)
	if err != nil {
		t.Fatal(err)
	}
	fs := filesys.MakeFsInMemory()
	for name, content := range map[string]string{
		"/argocd/kustomization.yaml": "namespace: argocd\nresources:\n- install.yaml\npatches:\n- path: argocd-cm-patch.yaml\n",
		// The argocd-cm of Argo CD's install.yaml, without a namespace.
		"/argocd/install.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n  labels:\n    app.kubernetes.io/name: argocd-cm\n    app.kubernetes.io/part-of: argocd\n",
		"/argocd/argocd-cm-patch.yaml": string(raw),
	} {
		if err := fs.WriteFile(name, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/argocd")
	if err != nil {
		t.Fatal(err)
	}
	if resources.Size() != 1 {
		t.Fatalf("kustomize built %d objects, want argocd-cm alone", resources.Size())
	}
	cm := resources.Resources()[0]
	data := cm.GetDataMap()
	if cm.GetNamespace() != "argocd" {
		t.Errorf("kustomize built argocd-cm in %q; want argocd", cm.GetNamespace())
	}
	if cm.GetLabels()["app.kubernetes.io/part-of"] != "argocd" {
		t.Errorf("kustomize built argocd-cm with labels %v; want app.kubernetes.io/part-of: argocd", cm.GetLabels())
	}
	if len(data) != 1 {
		t.Errorf("kustomize built argocd-cm with keys %v; want the health check's alone", slices.Sorted(maps.Keys(data)))
	}
	if data[healthKeyPrefix+"nodemaint.dev_NodeMaintenance"] != script {
		t.Errorf("kustomize built argocd-cm without the health check script under %snodemaint.dev_NodeMaintenance", healthKeyPrefix)
	}
}

func firstDifference(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
