package evacuation

// The responder's side of KEP-4563's Eviction (lifecycle.k8s.io/v1alpha1).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// HeartbeatInterval is how often an accepted Eviction gets a heartbeat (Progress) when nothing
// else changes: half the Eviction API's 20-minute deadline, the longest that still lets one
// heartbeat be missed (a responder restarting, or cut off from the API server for minutes) without
// the Eviction passing to the next responder. More often only loads the control plane while the
// pods wait for their Deployment's wave: in a drain of 10,000 pods, a heartbeat every minute was
// 8.2 Eviction writes a pod, and every 3 minutes (KEP-4563's example) 5.4, half of the
// controller's writes; a pod moved within 10 minutes of its acceptance costs none.
const HeartbeatInterval = evictionrequest.HeartbeatDeadline / 2

// ForEviction returns the request the Eviction makes of the named responder for the pod, nil
// unless the Eviction targets this very pod (name and UID), the responder is Active on it and has
// not completed its turn (declined or done: completionTime since its startTime), and the Eviction
// is neither canceled nor over (condition Failed or TargetEvicted True).
func ForEviction(ev *lifecyclev1alpha1.Eviction, pod *corev1.Pod, responder string) PodRequest {
	target := ev.Spec.Target.Pod
	if target == nil || ev.Namespace != pod.Namespace || target.Name != pod.Name || target.UID != pod.UID ||
		!ev.DeletionTimestamp.IsZero() || ResponderState(ev, responder) != lifecyclev1alpha1.ResponderStateActive {
		return nil
	}
	for _, c := range ev.Status.Conditions {
		if (c.Type == string(lifecyclev1alpha1.EvictionConditionFailed) || c.Type == string(lifecyclev1alpha1.EvictionConditionTargetEvicted)) &&
			c.Status == metav1.ConditionTrue {
			return nil
		}
	}
	status := ResponderStatusOf(ev, responder)
	if status.CompletionTime != nil && (status.StartTime == nil || !status.CompletionTime.Before(status.StartTime)) {
		return nil
	}
	return evictionRequest{eviction: ev, pod: pod, responder: responder, status: status}
}

// ResponderState is the state the Eviction controller gave the named responder on the Eviction,
// "" when the Eviction does not list it.
func ResponderState(ev *lifecyclev1alpha1.Eviction, responder string) lifecyclev1alpha1.ResponderStateType {
	for _, t := range ev.Status.TargetResponders {
		if t.Name == responder {
			return t.State
		}
	}
	return ""
}

// ResponderStatusOf is the named responder's entry of the Eviction's status.responders (a zero
// entry with the name when there is none yet).
func ResponderStatusOf(ev *lifecyclev1alpha1.Eviction, responder string) lifecyclev1alpha1.ResponderStatus {
	for _, s := range ev.Status.Responders {
		if s.Name == responder {
			return s
		}
	}
	return lifecyclev1alpha1.ResponderStatus{Name: responder}
}

// evictionRequest is a request on an Eviction whose active responder is responder.
type evictionRequest struct {
	eviction  *lifecyclev1alpha1.Eviction
	pod       *corev1.Pod
	responder string
	status    lifecyclev1alpha1.ResponderStatus
}

func (r evictionRequest) Pod() *corev1.Pod     { return r.pod }
func (r evictionRequest) Protocol() Protocol   { return EvictionRequests }
func (r evictionRequest) Requesters() []string { return requesters(r.eviction) }

func (r evictionRequest) Since() time.Time {
	if r.status.StartTime != nil {
		return r.status.StartTime.Time
	}
	return r.eviction.CreationTimestamp.Time
}

// Accepted: the responder gave a heartbeat since it became Active (ForEviction already left out
// a turn it completed), or accepted on the pod (AcceptMarking).
func (r evictionRequest) Accepted() bool {
	return r.heartbeat() || r.acceptedOnPod()
}

// heartbeat: the responder wrote its entry since it became Active.
func (r evictionRequest) heartbeat() bool {
	return r.status.HeartbeatTime != nil && (r.status.StartTime == nil || !r.status.HeartbeatTime.Before(r.status.StartTime))
}

// acceptedOnPod: the pod names this Eviction as the one accepted with the pod's marks.
func (r evictionRequest) acceptedOnPod() bool {
	return r.eviction.UID != "" && r.pod.Annotations[AcceptedEvictionAnnotation] == string(r.eviction.UID)
}

// HeartbeatDue is HeartbeatInterval after the last heartbeat, or after the responder became
// Active when it accepted on the pod and has not written the Eviction since.
func (r evictionRequest) HeartbeatDue() time.Time {
	switch {
	case r.heartbeat():
		return r.status.HeartbeatTime.Add(HeartbeatInterval)
	case r.acceptedOnPod():
		return r.Since().Add(HeartbeatInterval)
	}
	return time.Time{}
}

func (r evictionRequest) Accept(ctx context.Context, c client.Client, p Progress) error {
	return r.patch(ctx, c, responderPatch{
		HeartbeatTime:          now(),
		ExpectedCompletionTime: ahead(p.ExpectedCompletion, time.Now()),
		Message:                message(p.Reason, p.Message),
	})
}

