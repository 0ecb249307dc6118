package invariants

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/controller/node/nodedecide"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	ernames "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// The act checks judge what nodemaint-controller itself did to pods, read from the API server's
// audit log (Options.AuditLog): the log names the user of every request, so a pod deleted by
// the ReplicaSet controller (the Deployment responder's surge scaling down) is not nodemaint's,
// and one evicted by nodemaint's ServiceAccount is. Every act of that user is one of
//
//   - an ask: a pods/status write that sets the EvacuationRequest condition True with reason
//     NodeMaintenance, or an EvictionRequest of requester nodemaint.dev/node-maintenance created
//     (or set back to intent Eviction);
//   - an eviction: a pods/eviction create that succeeded (a 429 is no eviction);
//   - a deletion: a pods delete that succeeded;
//
// and is judged against
//
//   - the node's cordon, also read from the audit log: every write of a node (by anyone) whose
//     body sets or clears spec.unschedulable and that succeeded or failed with a server error (a
//     504 may have been applied: its client, a killed leader, went away), stamped with the time
//     the API server completed it. An act must be received after a cordon completed (KindNotCordoned). The
//     audit log orders the two writes itself, to the microsecond, so a controller that asks in
//     the same reconcile before it cordons is caught and one that cordons first is never
//     flagged, whatever the watches' lag. A node cordoned before the log begins counts as
//     cordoned from the start when the watch saw it so.
//   - the NodeMaintenances that drain the pod's node (drain true, not being deleted, their
//     nodeSelector selecting the node), from the watch, in every version seen within
//     maintenanceSlack of the act: the watch and the controller's cache both lag the API server,
//     so a version that allows the act anywhere in that window allows it (a defect within a
//     second of a spec change is not seen; no spec change raises a false alarm).
//     An eviction or deletion needs a maintenance that is neither SignalOnly nor unusable
//     (SpecValid False for its generation, or spec.Problems()) (KindSignalOnly); of those, one
//     that does not skip the pod (its spec.podSelector does not select it, the pod label
//     nodemaint.dev/drain: skip under drainLabelPolicy Honor, or the first DrainRule matching
//     the pod and node says Skip) (KindSkippedPod); a
//     deletion moreover one with drainTimeoutAction Delete whose drainTimeout has run since the
//     node's drain started (the first ask of a pod on the node since its last cordon) and whose
//     evacuationResponseTimeout has run since the pod was first asked (KindDeletionNotDue).
//     Acts on a pod no maintenance drains are judged only for the cordon: they may be the
//     Eviction controller's work for another requester's EvictionRequest (an eviction of a pod
//     another requester asked for is not judged at all). An eviction needs moreover a grace
//     period no longer than its maintenances allow (KindGracePeriod).
//   - for an ask, the NodeMaintenances that select the pod's node around it, draining it or not
//     (a drain switched on as the controller asks is seen late): one of them must not skip the
//     pod (KindSkippedPod), and for an EvictionRequest, one that does not skip it must be neither
//     SignalOnly nor unusable (KindSignalOnly): an EvictionRequest asks for an eviction, which any
//     Eviction controller but nodemaint's own carries out.
//   - for a node write of nodemaint's that sets an autoscaler annotation, a maintenance cordoning
//     the node around it that holds autoscalers (KindAutoscalers).
//
// Every act is judged settle after the API server completed it, in the order of completion, so
// the watches have delivered the pods, nodes and maintenances of its time; while a watch gap is
// open the judging waits for the relists (the audit log has no gaps). Acts received before the
// checker started are read, for the history of cordons and asks, but not judged.

// Kinds of Violation of the act checks.
const (
	// KindNotCordoned: nodemaint asked a pod to move, evicted or deleted it while its node was not
	// cordoned (promise 1).
	KindNotCordoned = "NotCordoned"
	// KindSignalOnly: nodemaint evicted or deleted a pod while every maintenance draining its
	// node was SignalOnly or had a spec it cannot use (promise 2).
	KindSignalOnly = "SignalOnlyOrUnusableSpec"
	// KindSkippedPod: nodemaint evicted or deleted a pod that every maintenance draining its
	// node skips (promise 4).
	KindSkippedPod = "SkippedPod"
	// KindDeletionNotDue: nodemaint deleted a pod without a maintenance that asked for deletion
	// (drainTimeoutAction Delete), before the node's drainTimeout, or before the pod's response
	// timeout (promises 3 and 4).
	KindDeletionNotDue = "DeletionNotDue"
	// KindGracePeriod: nodemaint evicted or deleted a pod with a longer grace period than the
	// maintenances it is for allow (spec.evictionGracePeriodSeconds; promises 4 and 5).
	KindGracePeriod = "GracePeriod"
	// KindAutoscalers: nodemaint set an autoscaler annotation on a node that no maintenance
	// cordoning it holds autoscalers for (spec.autoscalers Ignore, or none cordons it).
	KindAutoscalers = "Autoscalers"
)

// Act kinds, as Violation.Act names them.
const (
	actAsk    = "ask"
	actEvict  = "evict"
	actDelete = "delete"
	// actHold: a node write that set an autoscaler annotation.
	actHold = "hold autoscalers"
)

const (
	// settle is how long after the API server completed an act the checker judges it: the
	// watches deliver the objects of its time by then.
	settle = 2 * time.Second
	// maintenanceSlack is how far around an act a maintenance's version counts (see above).
	maintenanceSlack = 2 * time.Second
	// timingSlack absorbs the one-second resolution of the timestamps a controller counts its
	// timeouts from (a condition's lastTransitionTime).
	timingSlack = 2 * time.Second
	// goneRetention is how long a deleted pod is kept for the judging of the acts on it.
	goneRetention = 2 * time.Minute
)

