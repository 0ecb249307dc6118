// Package requester is nodemaint's node drain as a requester of KEP-4563's EvictionRequest
// API (lifecycle.k8s.io/v1alpha1), purely: the drain decides as it does with pod conditions
// (nodedecide.Decide's Request and Withdraw), this package turns that into EvictionRequests to
// create, update, withdraw and delete, and reads each pod's Eviction back as its owner's answer
// (Answer), so that the drain's rules (response timeout, eviction of pods nobody answers for,
// drainTimeout) stay one and the same for both protocols.
package requester

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/pkg/evacuation"
	names "github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

const (
	// NodeLabel labels nodemaint's EvictionRequests with the node of their pod, so that the drain
	// of a node finds its own (also those of pods gone) with one selector.
	NodeLabel = "nodemaint.dev/node"
	// ReasonAnnotation holds the drain's reason (the maintenances' reason), which the pod
	// condition protocol carries in the condition's message.
	ReasonAnnotation = "nodemaint.dev/reason"
	// RequestedAnnotation is when nodemaint decided to ask (RFC 3339): the response timeout counts
	// from it, or from the request's creation if that came later (requestedAt).
	RequestedAnnotation = "nodemaint.dev/requested-at"
)

// Registered reports whether the pod names an evictionResponder of its own (spec.evictionResponders,
// set only at the pod's creation): only then does an EvictionRequest reach someone who can move it.
// A pod without one, created before its owner's responder was registered (before nodemaint was
// installed, or without config/admission/eviction-responder) or in a PodGroup, where the API forbids
// responders, would go straight to the imperative evictor: the drain asks it through the pod
// condition protocol instead, which nodemaint's Deployment responder, and any owner using
// pkg/evacuation, answers by moving it first.
func Registered(pod *corev1.Pod) bool {
	return len(pod.Spec.EvictionResponders) > 0
}

// Split divides pods into those asked through EvictionRequests (Registered) and those asked
// through the pod condition protocol.
func Split(pods []*corev1.Pod) (registered, unregistered []*corev1.Pod) {
	for _, pod := range pods {
		if Registered(pod) {
			registered = append(registered, pod)
		} else {
			unregistered = append(unregistered, pod)
		}
	}
	return registered, unregistered
}

// Observed is what the drain of one node has of the protocol: nodemaint's EvictionRequests of the
// node (NodeLabel) and the Evictions of its pods, by pod UID.
type Observed struct {
	Node      string
	Requests  []lifecyclev1alpha1.EvictionRequest
	Evictions map[types.UID]*lifecyclev1alpha1.Eviction
	// PodConditions are the Registered pods with nodemaint's pod condition (see
	// WithPodCondition), as read (not answered).
	PodConditions []*corev1.Pod
}

// WithPodCondition are the Registered pods that carry nodemaint's EvacuationRequest pod
// condition: those the drain asks through it because nothing would evict them
// (nodedecide.Decision.SignalOnly), and those asked so before (before the controller switched
// protocols, or while every maintenance draining them was SignalOnly), whose condition is
// withdrawn once they are asked through an EvictionRequest or not at all. The pods without a
// responder are asked through the condition in any case.
func WithPodCondition(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if Registered(pod) && ourCondition(pod) {
			out = append(out, pod)
		}
	}
	return out
}

func ourCondition(pod *corev1.Pod) bool {
	c := evacuation.Condition(pod, evacuation.Request)
	return c != nil && c.Reason == evacuation.ReasonNodeMaintenance
}

// ours is nodemaint's request for the pod, if any.
func (o *Observed) ours(uid types.UID) *lifecyclev1alpha1.EvictionRequest {
	for i := range o.Requests {
		r := &o.Requests[i]
		if r.Spec.Target.Pod != nil && r.Spec.Target.Pod.UID == uid && r.Spec.Requester == names.Requester {
			return r
		}
	}
	return nil
}

