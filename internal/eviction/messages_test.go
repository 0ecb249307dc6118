package eviction

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaint/nodemaint/pkg/evacuation/evictionrequest"
)

// TestEventNotes pins the words of the Events on an Eviction.
func TestEventNotes(t *testing.T) {
	created := &lifecyclev1alpha1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-1-p", OwnerReferences: []metav1.OwnerReference{{Name: "a"}, {Name: "b"}}},
		Spec:       lifecyclev1alpha1.EvictionSpec{Target: lifecyclev1alpha1.EvictionTarget{Pod: &lifecyclev1alpha1.EvictionPodReference{Name: "p"}}},
	}
	for _, tc := range []struct {
		event             Event
		typ, action, note string
	}{
		{CreatedEvent(created), corev1.EventTypeNormal, "Create", "Eviction of pod p for 2 requester(s)"},
		{Event{Reason: ResponderActive, Responder: "example.com/r"}, corev1.EventTypeNormal, "Reconcile", "example.com/r is the active responder"},
		{Event{Reason: ResponderCompleted, Responder: "example.com/r"}, corev1.EventTypeNormal, "Reconcile", "example.com/r completed"},
		{Event{Reason: ResponderCompleted, Responder: "example.com/r", ResponderMessage: "moved"}, corev1.EventTypeNormal, "Reconcile", "example.com/r completed: moved"},
		{Event{Reason: ResponderInterrupted, Responder: "example.com/r", HeartbeatDeadline: 20 * time.Minute}, corev1.EventTypeWarning, "Reconcile", "example.com/r: no heartbeat for 20m0s"},
		{Event{Reason: ResponderCanceled, Responder: "example.com/r"}, corev1.EventTypeNormal, "Reconcile", "example.com/r: every requester withdrew"},
		{Event{Reason: CanceledDueToNoRequesters}, corev1.EventTypeNormal, "Reconcile", "every requester withdrew its eviction intent"},
		{Event{Reason: NoFurtherResponder}, corev1.EventTypeWarning, "Reconcile", "no responder evicted the target and no further responder is available"},
		{EvictedEvent(created, "p"), corev1.EventTypeNormal, "Evict", evictionrequest.ImperativeEvictor + " evicted pod p through the Eviction API"},
	} {
		if typ, action, note := tc.event.Type(), tc.event.Action(), tc.event.Note(); typ != tc.typ || action != tc.action || note != tc.note {
			t.Errorf("%s: %s %s %q; want %s %s %q", tc.event.Reason, typ, action, note, tc.typ, tc.action, tc.note)
		}
	}
}

// TestConditionMessages pins the words of the conditions, the KEP's where it has them.
func TestConditionMessages(t *testing.T) {
	for reason, want := range map[lifecyclev1alpha1.EvictionConditionReason]string{
		lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction:          "the target is scheduled for eviction",
		lifecyclev1alpha1.EvictionConditionReasonPodDeleted:                "the target pod no longer exists",
		lifecyclev1alpha1.EvictionConditionReasonPodTerminal:               "the target pod reached a terminal phase",
		lifecyclev1alpha1.EvictionConditionReasonSucceeded:                 "the target was evicted",
		lifecyclev1alpha1.EvictionConditionReasonEvictionInvalid:           "Target Pod p is part of a Workload/PodGroup. Eviction of such pods is currently not supported.",
		lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters: "every requester withdrew its eviction intent",
		lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder:        "no responder evicted the target and no further responder is available",
	} {
		if got := conditionMessage(reason, "p"); got != want {
			t.Errorf("%s: %q; want %q", reason, got, want)
		}
	}
}

// TestImperativeMessages pins the words of the imperative evictor's status message.
func TestImperativeMessages(t *testing.T) {
	for _, tc := range []struct {
		step   imperativeStep
		detail string
		want   string
	}{
		{evicting, "", "evicting the pod through the Eviction API"},
		{backingOff, "refused", "Could not evict the pod, retrying with a back-off: refused"},
		{terminating, "", "the pod is terminating"},
		{heldForDrain, "", evictionrequest.HeldForDrain},
		{unsupported, "", "API-initiated eviction of DaemonSet and mirror pods is not supported"},
		{protected, "nodemaint-controller's own pod", "nodemaint-controller's own pod: not evicted by nodemaint"},
	} {
		if got := imperativeMessage(tc.step, tc.detail); got != tc.want {
			t.Errorf("step %d: %q; want %q", tc.step, got, tc.want)
		}
	}
}

// TestRecordedEvents: the steps of every pod's eviction are not Events; what disrupts the pod, goes
// wrong, hands over or ends a canceled eviction is.
func TestRecordedEvents(t *testing.T) {
	for reason, want := range map[EventReason]bool{
		EvictionCreated: false, ResponderActive: false, ResponderCanceled: false,
		ResponderCompleted: true, ResponderInterrupted: true, CanceledDueToNoRequesters: true, NoFurtherResponder: true, PodEvicted: true,
	} {
		if got := (Event{Reason: reason}).Recorded(); got != want {
			t.Errorf("%s recorded: %v, want %v", reason, got, want)
		}
	}
}