// auditEvent is one line of the API server's audit log (audit.k8s.io/v1 Event), the fields the
// checker reads.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int32 `json:"code"`
	} `json:"responseStatus"`
	RequestObject            json.RawMessage  `json:"requestObject"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime `json:"stageTimestamp"`
}

// record is one audit entry the checker keeps: a node's cordon mark or an act of nodemaint's.
type record struct {
	// received and completed are the request's audit timestamps.
	received, completed time.Time
	// node, cordoned, known: a write of node that set (or cleared) spec.unschedulable; known is
	// false when the body could not be read (counted as a cordon, to raise no false alarm).
	node            string
	cordoned, known bool
	// act, pod: an act of nodemaint's on the pod (namespace/name); uid, when the request named it
	// (a precondition, or the metadata of a status patch), is the pod's UID: the very pod acted
	// on, not a later one of the same name.
	act, pod, uid string
	// other: the pod has an EvictionRequest of another requester.
	other bool
	// viaRequest: the ask is an EvictionRequest of nodemaint's, which any Eviction controller
	// carries through to an eviction.
	viaRequest bool
	// grace is the grace period an eviction or deletion asked for (nil: the pod's own).
	grace *int64
	// held: a write of nodemaint's that set an autoscaler annotation on node held.
	held string
	// machine: a write of nodemaint's that released its pre-drain hook from the Machine
	// (namespace/name; machines.go).
	machine string
	id      string
}

// cordonMark is a node's spec.unschedulable from a time on.
type cordonMark struct {
	at       time.Time
	cordoned bool
}

// nmVersion is a NodeMaintenance as the watch saw it from seen on; nm is nil once deleted.
type nmVersion struct {
	seen     time.Time
	nm       *nodemaintv1alpha1.NodeMaintenance
	selector *nodeaffinity.NodeSelector
	unusable bool
	// drainSince is when the run of versions that drain the same nodes as this one began (its
	// own seen when the previous version drained others, or none): the history keeps a minute
	// of versions, and a maintenance drains for longer.
	drainSince time.Time
}

// drainsAsBefore reports whether the version drains the same nodes as the one before it: both
// drain, neither deleted, with the same node selector.
func (v nmVersion) drainsAsBefore(prev nmVersion) bool {
	return v.nm != nil && prev.nm != nil && v.nm.Spec.Drain && prev.nm.Spec.Drain &&
		v.nm.DeletionTimestamp == nil && prev.nm.DeletionTimestamp == nil &&
		equality.Semantic.DeepEqual(v.nm.Spec.NodeSelector, prev.nm.Spec.NodeSelector)
}

// acts is the state of the act checks; nil without an audit log.
type acts struct {
	// user is the controller's username, as the audit log names it.
	user string
	// from: acts received before it are recorded, not judged.
	from time.Time

	pending []record
	// cordons are the nodes' cordon marks, in order; initial the nodes' spec.unschedulable when
	// the watch first saw them.
	cordons map[string][]cordonMark
	initial map[string]bool
	// asks are the times nodemaint asked each pod (namespace/name) and the pods of each node;
	// uidAsks those of each pod UID, where the ask named it: a pod recreated under the same name
	// (a StatefulSet's) is not taken as asked when its predecessor was.
	asks, nodeAsks, uidAsks map[string][]time.Time
	// others: pods another requester's EvictionRequest asked for. requestPods: the pod of each
	// EvictionRequest (namespace/name).
	others      map[string]bool
	requestPods map[string]string

	nodes      map[string]*corev1.Node
	namespaces map[string]map[string]string
	nms        map[string][]nmVersion
	rules      map[string]*nodemaintv1alpha1.DrainRule
	// gone are the pods of each key deleted (or replaced by a pod of a new UID) lately, oldest
	// first, for the acts on them still to judge: a StatefulSet's pod can go and come back more
	// than once before an act on the first is judged.
	gone map[string][]gonePod
	// judged counts the acts judged.
	judged int
	// held are the budget and Deployment violations of pods that left, until holdFor tells
	// whether their leaving was a deletion of nodemaint's that a maintenance's drainTimeoutAction
	// Delete allowed (excused: that bypasses budgets by design, promise 4); excused counts those.
	held    []heldViolation
	excused map[string]time.Time
	// outcomes says, per pod, how nodemaint's last act on it was judged, for a held violation
	// that is released to say why its deletion did not excuse it.
	outcomes map[string]string
	// excusedViolations counts the held violations excused.
	excusedViolations int
}

// heldViolation is a violation held since at.
type heldViolation struct {
	v  Violation
	at time.Time
}

// holdFor is how long a budget or Deployment violation is held for the deletion that may excuse
// it to be read from the audit log and judged.
const holdFor = settle + 5*time.Second

type gonePod struct {
	pod *corev1.Pod
	at  time.Time
}

func newActs(user string, from time.Time) *acts {
	return &acts{
		user: user, from: from,
		cordons: map[string][]cordonMark{}, initial: map[string]bool{},
		asks: map[string][]time.Time{}, nodeAsks: map[string][]time.Time{}, uidAsks: map[string][]time.Time{},
		others: map[string]bool{}, requestPods: map[string]string{},
		nodes: map[string]*corev1.Node{}, namespaces: map[string]map[string]string{},
		nms: map[string][]nmVersion{}, rules: map[string]*nodemaintv1alpha1.DrainRule{},
		gone: map[string][]gonePod{}, excused: map[string]time.Time{}, outcomes: map[string]string{},
	}
}

// releaseHeld reports the held violations held for holdFor before now (all of them with all)
// that no due deletion excused, and drops the excused ones.
func (s *state) releaseHeld(now time.Time, all bool) {
	a := s.acts
	n := 0
	for _, h := range a.held {
		if _, ok := a.excused[h.v.Pod]; ok {
			a.excusedViolations++
			continue
		}
		if !all && now.Sub(h.at) < holdFor {
			a.held[n] = h
			n++
			continue
		}
		if o := a.outcomes[h.v.Pod]; o != "" {
			h.v.Detail = "nodemaint's last act on the pod: " + o
		} else {
			h.v.Detail = "no act of nodemaint's on the pod was judged"
		}
		s.emit(h.v)
	}
	a.held = a.held[:n]
}

// auditLine parses one line of the audit log and records what the act checks need of it; of the
// log of the Machines' cluster (machinesOnly), only the Machines' writes.
func (s *state) auditLine(line []byte, machinesOnly bool) error {
	var e auditEvent
	if err := json.Unmarshal(line, &e); err != nil {
		return err
	}
	if machinesOnly && (e.ObjectRef == nil || !machineWriteOf(&e)) {
		return nil
	}
	s.auditEvent(&e)
	return nil
}

// auditEvent records one audit entry: a cordon mark, an act of nodemaint's, or another
// requester's EvictionRequest.
func (s *state) auditEvent(e *auditEvent) {
	a := s.acts
	if a == nil || e.Stage != "ResponseComplete" || e.ObjectRef == nil || e.ResponseStatus == nil {
		return
	}
	ref := e.ObjectRef
	nodeWrite := ref.APIGroup == "" && ref.Resource == "nodes" && ref.Subresource == "" &&
		(e.Verb == "create" || e.Verb == "update" || e.Verb == "patch")
	// A write that failed with a server error (a 504 when the request's client went away, as a
	// killed leader's does) may still have been applied: a node's such write counts as a cordon
	// mark, so that an ask after a cordon that took effect raises no false alarm. Acts count only
	// when they succeeded.
	// So may an eviction or a deletion of nodemaint's: a pod that leaves by one answered 504 is
	// judged as evicted or deleted by it (a due deletion excuses its budget's breach).
	podAct := e.User.Username == a.user && ref.APIGroup == "" && ref.Resource == "pods" &&
		(ref.Subresource == "eviction" && e.Verb == "create" || ref.Subresource == "" && e.Verb == "delete")
	// So may a release of the pre-drain hook: the controller decided to release it.
	machineWrite := machineWriteOf(e)
	switch code := e.ResponseStatus.Code; {
	case code >= 200 && code < 300:
	case code >= 500 && (nodeWrite || podAct || machineWrite):
	default:
		return
	}
	r := record{received: e.RequestReceivedTimestamp.Time, completed: e.StageTimestamp.Time, id: e.AuditID}
	ours := e.User.Username == a.user
	switch {
	case machineWrite:
		if !ours || s.capi == nil || !releasesHookIn(e.Verb, e.RequestObject) {
			return
		}
		r.act, r.machine = actRelease, key(ref.Namespace, ref.Name)
	case nodeWrite:
		if ours && e.Verb == "patch" && e.ResponseStatus.Code < 300 && autoscalersHeldIn(e.RequestObject) {
			h := r
			h.act, h.held = actHold, ref.Name
			a.pending = append(a.pending, h)
		}
		cordoned, mentioned, known := unschedulableIn(e.Verb, e.RequestObject)
		if !mentioned {
			return
		}
		r.node, r.cordoned, r.known = ref.Name, cordoned, known
	case ref.APIGroup == "lifecycle.k8s.io" && ref.Resource == "evictionrequests" && ref.Subresource == "":
		var er struct {
			Spec struct {
				Requester string `json:"requester"`
				Intent    string `json:"intent"`
				Target    struct {
					Pod *struct {
						Name string `json:"name"`
						UID  string `json:"uid"`
					} `json:"pod"`
				} `json:"target"`
			} `json:"spec"`
		}
		if json.Unmarshal(e.RequestObject, &er) != nil {
			return
		}
		rk := key(ref.Namespace, ref.Name)
		if p := er.Spec.Target.Pod; p != nil && p.Name != "" {
			a.requestPods[rk] = key(ref.Namespace, p.Name)
		}
		pod := a.requestPods[rk]
		if pod == "" || er.Spec.Intent != "Eviction" {
			return
		}
		switch {
		case er.Spec.Requester != "" && er.Spec.Requester != ernames.Requester:
			r.pod, r.other = pod, true
		case ours && (er.Spec.Requester == ernames.Requester || e.Verb != "create"):
			r.pod, r.act, r.viaRequest = pod, actAsk, true
			if p := er.Spec.Target.Pod; p != nil {
				r.uid = p.UID
			}
		default:
			return
		}
	case !ours || ref.APIGroup != "" || ref.Resource != "pods":
		return
	case ref.Subresource == "status" && (e.Verb == "patch" || e.Verb == "update") && asksIn(e.RequestObject):
		r.act = actAsk
	case ref.Subresource == "eviction" && e.Verb == "create":
		r.act, r.grace = actEvict, graceIn(e.RequestObject)
	case ref.Subresource == "" && e.Verb == "delete":
		r.act, r.grace = actDelete, graceIn(e.RequestObject)
	default:
		return
	}
	if r.act != "" && r.pod == "" && r.machine == "" {
		r.pod = key(ref.Namespace, ref.Name)
		r.uid = uidIn(e.RequestObject)
	}
	a.pending = append(a.pending, r)
}

// unschedulableIn reads what a node write does to spec.unschedulable: mentioned is false when
// it leaves it alone, known false when the body could not be read.
func unschedulableIn(verb string, body json.RawMessage) (cordoned, mentioned, known bool) {
	if len(body) == 0 {
		return false, true, false
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false, true, false
	}
	switch v := v.(type) {
	case []any: // a JSON patch
		for _, op := range v {
			o, _ := op.(map[string]any)
			if o == nil || o["path"] != "/spec/unschedulable" {
				continue
			}
			switch o["op"] {
			case "remove":
				cordoned, mentioned = false, true
			case "add", "replace":
				b, _ := o["value"].(bool)
				cordoned, mentioned = b, true
			}
		}
		return cordoned, mentioned, true
	case map[string]any:
		spec, _ := v["spec"].(map[string]any)
		u, has := spec["unschedulable"]
		if verb != "patch" {
			// A create or update writes the whole node: an absent field is false.
			b, _ := u.(bool)
			return b, true, true
		}
		if !has {
			return false, false, true
		}
		b, _ := u.(bool)
		return b, true, true
	}
	return false, true, false
}

// uidIn returns the pod UID a request on a pod names: the UID precondition of an Eviction
// (deleteOptions.preconditions.uid) or of a deletion's DeleteOptions (preconditions.uid), the
// metadata.uid of a merge patch, or the value of a JSON patch's test of /metadata/uid. Empty when
// it names none.
func uidIn(body json.RawMessage) string {
	var v any
	if len(body) == 0 || json.Unmarshal(body, &v) != nil {
		return ""
	}
	str := func(m map[string]any, path ...string) string {
		for _, p := range path[:len(path)-1] {
			m, _ = m[p].(map[string]any)
		}
		u, _ := m[path[len(path)-1]].(string)
		return u
	}
	switch v := v.(type) {
	case map[string]any:
		return cmp.Or(str(v, "deleteOptions", "preconditions", "uid"), str(v, "preconditions", "uid"), str(v, "metadata", "uid"))
	case []any:
		for _, op := range v {
			if o, _ := op.(map[string]any); o != nil && o["op"] == "test" && o["path"] == "/metadata/uid" {
				u, _ := o["value"].(string)
				return u
			}
		}
	}
	return ""
}

// graceIn returns the grace period an eviction (deleteOptions.gracePeriodSeconds) or a deletion
// (gracePeriodSeconds) asks for; nil when it names none (the pod's own).
func graceIn(body json.RawMessage) *int64 {
	var v struct {
		GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
		DeleteOptions      *struct {
			GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
		} `json:"deleteOptions"`
	}
	if len(body) == 0 || json.Unmarshal(body, &v) != nil {
		return nil
	}
	if v.DeleteOptions != nil {
		return v.DeleteOptions.GracePeriodSeconds
	}
	return v.GracePeriodSeconds
}

// autoscalersHeldIn reports whether a node's merge patch sets an autoscaler annotation
// (nodedecide.AutoscalerAnnotations) to "true": nodemaint patches only what changes, so the
// patch that carries it is the one that sets it.
func autoscalersHeldIn(body json.RawMessage) bool {
	var v struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if len(body) == 0 || json.Unmarshal(body, &v) != nil {
		return false
	}
	for _, k := range nodedecide.AutoscalerAnnotations {
		if a := v.Metadata.Annotations[k]; a != nil && *a == "true" {
			return true
		}
	}
	return false
}

// asksIn reports whether a pods/status write sets nodemaint's request: a condition
// EvacuationRequest, status True, reason NodeMaintenance, anywhere in the body but the value of a
// JSON patch's test or remove operation.
func asksIn(body json.RawMessage) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			if op, _ := v["op"].(string); op == "test" || op == "remove" {
				return false
			}
			if v["type"] == string(evacuation.Request) && v["status"] == string(corev1.ConditionTrue) &&
				v["reason"] == evacuation.ReasonNodeMaintenance {
				return true
			}
			for _, x := range v {
				if walk(x) {
					return true
				}
			}
		case []any:
			return slices.ContainsFunc(v, walk)
		}
		return false
	}
	return walk(v)
}

// judgeAudit judges, in the order the API server completed them, the records completed settle
// before now; nothing while a watch gap is open.
func (s *state) judgeAudit(now time.Time) {
	a := s.acts
	if a == nil || s.gap != nil {
		return
	}
	sort.SliceStable(a.pending, func(i, j int) bool { return a.pending[i].completed.Before(a.pending[j].completed) })
	n := 0
	for _, r := range a.pending {
		if r.completed.After(now.Add(-settle)) {
			break
		}
		n++
		s.judge(r)
	}
	a.pending = slices.Delete(a.pending, 0, n)
	s.judgeMachineNodes(now)
	s.releaseHeld(now, false)
	for k, t := range a.excused {
		if now.Sub(t) > goneRetention {
			delete(a.excused, k)
		}
	}
	for k, gs := range a.gone {
		gs = slices.DeleteFunc(gs, func(g gonePod) bool { return now.Sub(g.at) > goneRetention })
		if len(gs) == 0 {
			delete(a.gone, k)
		} else {
			a.gone[k] = gs
		}
	}
}

// judge applies one record: a cordon mark is noted, an act is noted and judged.
func (s *state) judge(r record) {
	a := s.acts
	switch {
	case r.node != "":
		a.cordons[r.node] = append(a.cordons[r.node], cordonMark{at: r.completed, cordoned: r.cordoned || !r.known})
		return
	case r.other:
		a.others[r.pod] = true
		return
	case r.act == actHold:
		s.judgeHold(r)
		return
	case r.act == actRelease:
		s.judgeRelease(r)
		return
	}
	pod := s.podAt(r.pod, r.uid, r.received)
	if r.act == actAsk {
		a.asks[r.pod] = append(a.asks[r.pod], r.completed)
		if r.uid != "" {
			a.uidAsks[r.uid] = append(a.uidAsks[r.uid], r.completed)
		}
		if pod != nil && pod.Spec.NodeName != "" {
			a.nodeAsks[pod.Spec.NodeName] = append(a.nodeAsks[pod.Spec.NodeName], r.completed)
		}
	}
	outcome := func(what string) {
		a.outcomes[r.pod] = fmt.Sprintf("%s at %s (audit %s): %s", r.act, r.received.UTC().Format(time.RFC3339Nano), r.id, what)
	}
	if r.received.Before(a.from) || pod == nil || pod.Spec.NodeName == "" {
		outcome(fmt.Sprintf("not judged: before the checker started, or the pod (UID %q) not known or not on a node (known: %s)", r.uid, s.knownAs(r.pod)))
		return
	}
	if r.act == actEvict && a.others[r.pod] {
		return // the Eviction controller's work for another requester
	}
	a.judged++
	nodeName := pod.Spec.NodeName
	v := Violation{Time: r.received, Pod: r.pod, Object: "node/" + nodeName, Act: r.act}
	if !s.cordonedAt(nodeName, r.received) {
		v.Kind, v.Detail = KindNotCordoned, fmt.Sprintf("node %s not cordoned when the request was received (audit %s)", nodeName, r.id)
		s.record(v)
		return
	}
	node := a.nodes[nodeName]
	if r.act == actAsk {
		s.judgeAsk(r, v, pod, node)
		return
	}
	draining := s.drainingAt(node, r.received)
	if len(draining) == 0 {
		outcome("not judged: no maintenance seen draining node " + nodeName)
		return
	}
	// The maintenances that may evict: neither SignalOnly nor unusable; that may delete: those
	// with drainTimeoutAction Delete. Of those, the ones that do not skip the pod.
	var usable, allowed []nmVersion
	for _, m := range draining {
		if !m.unusable && m.nm.Spec.EvictionPolicy != nodemaintv1alpha1.EvictionPolicySignalOnly {
			usable = append(usable, m)
		}
	}
	mayAct := usable
	if r.act == actDelete {
		mayAct = nil
		for _, m := range usable {
			if m.nm.Spec.DrainTimeoutAction == nodemaintv1alpha1.DrainTimeoutActionDelete {
				mayAct = append(mayAct, m)
			}
		}
	}
	for _, m := range mayAct {
		if !s.skips(m.nm, pod, node) {
			allowed = append(allowed, m)
		}
	}
	switch {
	case len(usable) == 0:
		v.Kind, v.Object = KindSignalOnly, names(draining)
		v.Detail = "every maintenance draining node " + nodeName + " is SignalOnly or has a spec nodemaint cannot use"
	case len(mayAct) == 0:
		v.Kind, v.Object = KindDeletionNotDue, names(usable)
		v.Detail = "no maintenance draining node " + nodeName + " has drainTimeoutAction Delete"
	case len(allowed) == 0:
		v.Kind, v.Object = KindSkippedPod, names(mayAct)
		v.Detail = "every maintenance draining node " + nodeName + " that may " + r.act + " it skips the pod"
	case r.act == actDelete:
		why := s.deletionDue(allowed, r.pod, pod, nodeName, r.received)
		if why == "" {
			outcome("due, by " + names(allowed))
			a.excused[r.pod] = r.received
			if why = s.graceAllowed(r, pod, node, allowed); why == "" {
				return
			}
			v.Kind, v.Object, v.Detail = KindGracePeriod, names(allowed), why
			break
		}
		v.Kind, v.Object, v.Detail = KindDeletionNotDue, names(allowed), why
	default:
		why := s.graceAllowed(r, pod, node, allowed)
		if why == "" {
			return
		}
		v.Kind, v.Object, v.Detail = KindGracePeriod, names(allowed), why
	}
	s.record(v)
}

// judgeAsk judges an ask once the node was cordoned: some maintenance selecting the node (around
// the ask, draining it or not, so that a drain switched on as the controller asks raises no
// false alarm) does not skip the pod (its spec.podSelector, label policy and the DrainRules:
// KindSkippedPod); and an ask through an EvictionRequest, an ask for the pod's eviction, has
// such a maintenance that would evict it: neither SignalOnly nor unusable (KindSignalOnly). Under
// another Eviction controller than nodemaint's own, nothing holds an EvictionRequest back.
func (s *state) judgeAsk(r record, v Violation, pod *corev1.Pod, node *corev1.Node) {
	var selecting, evicting []nmVersion
	all := s.selectingAt(node, r.received)
	for _, m := range all {
		if s.skips(m.nm, pod, node) {
			continue
		}
		selecting = append(selecting, m)
		if !m.unusable && m.nm.Spec.EvictionPolicy != nodemaintv1alpha1.EvictionPolicySignalOnly {
			evicting = append(evicting, m)
		}
	}
	switch {
	case len(all) == 0:
		return // no maintenance seen on the node: judged for the cordon only
	case len(selecting) == 0:
		v.Kind, v.Object = KindSkippedPod, names(all)
		v.Detail = "every maintenance selecting node " + node.Name + " skips the pod (podSelector, label policy, DrainRules): nothing asks it to move"
	case r.viaRequest && len(evicting) == 0:
		v.Kind, v.Object = KindSignalOnly, names(selecting)
		v.Detail = "an EvictionRequest asks for the eviction of a pod no maintenance on node " + node.Name +
			" would evict (every one that drains it is SignalOnly or has a spec nodemaint cannot use): any Eviction controller but nodemaint's own evicts it"
	default:
		return
	}
	s.record(v)
}

// selectingAt returns the versions of the maintenances that select the node within
// maintenanceSlack of at, whether they drain it or not, and are not being deleted.
func (s *state) selectingAt(node *corev1.Node, at time.Time) []nmVersion {
	if node == nil {
		return nil
	}
	var out []nmVersion
	for _, name := range sortedKeysOf(s.acts.nms) {
		hist := s.acts.nms[name]
		for i, v := range hist {
			if v.nm == nil || v.nm.DeletionTimestamp != nil || v.selector == nil || !v.selector.Match(node) {
				continue
			}
			if v.seen.After(at.Add(maintenanceSlack)) {
				continue
			}
			if i+1 < len(hist) && hist[i+1].seen.Before(at.Add(-maintenanceSlack)) {
				continue
			}
			out = append(out, v)
		}
	}
	return out
}

// graceAllowed returns "" when the eviction's or deletion's grace period is no longer than the
// maintenances it is for allow, else why not. A maintenance allows its
// spec.evictionGracePeriodSeconds, or the pod's own terminationGracePeriodSeconds when it sets
// none (an eviction is one act for all its maintenances: the shortest wins, see
// nodedecide.gracePeriod). An eviction is for every maintenance of allowed (evicting and not
// skipping the pod) that was so steadily around it (its versions within maintenanceSlack all in
// allowed, and draining the node since maintenanceSlack before): its grace is at most the
// shortest of theirs (a maintenance's versions counting at their longest; a rollout, or one that
// honors the pod's drain label, left out). A deletion is for the
// maintenances whose drainTimeout ran, which the checker does not tell apart: its grace is at
// most the longest of allowed.
func (s *state) graceAllowed(r record, pod *corev1.Pod, node *corev1.Node, allowed []nmVersion) string {
	own := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		own = *g
	}
	got := own
	if r.grace != nil {
		got = *r.grace
	}
	wants := map[string]int64{}
	unsteady := map[string]bool{}
	for _, m := range allowed {
		want := own
		if g := m.nm.Spec.EvictionGracePeriodSeconds; g != nil {
			want = *g
		}
		if w, ok := wants[m.nm.Name]; !ok || want > w {
			wants[m.nm.Name] = want
		}
	}
	if r.act == actEvict {
		// Where the checker cannot tell whether the controller counted a maintenance among the
		// eviction's (a rollout's turn on the node; a labelled pod, drained only by the
		// maintenances that ignore the label and only when the plan did), it leaves it out.
		labelled := pod.Labels[nodemaintv1alpha1.DrainLabel] == nodemaintv1alpha1.DrainLabelSkip ||
			pod.Labels[nodemaintv1alpha1.DrainLabel] == nodemaintv1alpha1.DrainLabelWaitCompleted
		for _, m := range allowed {
			if m.nm.Spec.Rollout != nil || labelled && m.nm.Spec.DrainLabelPolicy != nodemaintv1alpha1.DrainLabelPolicyIgnore {
				unsteady[m.nm.Name] = true
			}
		}
		for _, m := range s.drainingAt(node, r.received) {
			if !slices.ContainsFunc(allowed, func(a nmVersion) bool { return a.nm == m.nm }) {
				unsteady[m.nm.Name] = true
			}
		}
		for name := range wants {
			if since := s.drainingSince(name, node, r.received); since.IsZero() || since.After(r.received.Add(-maintenanceSlack)) {
				unsteady[name] = true
			}
		}
	}
	var bound int64
	var by []string
	for _, name := range sortedKeysOf(wants) {
		w := wants[name]
		switch {
		case unsteady[name]:
			continue
		case len(by) == 0, r.act == actEvict && w < bound, r.act == actDelete && w > bound:
			bound, by = w, []string{name}
		case w == bound:
			by = append(by, name)
		}
	}
	if len(by) == 0 || got <= bound {
		return ""
	}
	asked := "the pod's own"
	if r.grace != nil {
		asked = "asked"
	}
	return fmt.Sprintf("grace period %ds (%s), longer than the %ds NodeMaintenance/%s allows (spec.evictionGracePeriodSeconds, else the pod's own %ds)",
		got, asked, bound, strings.Join(by, ","), own)
}

// judgeHold judges a write that set an autoscaler annotation on a node: some maintenance
// cordoning the node around it holds autoscalers (spec.autoscalers not Ignore), else
// KindAutoscalers.
func (s *state) judgeHold(r record) {
	a := s.acts
	node := a.nodes[r.held]
	if r.received.Before(a.from) || node == nil {
		return
	}
	a.judged++
	var cordoning []nmVersion
	for _, m := range s.selectingAt(node, r.received) {
		if !m.nm.Spec.Cordon {
			continue
		}
		cordoning = append(cordoning, m)
		if m.nm.Spec.Autoscalers != nodemaintv1alpha1.AutoscalerPolicyIgnore {
			return
		}
	}
	v := Violation{Time: r.received, Kind: KindAutoscalers, Act: r.act, Object: "node/" + r.held, Pod: "-",
		Detail: fmt.Sprintf("no maintenance cordoning node %s holds autoscalers (audit %s)", r.held, r.id)}
	if len(cordoning) > 0 {
		v.Object = names(cordoning)
		v.Detail = fmt.Sprintf("every maintenance cordoning node %s says spec.autoscalers Ignore (audit %s)", r.held, r.id)
	}
	s.record(v)
}

// deletionDue returns "" when one of the maintenances allowed the deletion at, else why none did.
func (s *state) deletionDue(ms []nmVersion, podKey string, pod *corev1.Pod, nodeName string, at time.Time) string {
	a := s.acts
	asked, ok := s.firstAsk(podKey, pod)
	if !ok {
		return "the pod was never asked to move"
	}
	// The node's last cordon before the deletion; each maintenance's drain of the node starts
	// once the node is cordoned and the maintenance drains it (drainingSince). Not the first ask
	// after them: asks follow that start by as long as writing them takes (10s seen on a loaded
	// machine), and the controller counts from the start.
	var cordoned time.Time
	prev := a.initial[nodeName]
	for _, m := range a.cordons[nodeName] {
		if !m.at.Before(at) {
			break
		}
		if m.cordoned && !prev {
			cordoned = m.at
		}
		prev = m.cordoned
	}
	why := "no maintenance draining the node has a drainTimeout"
	for _, m := range ms {
		spec := m.nm.Spec
		drainStart := cordoned
		if since := s.drainingSince(m.nm.Name, a.nodes[nodeName], at).Add(-maintenanceSlack); since.After(drainStart) {
			drainStart = since
		}
		if spec.DrainTimeout == nil || !spec.DrainTimeout.Valid() {
			continue
		}
		response := nodemaintv1alpha1.DefaultEvacuationResponseTimeout
		if r := spec.EvacuationResponseTimeout; r != nil && r.Valid() {
			response = r.Duration
		}
		switch {
		case at.Sub(drainStart)+timingSlack < spec.DrainTimeout.Duration:
			why = fmt.Sprintf("%s: the node's drain started %s before the deletion (cordoned at %s, drained by the maintenance since %s), drainTimeout %s",
				m.nm.Name, at.Sub(drainStart).Round(time.Millisecond), cordoned.UTC().Format(time.RFC3339Nano),
				drainStart.Add(maintenanceSlack).UTC().Format(time.RFC3339Nano), spec.DrainTimeout.Duration)
		case at.Sub(asked)+timingSlack < response:
			why = fmt.Sprintf("%s: the pod was first asked %s before the deletion, evacuationResponseTimeout %s",
				m.nm.Name, at.Sub(asked).Round(time.Millisecond), response)
		default:
			return ""
		}
	}
	return why
}

// drainingSince returns since when, without a break, the named maintenance drained the node as
// the watch saw it at at: the first of the versions up to at that drain it (Drain, the node
// selected, not being deleted). Zero when the version of at does not drain it.
func (s *state) drainingSince(name string, node *corev1.Node, at time.Time) time.Time {
	hist := s.acts.nms[name]
	cur := -1
	for i, v := range hist {
		if !v.seen.After(at.Add(maintenanceSlack)) {
			cur = i
		}
	}
	drains := func(v nmVersion) bool {
		return v.nm != nil && v.nm.Spec.Drain && v.nm.DeletionTimestamp == nil && v.selector != nil && node != nil && v.selector.Match(node)
	}
	var since time.Time
	for i := cur; i >= 0 && drains(hist[i]); i-- {
		since = hist[i].drainSince
	}
	return since
}

// firstAsk returns when nodemaint first asked the pod: from the audit log, else the pod's
// EvacuationRequest condition of nodemaint's.
func (s *state) firstAsk(podKey string, pod *corev1.Pod) (time.Time, bool) {
	asks := s.acts.asks[podKey]
	if byUID := s.acts.uidAsks[string(pod.UID)]; len(byUID) > 0 {
		asks = byUID
	}
	if len(asks) > 0 {
		return slices.MinFunc(asks, func(a, b time.Time) int { return a.Compare(b) }), true
	}
	if c := evacuation.Condition(pod, evacuation.Request); c != nil && c.Status == corev1.ConditionTrue && c.Reason == evacuation.ReasonNodeMaintenance {
		return c.LastTransitionTime.Time, true
	}
	return time.Time{}, false
}

// cordonedAt reports whether the node was cordoned at t: its last cordon mark completed before
// t, else its state when the watch first saw it.
func (s *state) cordonedAt(node string, t time.Time) bool {
	cordoned := s.acts.initial[node]
	for _, m := range s.acts.cordons[node] {
		if !m.at.Before(t) {
			break
		}
		cordoned = m.cordoned
	}
	return cordoned
}

// podAt returns the pod of the key that existed at t: by its UID when the act named one (the
// live pod or one gone lately), else the live one or, when that was created after the act, the
// last one gone.
func (s *state) podAt(k, uid string, t time.Time) *corev1.Pod {
	live, gone := s.pods[k], s.acts.gone[k]
	if uid != "" {
		if live != nil && string(live.UID) == uid {
			return live
		}
		for i := len(gone) - 1; i >= 0; i-- {
			if string(gone[i].pod.UID) == uid {
				return gone[i].pod
			}
		}
		return nil
	}
	var last *corev1.Pod
	if len(gone) > 0 {
		last = gone[len(gone)-1].pod
	}
	switch {
	case live == nil:
		return last
	case last == nil:
		return live
	case live.CreationTimestamp.After(t.Add(time.Second)):
		return last // a pod of the same name created after the act
	}
	return live
}

// knownAs says what the checker knows of a key's pods, for an act it could not judge.
func (s *state) knownAs(k string) string {
	var parts []string
	describe := func(what string, p *corev1.Pod) {
		node := p.Spec.NodeName
		if node == "" {
			node = "no node"
		}
		parts = append(parts, fmt.Sprintf("%s UID %q on %s", what, p.UID, node))
	}
	if p := s.pods[k]; p != nil {
		describe("live", p)
	}
	for _, g := range s.acts.gone[k] {
		describe("gone", g.pod)
	}
	if len(parts) == 0 {
		return "no pod of that name known"
	}
	return strings.Join(parts, ", ")
}

// drainingAt returns the versions of the maintenances that drain the node within
// maintenanceSlack of at: those of selectingAt that drain.
func (s *state) drainingAt(node *corev1.Node, at time.Time) []nmVersion {
	return slices.DeleteFunc(s.selectingAt(node, at), func(v nmVersion) bool { return !v.nm.Spec.Drain })
}

// skips reports whether the maintenance leaves the pod on the node: its spec.podSelector does
// not select the pod, the pod label nodemaint.dev/drain: skip under drainLabelPolicy Honor, or
// the first DrainRule (by name) that matches the pod and node says Skip. A rule that cannot be
// evaluated (an invalid one, or a namespace not seen) ends the search with no skip, so it raises
// no false alarm; a podSelector that does not parse makes the maintenance unusable (SpecValid).
func (s *state) skips(nm *nodemaintv1alpha1.NodeMaintenance, pod *corev1.Pod, node *corev1.Node) bool {
	if nm.Spec.PodSelector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(nm.Spec.PodSelector); err == nil && !sel.Matches(labels.Set(pod.Labels)) {
			return true
		}
	}
	if nm.Spec.DrainLabelPolicy != nodemaintv1alpha1.DrainLabelPolicyIgnore {
		switch pod.Labels[nodemaintv1alpha1.DrainLabel] {
		case nodemaintv1alpha1.DrainLabelSkip:
			return true
		case nodemaintv1alpha1.DrainLabelWaitCompleted:
			return false
		}
	}
	for _, name := range sortedKeysOf(s.acts.rules) {
		match, known := s.ruleMatches(s.acts.rules[name], pod, node)
		if !known {
			return false
		}
		if match {
			return s.acts.rules[name].Spec.Drain.Behavior == nodemaintv1alpha1.DrainBehaviorSkip
		}
	}
	return false
}

func (s *state) ruleMatches(r *nodemaintv1alpha1.DrainRule, pod *corev1.Pod, node *corev1.Node) (match, known bool) {
	if c := meta.FindStatusCondition(r.Status.Conditions, nodemaintv1alpha1.ConditionValid); c != nil && c.Status == metav1.ConditionFalse {
		return false, false
	}
	sel := func(ls *metav1.LabelSelector, l map[string]string) (bool, bool) {
		if ls == nil {
			return true, true
		}
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return false, false
		}
		return s.Matches(labels.Set(l)), true
	}
	nodeMatch := len(r.Spec.Nodes) == 0
	for _, n := range r.Spec.Nodes {
		m, ok := sel(&n.Selector, node.Labels)
		if !ok {
			return false, false
		}
		nodeMatch = nodeMatch || m
	}
	if !nodeMatch {
		return false, true
	}
	for _, p := range r.Spec.Pods {
		m, ok := sel(p.Selector, pod.Labels)
		if !ok {
			return false, false
		}
		if !m {
			continue
		}
		if p.NamespaceSelector != nil {
			nsLabels, seen := s.acts.namespaces[pod.Namespace]
			if !seen {
				return false, false
			}
			if m, ok = sel(p.NamespaceSelector, nsLabels); !ok {
				return false, false
			}
		}
		if m {
			return true, true
		}
	}
	return false, true
}

// nodeMaintenance records a version of a NodeMaintenance, seen at now.
func (s *state) nodeMaintenance(nm *nodemaintv1alpha1.NodeMaintenance, deleted bool, now time.Time) {
	if s.acts == nil {
		return
	}
	v := nmVersion{seen: now}
	if !deleted {
		v.nm = nm
		if sel, err := nodeaffinity.NewNodeSelector(&nm.Spec.NodeSelector); err == nil {
			v.selector = sel
		}
		c := meta.FindStatusCondition(nm.Status.Conditions, nodemaintv1alpha1.ConditionSpecValid)
		v.unusable = len(nm.Spec.Problems()) > 0 ||
			(c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == nm.Generation)
	}
	hist := s.acts.nms[nm.Name]
	v.drainSince = now
	if len(hist) > 0 && v.drainsAsBefore(hist[len(hist)-1]) {
		v.drainSince = hist[len(hist)-1].drainSince
	}
	// Keep the versions that may still judge an act (a minute's worth), and the last.
	for len(hist) > 1 && now.Sub(hist[1].seen) > time.Minute {
		hist = hist[1:]
	}
	s.acts.nms[nm.Name] = append(hist, v)
}

// drainRule records a DrainRule.
func (s *state) drainRule(r *nodemaintv1alpha1.DrainRule, deleted bool) {
	if s.acts == nil {
		return
	}
	if deleted {
		delete(s.acts.rules, r.Name)
		return
	}
	s.acts.rules[r.Name] = r
}

// namespace records a namespace's labels, for DrainRules' namespaceSelectors.
func (s *state) namespace(ns *corev1.Namespace, deleted bool) {
	if s.acts == nil {
		return
	}
	if deleted {
		delete(s.acts.namespaces, ns.Name)
		return
	}
	s.acts.namespaces[ns.Name] = ns.Labels
}

// nodeForActs records a node for the act checks: its labels, and its cordon when first seen.
func (s *state) nodeForActs(node *corev1.Node, deleted bool) {
	a := s.acts
	if a == nil {
		return
	}
	if deleted {
		delete(a.nodes, node.Name)
		return
	}
	if _, seen := a.initial[node.Name]; !seen {
		a.initial[node.Name] = node.Spec.Unschedulable
	}
	a.nodes[node.Name] = node
}

// podGone keeps a deleted pod for the acts on it still to judge.
func (s *state) podGone(pod *corev1.Pod, now time.Time) {
	if s.acts != nil {
		k := podKey(pod)
		s.acts.gone[k] = append(s.acts.gone[k], gonePod{pod: pod, at: now})
	}
}

func names(ms []nmVersion) string {
	var out []string
	for _, m := range ms {
		if !slices.Contains(out, m.nm.Name) {
			out = append(out, m.nm.Name)
		}
	}
	return "NodeMaintenance/" + strings.Join(out, ",")
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
