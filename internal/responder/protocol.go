// Package responder is the responder's side of the two evacuation protocols, between them and
// its decision. The responder decides (internal/controller/deployment/deploymentdecide, pure) on pods whose
// conditions say what is asked and answered, as KEP-4212's pod conditions do; on a cluster that
// serves KEP-4563's EvictionRequest API, a request may instead be an Eviction on which the
// responder is Active. Observe turns those into the same view (a copy of the pod with the
// conditions the Eviction stands for), so that the decision does not know which protocol asked,
// and keeps, per pod, the evacuation.PodRequest through which the answers go back: the pod's
// conditions, or the Eviction's status.responders entry of the responder. Heartbeats, progress
// and completion, which the pod conditions do not have, are decided here too (Heartbeats).
package responder

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

// ReasonEviction is the reason of the conditions a view stands in for an Eviction's request and
// for the responder's earlier acceptance.
const ReasonEviction = "Eviction"

// View is what the responder's decision sees of a Deployment's pods, whichever protocol asked.
type View struct {
	// Pods are the pods as the decision sees them: a pod the responder is Active on through an
	// Eviction is a copy with EvacuationRequest=True (and EvacuationInitiated=True once the
	// responder accepted); the others are the pods themselves.
	Pods     []*corev1.Pod
	requests map[types.UID]evacuation.PodRequest
}

// Observe builds the view of pods for the named responder. evictions are the Evictions by target
// pod UID (nil on a cluster that does not serve the API, or when responder is "").
func Observe(pods []*corev1.Pod, evictions map[types.UID][]*lifecyclev1alpha1.Eviction, responder string) View {
	v := View{Pods: make([]*corev1.Pod, 0, len(pods)), requests: make(map[types.UID]evacuation.PodRequest)}
	for _, pod := range pods {
		req := evacuation.For(pod, evictions[pod.UID], responder)
		if req == nil {
			v.Pods = append(v.Pods, pod)
			continue
		}
		if req.Protocol() == evacuation.EvictionRequests {
			// The request answers through the view's own copy, which an acceptance on the pod
			// (AcceptMarking) updates, never through the cache's pod.
			pod = asConditions(pod, req)
			req = evacuation.For(pod, evictions[pod.UID], responder)
		}
		v.requests[pod.UID] = req
		v.Pods = append(v.Pods, pod)
	}
	return v
}

// asConditions is a copy of the pod with the conditions the Eviction's request stands for: the
// request since the responder became Active, and the acceptance once it accepted (a heartbeat
// on the Eviction, or the pod's AcceptedEvictionAnnotation naming it). The pod's own
// evacuation conditions, if another requester set some, are replaced: the Eviction is what the
// responder answers.
func asConditions(pod *corev1.Pod, req evacuation.PodRequest) *corev1.Pod {
	pod = pod.DeepCopy()
	evacuation.RemoveCondition(pod, evacuation.Request)
	evacuation.RemoveCondition(pod, evacuation.Initiated)
	since := metav1.NewTime(req.Since())
	requester := ReasonEviction
	if names := req.Requesters(); len(names) > 0 {
		requester = names[0]
	}
	evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Request, Status: corev1.ConditionTrue,
		Reason: ReasonEviction, Message: "Eviction requested by " + requester, LastTransitionTime: since})
	if req.Accepted() {
		evacuation.SetCondition(pod, corev1.PodCondition{Type: evacuation.Initiated, Status: corev1.ConditionTrue,
			Reason: ReasonEviction, Message: "accepted on the Eviction", LastTransitionTime: since})
	}
	return pod
}

// Own returns a pod of Pods for the caller to change as it writes it: a copy of the pod itself,
// which becomes the pod of its request on pod conditions (an answer through the request changes
// the copy); a pod the view made for an Eviction's request is returned as it is, already the
// view's own (the request writes the Eviction, not the pod). Pods are otherwise read only: they
// may be the cache's.
func (v View) Own(pod *corev1.Pod) *corev1.Pod {
	req := v.requests[pod.UID]
	if req != nil && req.Protocol() == evacuation.EvictionRequests {
		return pod
	}
	own := pod.DeepCopy()
	if req != nil {
		v.requests[pod.UID] = evacuation.ForPod(own)
	}
	return own
}

// Request is the request of the pod (as in Pods, or the pod itself), nil when none asks.
func (v View) Request(pod *corev1.Pod) evacuation.PodRequest {
	return v.requests[pod.UID]
}

// Beat is one write the responder owes an Eviction besides its answers: a progress report (a
// heartbeat when due; the first write of the Eviction when the responder accepted on the pod).
type Beat struct {
	Request evacuation.PodRequest
	// Terminating: the pod is being removed (replaced: the ReplicaSet removes it after the
	// surge). The responder says so and keeps its turn until the pod is gone: setting
	// completionTime now would hand the eviction to the next responder (KEP-4563), while the
	// pod's end completes it (the Eviction's TargetEvicted).
	Terminating bool
}

// Heartbeats decides, for the Evictions the responder accepted, which are owed a heartbeat at
// now: those whose heartbeat is due (evacuation.PodRequest.HeartbeatDue, KEP-4563's cadence),
// each with the progress the responder has to report then. Between heartbeats the acceptance
// stands for the whole move: a report at each step (the pod's wave surging, the pod being
// removed) was a write of the Eviction for each step of each pod, more than its acceptance and
// its Eviction's own writes together. next is when the earliest heartbeat is due after now
// (zero when none), for the responder to look again by then.
func (v View) Heartbeats(pods []*corev1.Pod, now time.Time) (beats []Beat, next time.Time) {
	for _, pod := range pods {
		req := v.requests[pod.UID]
		if req == nil || req.Protocol() != evacuation.EvictionRequests || !req.Accepted() {
			continue
		}
		due := req.HeartbeatDue()
		if !due.After(now) {
			beats = append(beats, Beat{Request: req, Terminating: !pod.DeletionTimestamp.IsZero()})
			due = now.Add(evacuation.HeartbeatInterval)
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	slices.SortFunc(beats, func(a, b Beat) int { return a.Request.Since().Compare(b.Request.Since()) })
	return beats, next
}