// Answer returns the pods as the drain sees them under this protocol: nodemaint's
// EvacuationRequest condition where nodemaint's EvictionRequest asks for the pod's eviction
// (message: its reason; since: when nodemaint asked), and EvacuationInitiated from the pod's
// Eviction: True while a responder is active on it ("evacuating by <responder>, expected
// completion ..."), False once it failed with no responder left (nodemaint then evicts the pod
// itself, as it does when an owner declines); nodemaint's own pod condition beside such a request
// does not count (it is withdrawn). Requests and answers of the pod condition protocol by others
// stay. A Registered pod that no request of nodemaint's asks to evict is asked through the pod
// condition, if at all (nodemaint never evicts it: nodedecide.Decision.SignalOnly; or asked so
// before): it is returned as given, as is a pod that is not Registered, which is asked and
// answered through the pod condition protocol whatever request of nodemaint's it has (one left
// from before is withdrawn, see WritesOf). The pods
// given are not changed: a pod with nothing to answer is returned as given, an answered one is a
// copy that shares all but its conditions with the pod given (the drain only reads pods; a deep
// copy of each requested pod on every reconcile of its node was a tenth of the controller's CPU
// in scenario M).
func Answer(pods []*corev1.Pod, obs Observed) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, pod := range pods {
		if !Registered(pod) {
			out[i] = pod
			continue
		}
		ours := obs.ours(pod.UID)
		if ours == nil || ours.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction {
			out[i] = pod
			continue
		}
		p := withOwnConditions(pod)
		evacuation.SetCondition(p, corev1.PodCondition{
			Type: evacuation.Request, Status: corev1.ConditionTrue, Reason: evacuation.ReasonNodeMaintenance,
			Message: ours.Annotations[ReasonAnnotation], LastTransitionTime: requestedAt(ours),
		})
		if cond, ok := answer(obs.Evictions[pod.UID]); ok {
			evacuation.SetCondition(p, cond)
		}
		out[i] = p
	}
	return out
}

// withOwnConditions is a shallow copy of the pod with a copy of its conditions, which the caller
// may change.
func withOwnConditions(pod *corev1.Pod) *corev1.Pod {
	p := *pod
	p.Status.Conditions = slices.Clone(pod.Status.Conditions)
	return &p
}

// requestedAt is when nodemaint's request reached the API server, from which the response
// timeout counts: the later of its annotation (when nodemaint decided to ask, or asked again) and
// the request's creation. A large drain decides for many pods at once and creates their requests
// over seconds, through its client's token bucket; until a request exists, nobody has been asked.
func requestedAt(r *lifecyclev1alpha1.EvictionRequest) metav1.Time {
	if t, err := time.Parse(time.RFC3339, r.Annotations[RequestedAnnotation]); err == nil && t.After(r.CreationTimestamp.Time) {
		return metav1.NewTime(t)
	}
	return r.CreationTimestamp
}

// FirstAnswer reports the first answer to nodemaint's request req that the change of its pod's
// Eviction from old to cur brings, as Answer reads it (accepted: a responder active on it;
// declined: it failed, or its responders ended without moving the pod), and how long after the
// request reached the API server (requestedAt) it came: the EvictionRequest protocol's part of
// nodemaint_evacuation_answer_duration_seconds. Not ok when old had an answer already or cur has
// none.
func FirstAnswer(old, cur *lifecyclev1alpha1.Eviction, req *lifecyclev1alpha1.EvictionRequest) (accepted bool, latency time.Duration, ok bool) {
	if _, had := answer(old); had || req == nil {
		return false, 0, false
	}
	c, has := answer(cur)
	if !has || c.Status == corev1.ConditionUnknown {
		return false, 0, false
	}
	at := c.LastTransitionTime
	if at.IsZero() {
		at = cur.CreationTimestamp
	}
	return c.Status == corev1.ConditionTrue, max(0, at.Sub(requestedAt(req).Time)), true
}

