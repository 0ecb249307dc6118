package evictiondecide

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
		{Event{Reason: ResponderInterrupted, Responder: "example.com/r", Ended: true}, corev1.EventTypeWarning, "Reconcile", "example.com/r: no completion reported within 5s of the pod's end"},
		{Event{Reason: ResponderCanceled, Responder: "example.com/r"}, corev1.EventTypeNormal, "Reconcile", "example.com/r: every requester withdrew"},
		{Event{Reason: CanceledDueToNoRequesters}, corev1.EventTypeNormal, "Reconcile", "No active requesters with eviction intent."},
		{Event{Reason: NoFurtherResponder}, corev1.EventTypeWarning, "Reconcile", "All responders have completed without evicting the target."},
		{EvictedEvent(created, "p"), corev1.EventTypeNormal, "Evict", evictionrequest.ImperativeEvictor + " evicted pod p through the Eviction API"},
	} {
		if typ := tc.event.Type(); typ != tc.typ {
			t.Errorf("%s: type %s; want %s", tc.event.Reason, typ, tc.typ)
		}
		if action := tc.event.Action(); action != tc.action {
			t.Errorf("%s: action %s; want %s", tc.event.Reason, action, tc.action)
		}
		if note := tc.event.Note(); note != tc.note {
			t.Errorf("%s: note %q; want %q", tc.event.Reason, note, tc.note)
		}
	}
}

// TestConditionMessages pins the words of the conditions: upstream's controller's.
func TestConditionMessages(t *testing.T) {
	for reason, want := range map[lifecyclev1alpha1.EvictionConditionReason]string{
		lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction:          "",
		lifecyclev1alpha1.EvictionConditionReasonPodDeleted:                "Target pod has been deleted.",
		lifecyclev1alpha1.EvictionConditionReasonPodTerminal:               "Pod has reached terminal state.",
		lifecyclev1alpha1.EvictionConditionReasonSucceeded:                 "",
		lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters: "No active requesters with eviction intent.",
		lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder:        "All responders have completed without evicting the target.",
	} {
		if got := conditionMessage(reason); got != want {
			t.Errorf("%s: %q; want %q", reason, got, want)
		}
	}
	for why, want := range map[invalidReason]string{
		invalidNotFound:        "Target pod not found.",
		invalidUIDMismatch:     "Target pod UID mismatch: expected a, got b.",
		invalidSchedulingGroup: "Target pod references a SchedulingGroup. Eviction is currently not supported.",
		invalidDuplicate:       "Active Eviction already exists for the same target.",
	} {
		if got := invalidMessage(why, "expected a, got b"); got != want {
			t.Errorf("invalid %d: %q; want %q", why, got, want)
		}
	}
}

// TestImperativeMessages pins the words of the imperative evictor's status message: upstream's
// responder's, but for nodemaint's own steps.
func TestImperativeMessages(t *testing.T) {
	for _, tc := range []struct {
		step     imperativeStep
		detail   string
		attempts int
		want     string
	}{
		{evicting, "", 0, `"p" pod is being evicted via the /eviction subresource`},
		{refused, "refused", 2, `"p" pod deletion via the /eviction subresource failed (attempts=2): refused`},
		{evicted, "", 0, `"p" pod has been been marked for deletion via the /eviction subresource and will be terminated gracefully`},
		{terminatingEvicted, "", 0, `"p" pod has been been marked for deletion via the /eviction subresource and is being terminated gracefully`},
		{terminating, "", 0, `"p" pod has been been marked for deletion and is being terminated gracefully`},
		{podGone, "", 0, `"p" pod has been deleted and fully terminated`},
		{podDeletedTerminal, "Succeeded", 0, `"p" pod has been deleted and fully terminated (pod phase="Succeeded")`},
		{podTerminal, "Failed", 0, `"p" pod has been fully terminated (pod phase="Failed")`},
		{heldForDrain, "", 0, evictionrequest.HeldForDrain},
		{unsupported, "", 0, "API-initiated eviction of DaemonSet and mirror pods is not supported: not evicted by nodemaint"},
		{protected, "nodemaint-controller's own pod", 0, "nodemaint-controller's own pod: not evicted by nodemaint"},
	} {
		if got := imperativeMessage(tc.step, "p", tc.detail, tc.attempts); got != tc.want {
			t.Errorf("step %d: %q; want %q", tc.step, got, tc.want)
		}
	}
	for _, tc := range []struct {
		step   imperativeStep
		detail string
		want   bool
	}{{unsupported, "", true}, {protected, "x", true}, {podGone, "", false}} {
		if got := notEvicted(imperativeMessage(tc.step, "p", tc.detail, 0)); got != tc.want {
			t.Errorf("notEvicted(step %d's message) = %t; want %t", tc.step, got, tc.want)
		}
	}
	for _, tc := range []struct {
		step imperativeStep
		want bool
	}{{evicted, true}, {terminating, false}} {
		if got := evictedByUs(imperativeMessage(tc.step, "p", "", 0)); got != tc.want {
			t.Errorf("evictedByUs(step %d's message) = %t; want %t", tc.step, got, tc.want)
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
