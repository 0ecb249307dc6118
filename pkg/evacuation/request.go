package evacuation

// One interface over both protocols a responder answers: KEP-4212's pod conditions and KEP-4563's
// EvictionRequest API (lifecycle.k8s.io/v1alpha1 Evictions).

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Protocol is how a request reached a pod's responder.
type Protocol string

const (
	// PodConditions is KEP-4212's protocol: the pod condition EvacuationRequest, answered with
	// EvacuationInitiated.
	PodConditions Protocol = "pod-conditions"
	// EvictionRequests is KEP-4563's protocol: requesters create EvictionRequests, the
	// evictionrequest-controller makes one Eviction per pod and gives its responders, one at a
	// time, the Active state; the active responder answers in the Eviction's
	// status.responders.
	EvictionRequests Protocol = "eviction-request"
)

// PodRequest is one request for a pod to leave its node, as the responder sees it, whichever
// protocol carried it. Build one with ForPod (pod conditions) or ForEviction, or let For choose.
//
// A responder answers with one of:
//   - Accept: it moves the pod; Progress says so again, with how far it got, until the pod is
//     gone. On an Eviction each call is also the heartbeat the Eviction controller waits for
//     (KEP-4563: at least every 20 minutes, or the eviction passes to the next responder).
//   - Decline: it does not move the pod; eviction (or, on an Eviction, the next responder) may.
//   - Complete: it is done (the pod is replaced and going).
//
// Every answer is a patch of the pod's status or the Eviction's status.responders entry of the
// responder alone, so answers of several responders and the requesters' writes never conflict.
type PodRequest interface {
	// Pod is the pod asked to leave.
	Pod() *corev1.Pod
	// Protocol is the protocol that carried the request.
	Protocol() Protocol
	// Requesters are who asked: the EvacuationRequest condition's reason, or the Eviction's
	// requesters whose intent is still Eviction.
	Requesters() []string
	// Since is when the request reached this responder: the condition's transition, or the
	// responder's startTime (when the Eviction controller made it Active).
	Since() time.Time
	// Accepted reports whether this responder accepted the request earlier.
	Accepted() bool
	// Accept accepts the request with the progress so far.
	Accept(ctx context.Context, c client.Client, p Progress) error
	// AcceptMarking accepts the request together with pod annotations that go with the
	// acceptance (such as a lowered pod-deletion-cost; a nil value removes one), in one write
	// under either protocol: on pod conditions the condition and the annotations in one patch of
	// the pod's status; on an Eviction the annotations and AcceptedEvictionAnnotation in one patch
	// of the pod, the Eviction written first by the heartbeat due HeartbeatInterval after the
	// responder became Active (KEP-4563 counts its 20 minutes from that startTime too), which a
	// pod that moves sooner never needs. Without annotations it is Accept. The pod given to For
	// is updated to what the API server returned.
	AcceptMarking(ctx context.Context, c client.Client, p Progress, annotations map[string]*string) error
	// Progress reports the progress of an accepted request. On pod conditions it updates the
	// message only; on an Eviction it is a heartbeat too. A responder calls it when
	// HeartbeatDue says so. A zero Progress says nothing new: on an Eviction, a heartbeat when
	// due with what was reported; on pod conditions, nothing.
	Progress(ctx context.Context, c client.Client, p Progress) error
	// Reported reports whether the responder's last answer or report says p's reason and
	// message (its expected completion aside).
	Reported(p Progress) bool
	// HeartbeatDue is when Progress should be called next for an accepted request, to keep it
	// from being passed over; the zero time when no heartbeat is needed (pod conditions).
	HeartbeatDue() time.Time
	// Decline declines the request, with a reason (CamelCase) and a message.
	Decline(ctx context.Context, c client.Client, reason, message string) error
	// Complete reports the request done: the pod was moved and is being removed. On pod
	// conditions the pod's removal says so and Complete does nothing.
	Complete(ctx context.Context, c client.Client, message string) error
}

// Progress is what an accepting responder reports.
type Progress struct {
	// Reason is a CamelCase word for the step (EvacuationInitiated's reason on pod conditions).
	Reason string
	// Message says, for people, how far the responder got.
	Message string
	// ExpectedCompletion is when the responder expects to be done; zero when it cannot tell.
	ExpectedCompletion time.Time
}

// For returns the request to answer for the pod as the named responder: the Eviction of the pod
// that has the responder Active, when there is one among evictions (nil or the pod's Evictions),
// else the pod's EvacuationRequest condition; nil when neither asks. responder may be "" when
// the responder answers pod conditions only.
func For(pod *corev1.Pod, evictions []*lifecyclev1alpha1.Eviction, responder string) PodRequest {
	if responder != "" {
		for _, ev := range evictions {
			if r := ForEviction(ev, pod, responder); r != nil {
				return r
			}
		}
	}
	return ForPod(pod)
}

// ForPod returns the pod's request on pod conditions, nil when no requester asks.
func ForPod(pod *corev1.Pod) PodRequest {
	if !Requested(pod) {
		return nil
	}
	return conditionRequest{pod: pod}
}

// conditionRequest is a request on KEP-4212's pod conditions.
type conditionRequest struct {
	pod *corev1.Pod
}

func (r conditionRequest) Pod() *corev1.Pod        { return r.pod }
func (r conditionRequest) Protocol() Protocol      { return PodConditions }
func (r conditionRequest) Accepted() bool          { return Accepted(r.pod) }
func (r conditionRequest) HeartbeatDue() time.Time { return time.Time{} }

func (r conditionRequest) Requesters() []string {
	return []string{Condition(r.pod, Request).Reason}
}

func (r conditionRequest) Since() time.Time {
	return Condition(r.pod, Request).LastTransitionTime.Time
}

func (r conditionRequest) Accept(ctx context.Context, c client.Client, p Progress) error {
	return Accept(ctx, c, r.pod, p.Reason, p.Message)
}

func (r conditionRequest) AcceptMarking(ctx context.Context, c client.Client, p Progress, annotations map[string]*string) error {
	return Answer(ctx, c, r.pod, &corev1.PodCondition{Type: Initiated, Status: corev1.ConditionTrue, Reason: p.Reason, Message: p.Message}, annotations)
}

func (r conditionRequest) Progress(ctx context.Context, c client.Client, p Progress) error {
	if p == (Progress{}) {
		return nil
	}
	return Accept(ctx, c, r.pod, p.Reason, p.Message)
}

func (r conditionRequest) Reported(p Progress) bool {
	c := Condition(r.pod, Initiated)
	return c != nil && c.Status == corev1.ConditionTrue && c.Reason == p.Reason && c.Message == p.Message
}

func (r conditionRequest) Decline(ctx context.Context, c client.Client, reason, message string) error {
	return Decline(ctx, c, r.pod, reason, message)
}

func (conditionRequest) Complete(context.Context, client.Client, string) error { return nil }

// requesters lists the requesters of an Eviction whose intent is still Eviction.
func requesters(ev *lifecyclev1alpha1.Eviction) []string {
	var out []string
	for _, r := range ev.Status.Requesters {
		if r.Intent == lifecyclev1alpha1.RequesterIntentEviction {
			out = append(out, r.Name)
		}
	}
	return slices.Clip(out)
}