// AnswerChanged reports whether the change of a pod's Eviction from old to cur changes what the
// drain reads of it: its answer (Answer: the active responder, its message and expected
// completion, a failure) or whether it is in progress. A responder's heartbeat that says nothing
// new changes neither: in a drain of 10,000 pods, the pods waiting for their Deployment's wave
// are heartbeated for as long as they wait, and each heartbeat looked at their node again.
func AnswerChanged(old, cur *lifecyclev1alpha1.Eviction) bool {
	was, had := answer(old)
	is, has := answer(cur)
	return had != has || !equality.Semantic.DeepEqual(was, is) || inProgress(old) != inProgress(cur)
}

// answer reads the Eviction as an EvacuationInitiated condition.
func answer(e *lifecyclev1alpha1.Eviction) (corev1.PodCondition, bool) {
	if e == nil {
		return corev1.PodCondition{}, false
	}
	if c := meta.FindStatusCondition(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)); c != nil && c.Status == metav1.ConditionTrue {
		return corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: c.Reason,
			Message: "Eviction " + e.Name + " failed: " + c.Message, LastTransitionTime: c.LastTransitionTime}, true
	}
	for i, t := range e.Status.TargetResponders {
		if t.State != lifecyclev1alpha1.ResponderStateActive {
			continue
		}
		var rs lifecyclev1alpha1.ResponderStatus
		for _, r := range e.Status.Responders {
			if r.Name == t.Name {
				rs = r
			}
		}
		if t.Name == names.ImperativeEvictor && rs.Message != nil && *rs.Message == names.HeldForDrain {
			// Nobody moves the pod: the drain decides as with an owner that did not answer, or
			// one that declined when the responders before the imperative evictor ended
			// without evicting it.
			return passedOver(e, e.Status.TargetResponders[:i])
		}
		msg := "evacuating by " + t.Name
		if rs.ExpectedCompletionTime != nil {
			msg += ", expected completion " + rs.ExpectedCompletionTime.UTC().Format(time.RFC3339)
		}
		if rs.Message != nil && *rs.Message != "" {
			msg += ": " + *rs.Message
		}
		since := metav1.Time{}
		if rs.StartTime != nil {
			since = *rs.StartTime
		}
		reason := "EvictionResponder"
		if t.Name == names.ImperativeEvictor && rs.Message != nil && strings.Contains(*rs.Message, "disruption budget") {
			// The imperative evictor is held by a PodDisruptionBudget: the drain reports it as
			// it reports its own refused evictions.
			reason = nodemaintv1alpha1.BlockedReasonPodDisruptionBudget
		}
		return corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: since}, true
	}
	return corev1.PodCondition{}, false
}

// passedOver reads the responders an Eviction passed over before its held imperative evictor as
// the owners' answer: declined (EvacuationInitiated=False) when there were any, no answer when the
// pod has no responder of its own.
func passedOver(e *lifecyclev1alpha1.Eviction, before []lifecyclev1alpha1.TargetResponder) (corev1.PodCondition, bool) {
	if len(before) == 0 {
		return corev1.PodCondition{}, false
	}
	var who []string
	for _, t := range before {
		who = append(who, t.Name+" "+strings.ToLower(string(t.State)))
	}
	var since metav1.Time
	for _, r := range e.Status.Responders {
		for _, ts := range []*metav1.Time{r.CompletionTime, r.HeartbeatTime, r.StartTime} {
			if ts != nil && ts.After(since.Time) {
				since = *ts
			}
		}
	}
	return corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionFalse, Reason: "ResponderDeclined",
		Message: "Eviction " + e.Name + ": no responder moved the pod (" + strings.Join(who, ", ") + ")", LastTransitionTime: since}, true
}

// Writes is what the drain writes of the protocol for one node.
type Writes struct {
	// Create are the EvictionRequests to create.
	Create []*lifecyclev1alpha1.EvictionRequest
	// Update are nodemaint's requests whose intent or reason changes: the object as wanted
	// (written with an optimistic lock on the observed one).
	Update []*lifecyclev1alpha1.EvictionRequest
	// Delete are nodemaint's requests that go.
	Delete []*lifecyclev1alpha1.EvictionRequest
	// Adopt are nodemaint's requests that stay as they are but are not owned by their pod yet
	// (created before requests carried PodOwner): the object as wanted, with the owner
	// reference (written with an optimistic lock on the observed one).
	Adopt []*lifecyclev1alpha1.EvictionRequest
}