// AcceptMarking writes the annotations and AcceptedEvictionAnnotation on the pod, in one patch of
// that pod only (its UID), and nothing on the Eviction: its first write is the first heartbeat,
// which then says p's reason and message (the responder's Progress). Without annotations it is
// Accept.
func (r evictionRequest) AcceptMarking(ctx context.Context, c client.Client, p Progress, annotations map[string]*string) error {
	if len(annotations) == 0 {
		return r.Accept(ctx, c, p)
	}
	marks := maps.Clone(annotations)
	marks[AcceptedEvictionAnnotation] = ptr.To(string(r.eviction.UID))
	if err := c.Patch(ctx, r.pod, AnnotationsPatch(r.pod.UID, marks)); err != nil {
		return fmt.Errorf("accepting Eviction %s on pod %s: %w", r.eviction.Name, r.pod.Name, err)
	}
	return nil
}

// ahead is the expected completion to report at now: none once it has passed (a pod still
// terminating after its grace period, a surge past its estimate). The Eviction API refuses an
// expected completion in the past, and the responder cannot tell a later one.
func ahead(t, now time.Time) *metav1.Time {
	if !t.After(now) {
		return nil
	}
	return timeOrNil(t)
}

// Progress writes a heartbeat when one is due or the message or expected completion changed;
// otherwise it writes nothing. An expected completion that only moved later, while the one
// reported is still ahead, waits for the next write: a responder whose estimate moves with every
// step of its work (a surge's deadline with every replacement's progress) would otherwise write
// the Eviction at each step, and every pod of a wave at every replacement's. A zero Progress is
// nothing new: a heartbeat when due, with what was reported.
func (r evictionRequest) Progress(ctx context.Context, c client.Client, p Progress) error {
	t := time.Now()
	if p == (Progress{}) {
		if !r.Accepted() || t.Before(r.HeartbeatDue()) {
			return nil
		}
		return r.patch(ctx, c, responderPatch{HeartbeatTime: now(),
			ExpectedCompletionTime: r.status.ExpectedCompletionTime, Message: ptr.Deref(r.status.Message, "")})
	}
	if r.Accepted() && t.Before(r.HeartbeatDue()) && r.Reported(p) &&
		expectedHolds(r.status.ExpectedCompletionTime, ahead(p.ExpectedCompletion, t), t) {
		return nil
	}
	return r.Accept(ctx, c, p)
}

// Reported reports whether the responder's entry says p's reason and message.
func (r evictionRequest) Reported(p Progress) bool {
	return r.status.Message != nil && *r.status.Message == message(p.Reason, p.Message)
}

// expectedHolds reports whether the expected completion reported still stands for the one
// wanted: the same, or, both set, one still ahead and the wanted one later.
func expectedHolds(reported, want *metav1.Time, now time.Time) bool {
	if reported == nil || want == nil {
		return reported.Equal(want)
	}
	return reported.Equal(want) || (reported.After(now) && want.After(reported.Time))
}

// Decline completes the responder's turn without evicting: KEP-4563's way for an active
// responder to decline, which passes the eviction to the next responder.
func (r evictionRequest) Decline(ctx context.Context, c client.Client, reason, msg string) error {
	t := now()
	return r.patch(ctx, c, responderPatch{HeartbeatTime: t, CompletionTime: t, Message: message(reason, "declined: "+msg)})
}

func (r evictionRequest) Complete(ctx context.Context, c client.Client, msg string) error {
	if r.status.CompletionTime != nil {
		return nil
	}
	t := now()
	return r.patch(ctx, c, responderPatch{HeartbeatTime: t, CompletionTime: t, Message: message("Completed", msg)})
}

// responderPatch is the responder's entry of status.responders in a strategic merge patch:
// the list merges on name, so the patch touches this entry alone. A nil field is removed.
type responderPatch struct {
	Name                   string       `json:"name"`
	HeartbeatTime          *metav1.Time `json:"heartbeatTime"`
	ExpectedCompletionTime *metav1.Time `json:"expectedCompletionTime"`
	CompletionTime         *metav1.Time `json:"completionTime,omitempty"`
	Message                string       `json:"message"`
}

func (r evictionRequest) patch(ctx context.Context, c client.Client, p responderPatch) error {
	p.Name = r.responder
	body, err := json.Marshal(map[string]any{"status": map[string]any{"responders": []responderPatch{p}}})
	if err != nil {
		return err
	}
	ev := r.eviction.DeepCopy()
	if err := c.Status().Patch(ctx, ev, client.RawPatch(types.StrategicMergePatchType, body)); err != nil {
		return fmt.Errorf("patching the status of Eviction %s: %w", r.eviction.Name, err)
	}
	return nil
}

func now() *metav1.Time {
	t := metav1.Now()
	return &t
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

// message is the responder's status message: its reason, then what it says.
func message(reason, msg string) string {
	if reason == "" {
		return msg
	}
	return reason + ": " + msg
}