// WritesOf turns the drain's decision into the protocol's writes: request are the pods asked to
// move now (reason: the drain's), withdraw those no longer asked, pods every pod on the node.
// A request is withdrawn by setting its intent to Withdrawn while its Eviction is in progress, so
// that the active responder learns of the cancellation, and deleted once the Eviction is over
// (canceled, failed or collected) or never existed; a request whose pod is gone is left to the
// garbage collector, which deletes it with its pod, or deleted where it is not owned by it. Every
// request of nodemaint's is owned by its pod (PodOwner): created so, and one that stays without
// it (created by an earlier version) is adopted. Only Registered pods are asked so: the others
// are the pod condition protocol's, and a request of nodemaint's for one of them (left from
// before) is withdrawn.
func WritesOf(obs Observed, pods []*corev1.Pod, request, withdraw []*corev1.Pod, reason string, now time.Time) Writes {
	var p Writes
	present := map[types.UID]bool{}
	withdrawn := map[types.UID]bool{}
	for _, pod := range pods {
		present[pod.UID] = true
		if !Registered(pod) {
			withdrawn[pod.UID] = true
		}
	}
	asked := map[types.UID]bool{}
	for _, pod := range request {
		if !Registered(pod) {
			continue
		}
		asked[pod.UID] = true
		r := obs.ours(pod.UID)
		if r == nil {
			p.Create = append(p.Create, newRequest(obs.Node, pod, reason, now))
			continue
		}
		if r.DeletionTimestamp != nil {
			continue
		}
		if r.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction || r.Annotations[ReasonAnnotation] != reason {
			want := r.DeepCopy()
			owned(want)
			if want.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction {
				want.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentEviction
				setAnnotation(want, RequestedAnnotation, now.UTC().Format(time.RFC3339))
			}
			setAnnotation(want, ReasonAnnotation, reason)
			p.Update = append(p.Update, want)
		}
	}
	updated := map[types.UID]bool{}
	for _, r := range p.Update {
		updated[r.Spec.Target.Pod.UID] = true
	}
	for _, pod := range withdraw {
		withdrawn[pod.UID] = true
	}
	for i := range obs.Requests {
		r := &obs.Requests[i]
		if r.Spec.Requester != names.Requester || r.Spec.Target.Pod == nil || r.DeletionTimestamp != nil {
			continue
		}
		uid := r.Spec.Target.Pod.UID
		switch {
		case !present[uid] && ownedBy(r):
			// Its pod is gone: the garbage collector deletes it with the pod, its owner.
		case !present[uid]:
			p.Delete = append(p.Delete, r)
		case asked[uid]:
			if !updated[uid] && !ownedBy(r) {
				p.Adopt = append(p.Adopt, adopted(r))
			}
		case r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction && !withdrawn[uid]:
			// Asked before and still wanted: the drain asks only once (the answered pod carries
			// the request).
			if !ownedBy(r) {
				p.Adopt = append(p.Adopt, adopted(r))
			}
		case r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction && inProgress(obs.Evictions[uid]):
			want := r.DeepCopy()
			owned(want)
			want.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
			p.Update = append(p.Update, want)
		case !inProgress(obs.Evictions[uid]) || final(r):
			p.Delete = append(p.Delete, r)
		default:
			// Withdrawn, its Eviction still under way.
			if !ownedBy(r) {
				p.Adopt = append(p.Adopt, adopted(r))
			}
		}
	}
	return p
}

// PodOwner is the owner reference of nodemaint's EvictionRequests: their target pod, so that the
// garbage collector deletes a request with its pod, whatever happened to the pod's node (deleted
// under maintenance, an autoscaler's scale-down) or to nodemaint. Not the controller and without
// blockOwnerDeletion: the reference only says what the request is for, it holds nothing, and it
// needs no permission beyond creating the request (the API server's
// OwnerReferencesPermissionEnforcement checks blockOwnerDeletion only).
func PodOwner(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: uid}
}

// ownedBy reports whether the request carries its target pod's owner reference.
func ownedBy(r *lifecyclev1alpha1.EvictionRequest) bool {
	for _, o := range r.OwnerReferences {
		if o.UID == r.Spec.Target.Pod.UID && o.Kind == "Pod" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// owned adds the target pod's owner reference to the request in memory, unless it has it.
func owned(r *lifecyclev1alpha1.EvictionRequest) {
	if !ownedBy(r) {
		r.OwnerReferences = append(r.OwnerReferences, PodOwner(r.Spec.Target.Pod.Name, r.Spec.Target.Pod.UID))
	}
}

// adopted is a copy of the request with its target pod's owner reference.
func adopted(r *lifecyclev1alpha1.EvictionRequest) *lifecyclev1alpha1.EvictionRequest {
	want := r.DeepCopy()
	owned(want)
	return want
}

// Current is the Eviction of a pod that answers for it when several exist (one left by an
// earlier controller beside a live one, or two controllers' before one stood aside): one in
// progress before one that ended or is being deleted, then the youngest; nil when there is none.
func Current(evs []*lifecyclev1alpha1.Eviction) *lifecyclev1alpha1.Eviction {
	var cur *lifecyclev1alpha1.Eviction
	for _, e := range evs {
		switch {
		case cur == nil, inProgress(e) && !inProgress(cur):
			cur = e
		case inProgress(e) == inProgress(cur) && cur.CreationTimestamp.Before(&e.CreationTimestamp):
			cur = e
		}
	}
	return cur
}

// inProgress: the Eviction exists and has not ended.
func inProgress(e *lifecyclev1alpha1.Eviction) bool {
	if e == nil || e.DeletionTimestamp != nil {
		return false
	}
	return !meta.IsStatusConditionTrue(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)) &&
		!meta.IsStatusConditionTrue(e.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted))
}

// final: the request's status says its Eviction ended.
func final(r *lifecyclev1alpha1.EvictionRequest) bool {
	return meta.IsStatusConditionTrue(r.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionFailed)) ||
		meta.IsStatusConditionTrue(r.Status.Conditions, string(lifecyclev1alpha1.EvictionConditionTargetEvicted))
}

func setAnnotation(r *lifecyclev1alpha1.EvictionRequest, k, v string) {
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	r.Annotations[k] = v
}

// RequestName is the name of nodemaint's EvictionRequest for a pod: one per pod, so that a
// second create from a stale cache fails instead of asking twice.
func RequestName(pod *corev1.Pod) string {
	return "nodemaint-" + strings.ToLower(string(pod.UID))
}

func newRequest(node string, pod *corev1.Pod, reason string, now time.Time) *lifecyclev1alpha1.EvictionRequest {
	return &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: RequestName(pod),
			// Collected with its pod (see PodOwner).
			OwnerReferences: []metav1.OwnerReference{PodOwner(pod.Name, pod.UID)},
			Labels:          map[string]string{NodeLabel: node},
			Annotations:     map[string]string{ReasonAnnotation: reason, RequestedAnnotation: now.UTC().Format(time.RFC3339)},
		},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
			Requester: names.Requester,
			Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
}

// Withdrawals is the part of the plan written before the node: the requests withdrawn, deleted
// and adopted.
func (p Writes) Withdrawals() Writes {
	out := Writes{Delete: p.Delete, Adopt: p.Adopt}
	for _, r := range p.Update {
		if r.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
			out.Update = append(out.Update, r)
		}
	}
	return out
}

// Requests is the part of the plan written once the node is cordoned: the requests created and
// those asking again.
func (p Writes) Requests() Writes {
	out := Writes{Create: p.Create}
	for _, r := range p.Update {
		if r.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
			out.Update = append(out.Update, r)
		}
	}
	return out
}
